"""The messages between daemons (issue 21, R83): docs/protocol.md's examples decode,
round-trip and cover every type; anything else is refused with `ValueError`."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from agentrio.protocol.cluster import PEER_MESSAGE_TYPES, decode_peer_message, encode_peer_message

DOC = Path(__file__).resolve().parents[2] / "docs" / "protocol.md"
PEER_BLOCK = re.compile(r"```json peer\n(?P<text>.*?)\n```", re.S)


def _examples() -> list[str]:
    return [m["text"] for m in PEER_BLOCK.finditer(DOC.read_text(encoding="utf-8"))]


@pytest.mark.parametrize("text", _examples())
def test_example_round_trips_unchanged(text: str) -> None:
    """R83: each documented message decodes and encodes back to itself."""
    assert json.loads(encode_peer_message(decode_peer_message(text))) == json.loads(text)


def test_every_message_type_is_documented() -> None:
    """R83: docs/protocol.md shows every message type of `agentrio.protocol.cluster`."""
    seen = {type(decode_peer_message(text)).TYPE for text in _examples()}
    assert seen == set(PEER_MESSAGE_TYPES)


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("not json", "not JSON"),
        ("[1, 2]", "not a JSON object"),
        ('{"type": "launch", "sender": "a"}', "unknown peer message type"),
        ('{"type": "goodbye"}', "malformed goodbye"),
        ('{"type": "goodbye", "sender": 7}', "malformed goodbye"),
        ('{"type": "goodbye", "sender": "a", "extra": 1}', "malformed goodbye"),
        (
            '{"type": "control", "sender": "a", "request_id": "r", "op": "delete",'
            ' "session_id": "chat-1", "task_hash": "x"}',
            "malformed control",
        ),
    ],
)
def test_anything_else_is_refused(text: str, why: str) -> None:
    """R71 between daemons: a message that is not one of ours is a `ValueError` naming
    why (the bus logs and ignores it), never a crash or a half-read message."""
    with pytest.raises(ValueError, match=why):
        decode_peer_message(text)
