"""What a script catches: `ClientError` and its subclasses, and nothing else.

Every way the daemon can refuse a request, and every way the connection to it can
fail, ends in one of these. The library errors underneath (trio-websocket's,
httpx's, `OSError`, Trio's broken-stream errors) are translated in one place,
`agentrio.transport.map_errors`, and kept as ``__cause__``; no other module of the
client sees them.

========================  ===================  ==============================================
class                     ``code``             raised when
========================  ===================  ==============================================
`ClientError`             the protocol's code  the daemon refused a request: an ``error``
                          (``not_found``, …)   frame or an HTTP error body
`DaemonNotFound`          ``no_daemon``        the home has no ``daemon.json`` or no token
`Unreachable`             ``unreachable``      nothing answers at the address (refused,
                                               unknown host, a broken HTTP exchange)
`Timeout`                 ``unreachable``      the daemon did not answer in time (connect,
                                               opening handshake, an HTTP request)
`HandshakeError`          ``unreachable``      the WebSocket opening handshake failed (the
                                               daemon went away or rejected the upgrade)
`AuthRefused`             ``unauthorized``     the daemon refused ``hello`` (close 4401: wrong
                                               token or protocol)
`Disconnected`            ``disconnected``     an open connection closed (either side);
                                               ``close_code``/``close_reason`` say how
`StartFailed`             ``start_failed`` or  a ``run``/``pending`` ended before it was
                          ``conflict``         accepted
========================  ===================  ==============================================

`Timeout` and `HandshakeError` are kinds of `Unreachable` (no connection came up, so
nothing sent was handled) and share its code; ``except Unreachable`` covers the three,
the class tells them apart.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agentrio.protocol.frames import DoneFrame

__all__ = [
    "AuthRefused",
    "ClientError",
    "DaemonNotFound",
    "Disconnected",
    "HandshakeError",
    "StartFailed",
    "Timeout",
    "Unreachable",
]


class ClientError(Exception):
    """The daemon refused a request, or the client could not talk to it.

    ``code`` is the protocol error code for a refusal (``not_found``, ``forbidden``,
    ``conflict``, ``gone``…) or the subclass's own code (see the module docstring);
    ``message`` says what happened; ``where`` (may be empty) what the client was
    doing: the URL it connected to, or the HTTP request it made.
    """

    def __init__(self, code: str, message: str, *, where: str = "") -> None:
        super().__init__(f"{code}: {where}: {message}" if where else f"{code}: {message}")
        self.code = code
        self.message = message
        self.where = where


class DaemonNotFound(ClientError):
    """The home names no serving daemon (no ``daemon.json``) or has no token."""

    def __init__(self, message: str) -> None:
        super().__init__("no_daemon", message)


class Unreachable(ClientError):
    """Nothing answers at the daemon's address (or the HTTP exchange broke): no
    connection came up, so nothing this client sent was handled."""

    def __init__(self, message: str, *, where: str = "") -> None:
        super().__init__("unreachable", message, where=where)


class Timeout(Unreachable):
    """The daemon did not answer in time: the TCP connect plus the opening handshake
    took longer than the connect timeout, or an HTTP request its timeout."""


class HandshakeError(Unreachable):
    """The WebSocket opening handshake failed: the daemon went away in the middle of
    it, or answered the upgrade with something other than 101."""


class AuthRefused(ClientError):
    """The daemon refused ``hello`` (close code 4401: wrong token or protocol), or
    answered it with something other than ``welcome``."""

    def __init__(self, message: str, *, where: str = "") -> None:
        super().__init__("unauthorized", message, where=where)


class Disconnected(ClientError):
    """An open connection closed: the daemon closed it (``close_code`` 4001 when it
    shuts down), it died (1006: no closing handshake), or this client closed it.

    Everything waiting on the connection (a run's `wait_done`, a control call, an
    iterator) sees the same `Disconnected`; iterators simply end.
    """

    def __init__(
        self, message: str, *, close_code: int | None = None, close_reason: str = ""
    ) -> None:
        super().__init__("disconnected", message)
        #: The WebSocket close code (None when the socket broke without one).
        self.close_code = close_code
        #: The close frame's reason text ("" when it had none).
        self.close_reason = close_reason


class StartFailed(ClientError):
    """A ``run``/``pending`` ended before it was accepted: ``done`` holds the daemon's
    ``done`` frame (status ``failed``), ``message`` its error — e.g. exactly
    ``[Conflict] pending task: running`` for a resume that lost (R37)."""

    def __init__(self, done: DoneFrame) -> None:
        code = "conflict" if done.error.startswith("[Conflict]") else "start_failed"
        super().__init__(code, done.error or done.status)
        self.done = done
