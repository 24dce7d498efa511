"""docs/protocol.md cannot drift from the code: every example decodes and round-trips.

Covers SPEC §7 and §8 (every frame, body and event kind has a documented example).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from agentrio.protocol import http, unstructure
from agentrio.protocol.codec import decode
from agentrio.protocol.events import EVENT_TYPES, Event
from agentrio.protocol.frames import (
    CLIENT_FRAME_TYPES,
    SERVER_FRAME_TYPES,
    ClientFrame,
    ServerFrame,
)

DOC = Path(__file__).resolve().parents[2] / "docs" / "protocol.md"
BLOCK = re.compile(r"```json(?: body=(?P<body>\w+))?\n(?P<text>.*?)\n```", re.S)
CLIENT_TAGS = {cls.TYPE for cls in CLIENT_FRAME_TYPES}
SERVER_TAGS = {cls.TYPE for cls in SERVER_FRAME_TYPES}


def _examples() -> list[tuple[str | None, str]]:
    return [(m["body"], m["text"]) for m in BLOCK.finditer(DOC.read_text(encoding="utf-8"))]


def _decode(body: str | None, text: str) -> Any:
    data = json.loads(text)
    if body is not None:
        return decode(text, getattr(http, body))
    if "type" in data:
        return decode(text, ClientFrame if data["type"] in CLIENT_TAGS else ServerFrame)
    return decode(text, Event)


@pytest.mark.parametrize(("body", "text"), _examples())
def test_example_round_trips_unchanged(body: str | None, text: str) -> None:
    """Each JSON example decodes through the converter and encodes back to itself."""
    assert unstructure(_decode(body, text)) == json.loads(text)


def test_every_frame_event_and_body_is_documented() -> None:
    """docs/protocol.md has an example of every frame type, event kind and HTTP body."""
    seen: set[type] = set()
    for body, text in _examples():
        value = _decode(body, text)
        seen.add(type(value))
        event = getattr(value, "event", None)
        if event is not None:
            seen.add(type(event))
    expected = {*CLIENT_FRAME_TYPES, *SERVER_FRAME_TYPES, *EVENT_TYPES, *http.BODY_TYPES}
    missing = sorted(cls.__name__ for cls in expected - seen)
    assert missing == []
