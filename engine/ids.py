"""Identifiers: task hashes, leg, job, ask and window ids, and session id checks."""

from __future__ import annotations

import re
import secrets
from typing import Final

from agentrio.engine.errors import BadRequest

__all__ = [
    "ORIGINS",
    "check_session_id",
    "new_ask_id",
    "new_job_id",
    "new_leg_id",
    "new_task_hash",
    "origin_of",
]

SESSION_ID: Final = re.compile(r"[A-Za-z0-9_-]{1,128}")
TASK_HASH: Final = re.compile(r"[0-9a-f]{32}")
#: The session-id prefixes that name a front-end kind (SPEC §0).
ORIGINS: Final = ("cli-", "chat-", "tg-", "dc-")


def new_task_hash() -> str:
    return secrets.token_hex(16)


def new_leg_id(kind: str) -> str:
    """``cmd_`` or ``sub_`` plus 8 hex."""
    return f"{kind}_{secrets.token_hex(4)}"


def new_job_id() -> str:
    return f"job_{secrets.token_hex(4)}"


def new_ask_id() -> str:
    return secrets.token_hex(16)


def origin_of(session_id: str) -> str:
    """The origin prefix of a session (``cli-``, ``chat-``, …), or ``""`` for none."""
    for origin in ORIGINS:
        if session_id.startswith(origin):
            return origin
    return ""


def check_session_id(session_id: str) -> str:
    """Return ``session_id`` if it is well-formed, else raise `BadRequest`.

    The pattern also keeps session ids safe as folder names (no ``/``, no ``..``).
    """
    if not SESSION_ID.fullmatch(session_id):
        raise BadRequest(f"invalid session id {session_id[:64]!r}: use 1-128 of [A-Za-z0-9_-]")
    return session_id


def check_task_hash(task_hash: str) -> str:
    if not TASK_HASH.fullmatch(task_hash):
        raise BadRequest(f"invalid task hash {task_hash[:64]!r}: 32 lowercase hex expected")
    return task_hash
