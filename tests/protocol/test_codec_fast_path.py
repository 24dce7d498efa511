"""The codec's per-class fast paths give exactly what the cattrs tagged unions give.

`agentrio.protocol.codec` encodes and decodes frames and events through each class's own hook
instead of the union's dispatch (bench B1). These tests pin that the result is the
same: the same JSON (tag first), the same decoded value, the same error message.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentrio.protocol import FrameDecodeError
from agentrio.protocol.codec import (
    _check_tags,
    _describe,
    _fast_structurer,
    converter,
    decode,
    decode_client_frame,
    decode_server_frame,
    dumps,
    structure,
)
from agentrio.protocol.events import EVENT_TYPES, Event, Question, Text
from agentrio.protocol.frames import (
    CLIENT_FRAME_TYPES,
    SERVER_FRAME_TYPES,
    Ask,
    ClientFrame,
    EventFrame,
    ServerFrame,
)
from tests.protocol.test_codec import _strategy_for, json_values

_UNIONS: list[tuple[Any, str]] = [(ClientFrame, "type"), (ServerFrame, "type"), (Event, "kind")]


def _union_of(cls: type) -> tuple[Any, str]:
    if cls in CLIENT_FRAME_TYPES:
        return ClientFrame, "type"
    if cls in SERVER_FRAME_TYPES:
        return ServerFrame, "type"
    return Event, "kind"


def _via_union(value: Any, union: Any) -> Any:
    """Check the tags, then structure through the converter's union hook, errors
    described as the codec describes them: the reference the fast path must match."""
    try:
        _check_tags(value, union)
    except FrameDecodeError as exc:
        return exc
    try:
        return converter.structure(value, union)
    except Exception as exc:
        return _describe(exc)


def _via_codec(value: Any, union: Any) -> Any:
    try:
        return structure(value, union)
    except FrameDecodeError as exc:
        return exc


@pytest.mark.parametrize(
    "cls", CLIENT_FRAME_TYPES + SERVER_FRAME_TYPES + EVENT_TYPES, ids=lambda c: c.__name__
)
@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_encoding_matches_the_union_with_the_tag_first(cls: type, data: st.DataObject) -> None:
    """SPEC §8: every frame and event encodes to what the cattrs union gives, its tag
    (``type``/``kind``) the first key, a nested event's ``kind`` first too."""
    value = data.draw(_strategy_for(cls))
    union, tag_name = _union_of(cls)
    text = dumps(value)
    decoded = json.loads(text)
    assert decoded == converter.unstructure(value, union)
    assert next(iter(decoded)) == tag_name
    if isinstance(value, EventFrame):
        assert next(iter(decoded["event"])) == "kind"


def test_encoding_is_compact_utf8_with_fixed_key_order() -> None:
    """SPEC §8: compact JSON, UTF-8 text as it is, fields in declaration order."""
    ask = Ask(
        id="ask_1",
        kind="ask_user",
        session_id="chat-s",
        task_hash="t",
        questions=[Question(text="Größe?", options=["a"])],
    )
    assert dumps(ask) == (
        '{"type":"ask","id":"ask_1","kind":"ask_user","session_id":"chat-s","task_hash":"t",'
        '"tool_name":"","tool_args":{},"questions":[{"text":"Größe?","options":["a"],'
        '"multi":false,"secret":false}],"restricted":false,"need_password":false}'
    )
    frame = EventFrame(session_id="chat-s", task_hash="t", event=Text(seq=1, at=0.5, text="é"))
    assert dumps(frame) == (
        '{"type":"event","session_id":"chat-s","task_hash":"t",'
        '"event":{"kind":"text","seq":1,"at":0.5,"text":"é"}}'
    )


@pytest.mark.parametrize(("union", "tag_name"), _UNIONS, ids=["client", "server", "event"])
@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_decoding_matches_the_union_value_or_error(
    union: Any, tag_name: str, data: st.DataObject
) -> None:
    """R71: for a known tag with random fields (valid frames among them) the fast path
    returns the same value, or raises an error naming the same field with the same
    problem, as the converter's union hook."""
    members = {
        ClientFrame: CLIENT_FRAME_TYPES,
        ServerFrame: SERVER_FRAME_TYPES,
        Event: EVENT_TYPES,
    }[union]
    cls = data.draw(st.sampled_from(members))
    if data.draw(st.booleans()):
        value = json.loads(dumps(data.draw(_strategy_for(cls))))
    else:
        value = {}
    names = sorted(
        {*value, "id", "session_id", "task_hash", "text", "answers", "extra"} - {tag_name}
    )
    for name in data.draw(st.lists(st.sampled_from(names), max_size=3, unique=True)):
        value[name] = data.draw(json_values)
    value[tag_name] = cls.TYPE if tag_name == "type" else cls.KIND  # type: ignore[attr-defined]
    expected = _via_union(dict(value), union)
    got = _via_codec(value, union)
    if isinstance(expected, FrameDecodeError):
        assert isinstance(got, FrameDecodeError)
        assert (got.field, got.problem) == (expected.field, expected.problem)
    else:
        assert got == expected


@pytest.mark.parametrize(
    "cls", CLIENT_FRAME_TYPES + SERVER_FRAME_TYPES + EVENT_TYPES, ids=lambda c: c.__name__
)
@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_generated_structurer_takes_every_valid_encoding(cls: type, data: st.DataObject) -> None:
    """SPEC §8: the generated fast path (not the cattrs fallback) decodes what `dumps`
    gives for every frame and event class, to an equal value."""
    value = data.draw(_strategy_for(cls))
    fast = _fast_structurer(cls)
    assert fast is not None
    assert fast(json.loads(dumps(value))) == value


def test_integer_json_number_becomes_a_float_field() -> None:
    """R71: a JSON integer in a float field is taken and made a float, like cattrs does
    (``1 == 1.0``, so the parity tests alone would not see an int slip through)."""
    text = (
        '{"type":"event","session_id":"s","task_hash":"t",'
        '"event":{"kind":"text","seq":1,"at":2,"text":"x"}}'
    )
    frame = decode_server_frame(text)
    assert isinstance(frame, EventFrame)
    assert isinstance(frame.event, Text)
    assert type(frame.event.at) is float
    assert frame.event.at == 2.0
    event = decode('{"kind":"text","seq":1,"at":3,"text":"x"}', Event)
    assert type(event.at) is float


@pytest.mark.parametrize(
    ("text", "field", "problem"),
    [
        ('{"type":"reply","id":"a","remember":1}', "$.remember", "expected a boolean"),
        ('{"type":"reply","id":"a","approve":"yes"}', "$.approve", "expected a boolean"),
        ('{"type":"reply","id":"a","answers":[1]}', "$.answers[0]", "expected a string"),
        ('{"type":"reply","id":true}', "$.id", "expected a string, got a boolean"),
        ('{"type":"reply","id":"a","action":"stop"}', "$.action", "expected 'cancel_task'"),
        ('{"type":"reply","id":"a","extra":1}', "$", "extra fields found (extra)"),
        ('{"type":"cancel","task_hash":"t","pause":0}', "$.pause", "expected a boolean"),
    ],
)
def test_fast_path_misses_fall_back_to_the_exact_error(text: str, field: str, problem: str) -> None:
    """R71: input the generated path does not take still gets cattrs' error, naming
    the field."""
    with pytest.raises(FrameDecodeError) as info:
        decode_client_frame(text)
    assert info.value.field == field
    assert problem in info.value.problem
