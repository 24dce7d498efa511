"""The engine's error hierarchy: each error maps to one protocol error code."""

from __future__ import annotations

from typing import ClassVar

from agentrio.protocol.errors import ErrorCode

__all__ = [
    "AgentrioError",
    "AlreadyResolved",
    "AskFailed",
    "BadRequest",
    "ConfigError",
    "Conflict",
    "Forbidden",
    "NotFound",
    "error_of",
]


class AgentrioError(Exception):
    """Base of every error the engine raises on purpose; ``code`` and ``status`` say
    how the server reports it."""

    code: ClassVar[str] = ErrorCode.INTERNAL
    status: ClassVar[int] = 500


class BadRequest(AgentrioError):
    code = ErrorCode.BAD_REQUEST
    status = 400


class Forbidden(AgentrioError):
    """The caller may not touch this (another connection's task or ask)."""

    code = ErrorCode.FORBIDDEN
    status = 403


class NotFound(AgentrioError):
    code = ErrorCode.NOT_FOUND
    status = 404


class Conflict(AgentrioError):
    """The resource is in the wrong state; for resumes the message is exactly
    ``[Conflict] pending task: running`` (R37)."""

    code = ErrorCode.CONFLICT
    status = 409


class AlreadyResolved(AgentrioError):
    """A second reply to an ask that already has one (R1), or to one that is gone."""

    code = ErrorCode.GONE
    status = 410


class AskFailed(AgentrioError):
    """An ask was resolved with an error instead of a reply, e.g. "client
    disconnected" (R6). Never to be read as an approval."""


class ConfigError(AgentrioError):
    """``config.toml`` is unreadable or invalid; the message is one line naming the
    key and line."""


def error_of(code: str, message: str) -> AgentrioError:
    """The error a peer daemon reported by its protocol ``code`` (`agentrio.protocol.cluster`),
    as this daemon's own class for that code, so it is reported the same way."""
    for cls in (BadRequest, Forbidden, NotFound, Conflict, AlreadyResolved):
        if cls.code == code:
            return cls(message)
    return AgentrioError(message)
