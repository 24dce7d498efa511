"""The codec: strict decoding, one error type naming the field, lossless round-trips."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentrio.protocol import FrameDecodeError, decode_client_frame, decode_server_frame, dumps
from agentrio.protocol.causes import PERSON_CAUSES, Cause
from agentrio.protocol.codec import MAX_MESSAGE_BYTES, converter, decode
from agentrio.protocol.events import EVENT_TYPES, Event, Question
from agentrio.protocol.frames import (
    CLIENT_FRAME_TYPES,
    CONTROL_FRAME_TYPES,
    SERVER_FRAME_TYPES,
    Cancel,
    ClientFrame,
    LegList,
    Run,
)

ROOT = Path(__file__).resolve().parents[2]

json_text = st.text(max_size=40)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | json_text,
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(json_text, children, max_size=5)
    ),
    max_leaves=30,
)


def _strategy_for(cls: type) -> st.SearchStrategy[Any]:
    """Instances of a frame/event class built from its attrs fields' types."""
    if cls is Event:
        return st.one_of(*[_strategy_for(c) for c in EVENT_TYPES])
    attrs.resolve_types(cls)  # annotations are strings until resolved
    fields = {f.name: _type_strategy(f.type) for f in attrs.fields(cls)}
    return st.builds(cls, **fields)


def _type_strategy(tp: Any) -> st.SearchStrategy[Any]:
    import typing

    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is str:
        return st.text(max_size=30)
    if tp is int:
        return st.integers(min_value=-(2**53), max_value=2**53)
    if tp is float:
        return st.floats(allow_nan=False, allow_infinity=False)
    if tp is bool:
        return st.booleans()
    if tp is Question:
        return st.builds(
            Question,
            text=st.text(max_size=20),
            options=st.lists(st.text(max_size=10), max_size=3),
            multi=st.booleans(),
            secret=st.booleans(),
        )
    if tp is Event or (isinstance(tp, type) and tp in EVENT_TYPES):
        return _strategy_for(tp)
    if origin is typing.Literal:
        return st.sampled_from(args)
    if tp is Cause:  # a frame carries only the causes a person gives
        return st.sampled_from(sorted(PERSON_CAUSES))
    if origin is list:
        return st.lists(_type_strategy(args[0]), max_size=3)
    if origin is dict:
        return st.dictionaries(st.text(max_size=10), json_values, max_size=3)
    if origin in (typing.Union, __import__("types").UnionType):
        return st.one_of(*[_type_strategy(a) for a in args])
    if tp is type(None):
        return st.none()
    if attrs.has(tp):
        return _strategy_for(tp)
    raise AssertionError(f"no strategy for {tp!r}")


@pytest.mark.parametrize("cls", CLIENT_FRAME_TYPES + SERVER_FRAME_TYPES, ids=lambda c: c.TYPE)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_any_frame_round_trips(cls: type, data: st.DataObject) -> None:
    """SPEC §8: any frame instance encodes to JSON and decodes back equal."""
    frame = data.draw(_strategy_for(cls))
    decoder = decode_client_frame if cls in CLIENT_FRAME_TYPES else decode_server_frame
    assert decoder(dumps(frame)) == frame


@settings(max_examples=500, deadline=None)
@given(value=json_values)
def test_random_json_raises_only_frame_decode_error(value: Any) -> None:
    """R71: random JSON never raises anything but FrameDecodeError, naming a field."""
    for decoder in (decode_client_frame, decode_server_frame):
        try:
            decoder(json.dumps(value))
        except FrameDecodeError as exc:
            assert exc.field.startswith("$")
            assert str(exc).startswith(exc.field + ": ")


@settings(max_examples=300, deadline=None)
@given(
    tag=st.sampled_from([c.TYPE for c in CLIENT_FRAME_TYPES]),
    fields=st.dictionaries(
        st.sampled_from(["request_id", "session_id", "input", "task_hash", "id", "answers"]),
        json_values,
        max_size=4,
    ),
)
def test_random_fields_of_known_types_raise_only_frame_decode_error(
    tag: str, fields: dict[str, Any]
) -> None:
    """R71: a known type with random fields decodes or names the offending field."""
    try:
        decode_client_frame(json.dumps({"type": tag, **fields}))
    except FrameDecodeError as exc:
        assert exc.field.startswith("$")


@pytest.mark.parametrize(
    ("text", "field", "problem"),
    [
        ("{", "$", "invalid JSON"),
        ("[]", "$", "expected an object, got an array"),
        ("{}", "$.type", "required field missing"),
        ('{"type": "nope"}', "$.type", "unknown frame type 'nope'"),
        ('{"type": "run"}', "$.request_id", "required field missing"),
        (
            '{"type": "run", "request_id": 1, "session_id": "s", "input": "x"}',
            "$.request_id",
            "expected a string, got a number",
        ),
        (
            '{"type": "run", "request_id": "1", "session_id": "s", "input": "x", "z": 1}',
            "$",
            "extra fields found (z)",
        ),
        ('{"type": "reply", "id": "a", "answers": "abc"}', "$.answers", "expected an array"),
        ('{"type": "reply", "id": "a", "answers": ["a", 2]}', "$.answers[1]", "expected a string"),
        ('{"type": "reply", "id": "a", "action": "x"}', "$.action", "expected 'cancel_task'"),
        ('{"type": "reply", "id": "a", "stop": "x"}', "$.stop", "must be one of"),
        ('{"type": "cancel", "task_hash": "t", "cause": "shutdown"}', "$.cause", "front-end"),
        (
            '{"type": "cancel", "task_hash": "t", "cause": "paused", "pause": true}',
            "$.pause",
            "give 'cause' only",
        ),
        ('{"type": "cancel", "task_hash": "t", "pause": "yes"}', "$.pause", "expected a boolean"),
    ],
)
def test_decode_errors_name_the_field(text: str, field: str, problem: str) -> None:
    """R71: each kind of bad input gets one readable message naming the field."""
    with pytest.raises(FrameDecodeError) as info:
        decode_client_frame(text)
    assert info.value.field == field
    assert problem in info.value.problem


def test_nested_event_errors_name_the_nested_field() -> None:
    """A bad event inside an ``event`` frame is reported at its own path."""
    text = '{"type": "event", "session_id": "s", "task_hash": "t", "event": {"kind": "zz"}}'
    with pytest.raises(FrameDecodeError, match=r"^\$\.event\.kind: unknown event kind 'zz'$"):
        decode_server_frame(text)


def test_oversized_message_is_refused_before_parsing() -> None:
    """SPEC §8: messages over 1 MiB get an error."""
    big = json.dumps(
        {"type": "run", "request_id": "r", "session_id": "s", "input": "x" * MAX_MESSAGE_BYTES}
    )
    with pytest.raises(FrameDecodeError, match="larger than"):
        decode_client_frame(big)


def test_defaults_may_be_omitted() -> None:
    """Clients may leave out fields that have defaults."""
    frame = decode(
        b'{"type": "run", "request_id": "r", "session_id": "cli-a", "input": "hi"}', ClientFrame
    )
    assert frame == Run(
        request_id="r", session_id="cli-a", input="hi", window_hash="", allow_all=False
    )


def test_fields_added_to_protocol_1_are_left_out_while_unused() -> None:
    """§8, R71: ``request_id`` of a control frame or list frame, and ``session_id`` of
    ``cancel``, are not encoded while empty, so such a frame is the JSON a strict peer
    of the first release decodes; set, they follow the other fields."""
    cancel = Cancel(task_hash="a" * 32, cause=Cause.PAUSED)
    assert dumps(cancel) == '{"type":"cancel","task_hash":"%s","cause":"paused"}' % ("a" * 32)
    assert dumps(LegList(session_id="cli-a", legs=[])) == (
        '{"type":"leg_list","session_id":"cli-a","legs":[]}'
    )
    acked = attrs.evolve(cancel, session_id="cli-a", request_id="c1")
    assert dumps(acked).endswith(',"cause":"paused","session_id":"cli-a","request_id":"c1"}')
    assert decode_client_frame(dumps(acked)) == acked
    assert converter.unstructure(cancel, ClientFrame) == {
        "type": "cancel",
        "task_hash": "a" * 32,
        "cause": "paused",
    }
    assert all("request_id" in attrs.fields_dict(cls) for cls in CONTROL_FRAME_TYPES)


def test_bodies_without_frames_do_not_register_the_unions() -> None:
    """R53 (cold start): encoding ``Health`` in a fresh interpreter leaves the tagged
    unions unregistered; the first frame registers them, and a body holding events
    (decoded or encoded) does too, so tags are never missing."""
    script = textwrap.dedent(
        """
        from agentrio.protocol import codec
        from agentrio.protocol.frames import EventFrame, Welcome
        from agentrio.protocol.http import Health
        codec.dumps(Health(ok=True, version="v", uptime_s=0.0, tasks=0, legs=0))
        print(codec._unions_ready)
        print(codec.dumps(Welcome(protocol=1, daemon_version="v")), codec._unions_ready)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert done.stdout.splitlines() == [
        "False",
        '{"type":"welcome","protocol":1,"daemon_version":"v"} True',
    ]
    nested = textwrap.dedent(
        """
        from agentrio.protocol import codec
        from agentrio.protocol.frames import EventFrame
        frame = codec.structure(
            {"session_id": "chat-a", "task_hash": "h",
             "event": {"kind": "text", "seq": 1, "at": 0.0, "text": "hi"}},
            EventFrame,
        )
        print(type(frame.event).__name__, codec._unions_ready)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", nested], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert done.stdout.split() == ["Text", "True"]
