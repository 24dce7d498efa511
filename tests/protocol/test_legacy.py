"""The stop cause's one wire encoding, and the words of earlier releases still read
(issue 32 part 1: "the cause has one encoding on the wire … with the old field still
accepted from old clients"; R40, R41, R71)."""

from __future__ import annotations

import json

import pytest

from agentrio.protocol.causes import Cause
from agentrio.protocol.cluster import Control, decode_peer_message, encode_peer_message
from agentrio.protocol.codec import decode, decode_client_frame, dumps
from agentrio.protocol.errors import FrameDecodeError
from agentrio.protocol.frames import Cancel, Reply
from agentrio.protocol.http import ConfirmRequest

HASH = "3f2a9c0d4b1e4f6a8c7d2e1f0a9b8c7d"


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ({"pause": True}, Cause.PAUSED),
        ({"pause": False}, Cause.USER_CANCELED),
        ({}, Cause.USER_CANCELED),
        ({"cause": "user_aborted"}, Cause.USER_ABORTED),
    ],
)
def test_a_cancel_frame_old_or_new_reads_as_its_cause(old: dict[str, object], new: Cause) -> None:
    """R40, R41: ``pause`` of an old client is the cause it always meant; a new frame
    says ``cause`` and is sent only so."""
    frame = decode_client_frame(json.dumps({"type": "cancel", "task_hash": HASH, **old}))
    assert frame == Cancel(task_hash=HASH, cause=new)
    assert json.loads(dumps(frame)) == {"type": "cancel", "task_hash": HASH, "cause": new.value}


@pytest.mark.parametrize(
    ("action", "stop"),
    [("cancel_task", Cause.USER_CANCELED), ("abort_task", Cause.USER_ABORTED), (None, None)],
)
def test_a_replys_old_action_is_its_stop(action: str | None, stop: Cause | None) -> None:
    """A reply's ``action`` (frame and ``POST …/confirm`` body) is read as ``stop``."""
    frame = decode_client_frame(json.dumps({"type": "reply", "id": "a1", "action": action}))
    assert frame == Reply(id="a1", stop=stop)
    assert "action" not in dumps(frame)
    body = decode(json.dumps({"approve": False, "action": action}), ConfirmRequest)
    assert body == ConfirmRequest(approve=False, stop=stop)


@pytest.mark.parametrize(
    "text",
    [
        f'{{"type": "cancel", "task_hash": "{HASH}", "cause": "shutdown"}}',
        f'{{"type": "cancel", "task_hash": "{HASH}", "cause": "superseded"}}',
        '{"type": "reply", "id": "a1", "stop": "disconnected"}',
        '{"type": "reply", "id": "a1", "stop": "cancel_task"}',
        '{"type": "reply", "id": "a1", "stop": "user_canceled", "action": "abort_task"}',
        f'{{"type": "cancel", "task_hash": "{HASH}", "pause": 1}}',
    ],
)
def test_a_cause_a_front_end_may_not_give_is_refused(text: str) -> None:
    """R71: the engine's own causes, an unknown one, both fields at once or an old
    field holding what it never held: a clear error naming the field, never a stop."""
    with pytest.raises(FrameDecodeError) as info:
        decode_client_frame(text)
    assert info.value.field.startswith(("$.cause", "$.stop", "$.action", "$.pause"))


@pytest.mark.parametrize(
    ("op", "cause"),
    [("cancel", Cause.USER_CANCELED), ("pause", Cause.PAUSED), ("steer", None)],
)
def test_an_older_daemons_control_op_is_its_cause(op: str, cause: Cause | None) -> None:
    """R83 across versions: a peer's ``op`` reads as the cause (none: a steer)."""
    old = {
        "type": "control",
        "sender": "a",
        "request_id": "r",
        "op": op,
        "session_id": "chat-1",
        "task_hash": HASH,
        "text": "go" if op == "steer" else "",
    }
    message = decode_peer_message(json.dumps(old))
    assert isinstance(message, Control)
    assert message.cause == cause
    assert "op" not in json.loads(encode_peer_message(message))


def test_an_older_daemons_relayed_answer_keeps_its_stop() -> None:
    """An ``answer_ask`` relayed by an older daemon carries the reply's ``action``."""
    old = {
        "type": "answer_ask",
        "sender": "a",
        "request_id": "r",
        "reply": {"id": "a1", "approve": False, "action": "abort_task"},
    }
    message = decode_peer_message(json.dumps(old))
    assert message.reply == Reply(id="a1", approve=False, stop=Cause.USER_ABORTED)  # type: ignore[union-attr]
