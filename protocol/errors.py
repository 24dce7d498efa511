"""Error codes, WebSocket close codes and the one decode error of the protocol.

Error codes are the stable strings a peer may branch on; messages are for people.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "CLOSE_AUTH_FAILED",
    "CLOSE_PROTOCOL_ERROR",
    "CLOSE_SHUTDOWN",
    "CLOSE_SLOW_CONSUMER",
    "ErrorCode",
    "FrameDecodeError",
]

#: Close code sent when ``hello`` is missing, malformed or carries a wrong token.
CLOSE_AUTH_FAILED: Final = 4401
#: Close code sent when the peer speaks a protocol version we do not.
CLOSE_PROTOCOL_ERROR: Final = 4400
#: Close code sent to every connection when the daemon shuts down.
CLOSE_SHUTDOWN: Final = 4001
#: Close code sent to a subscriber that fell more than ``[server]
#: subscriber_queue_bytes`` behind; it may reconnect and resubscribe to replay.
CLOSE_SLOW_CONSUMER: Final = 4008


class ErrorCode:
    """The ``code`` values of ``error`` frames and HTTP error bodies."""

    BAD_FRAME: Final = "bad_frame"
    BAD_REQUEST: Final = "bad_request"
    TOO_LARGE: Final = "too_large"
    UNAUTHORIZED: Final = "unauthorized"
    FORBIDDEN: Final = "forbidden"
    NOT_FOUND: Final = "not_found"
    CONFLICT: Final = "conflict"
    GONE: Final = "gone"
    #: The daemon cannot take the request now (its disk is full); retry later (503).
    UNAVAILABLE: Final = "unavailable"
    INTERNAL: Final = "internal"


class FrameDecodeError(ValueError):
    """Raised for any input that is not a valid frame or body.

    ``field`` names the offending place as a JSON path (``$`` is the whole value,
    ``$.questions[0].text`` a nested one); ``str(error)`` always contains it, so the
    message alone tells a peer what to fix.
    """

    def __init__(self, field: str, problem: str) -> None:
        self.field = field
        self.problem = problem
        super().__init__(f"{field}: {problem}")
