"""What clients and daemons of earlier releases send that this one still reads.

The stop cause has one encoding on the wire (`agentrio.protocol.causes`): ``cause`` on
a ``cancel`` frame and a peer's ``control`` message, ``stop`` on a reply and on
``POST …/confirm``. Earlier releases said the same things as ``pause: bool``,
``action: "cancel_task" | "abort_task"`` and ``op: "cancel" | "pause" | "steer"``.
`upgrade` rewrites such a value into today's words before it is structured, so the
rest of the code knows one vocabulary; nothing here is ever sent. A value that has
both the old and the new field is refused (which one was meant?), as is an old field
holding something it never held.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from agentrio.protocol.errors import FrameDecodeError

__all__ = ["upgrade_body", "upgrade_frame", "upgrade_peer"]

_ACTION_CAUSES: Final = {"cancel_task": "user_canceled", "abort_task": "user_aborted"}
_OP_CAUSES: Final = {"cancel": "user_canceled", "pause": "paused", "steer": None}


def _replace(
    value: dict[str, Any], old: str, new: str, words: Callable[[Any], str | None], path: str
) -> dict[str, Any]:
    if old not in value:
        return value
    if new in value:
        raise FrameDecodeError(f"{path}.{old}", f"give {new!r} only ({old!r} is its old name)")
    upgraded = dict(value)
    cause = words(upgraded.pop(old))
    if cause is not None:
        upgraded[new] = cause
    return upgraded


def _pause(value: Any) -> str:
    if type(value) is not bool:
        raise FrameDecodeError("$.pause", "expected a boolean")
    return "paused" if value else "user_canceled"


def _action(path: str) -> Callable[[Any], str | None]:
    def words(value: Any) -> str | None:
        if value is None:
            return None
        if not isinstance(value, str) or value not in _ACTION_CAUSES:
            raise FrameDecodeError(f"{path}.action", "expected 'cancel_task' or 'abort_task'")
        return _ACTION_CAUSES[value]

    return words


def _op(value: Any) -> str | None:
    if not isinstance(value, str) or value not in _OP_CAUSES:
        raise FrameDecodeError("$.op", "expected 'cancel', 'pause' or 'steer'")
    return _OP_CAUSES[value]


def upgrade_frame(value: Any) -> Any:
    """A client frame (tagged ``type``) in today's words."""
    if type(value) is not dict:
        return value
    tag = value.get("type")
    if tag == "cancel":
        return _replace(value, "pause", "cause", _pause, "$")
    if tag == "reply":
        return _replace(value, "action", "stop", _action("$"), "$")
    return value


def upgrade_body(value: Any) -> Any:
    """A ``POST …/confirm`` body in today's words."""
    if type(value) is not dict:
        return value
    return _replace(value, "action", "stop", _action("$"), "$")


def upgrade_peer(value: dict[str, Any], tag: str) -> dict[str, Any]:
    """A peer message (its ``type`` already taken out) in today's words."""
    if tag == "control":
        return _replace(value, "op", "cause", _op, "$")
    if tag == "answer_ask" and isinstance(value.get("reply"), dict):
        reply = _replace(value["reply"], "action", "stop", _action("$.reply"), "$.reply")
        return {**value, "reply": reply}
    return value
