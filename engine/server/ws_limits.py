"""What an unauthenticated WebSocket may cost the daemon (issue 29 finding 7).

hypercorn applies one message limit (``websocket_max_message_size``, 16 MiB here, so
that a message over the protocol's 1 MiB gets an ``error`` frame and the connection
lives on) and negotiates permessage-deflate whenever the client offers it, whose
decompression has no limit at all: before anyone had said who they were, 80 idle
connections took the daemon from 327 MB to 1.3 GB and 597 KiB of compressed frames to
710 MB. ASGI gives an application no say in either, so `restrict_unauthenticated`
reaches hypercorn's stream of the connection -- the object whose bound method is the
ASGI ``send`` hypercorn calls the app with, which `note_stream` (run by the daemon's
outermost middleware, before Starlette wraps ``send``) keeps in the scope -- before
the upgrade is accepted and

- withdraws the client's extension offer, so no compression is ever negotiated (for
  any connection: over loopback it saves nothing worth a decompression bomb);
- replaces its message buffer by `BoundedBuffer`, whose limit is `HELLO_MAX_BYTES`
  until the client authenticated (`Restriction.lift` sets the normal one): a bigger
  message closes the connection (1009). hypercorn's own buffer writes a chunk before
  it checks the limit and keeps writing what arrives after the close, so a client
  announcing 15 MiB made it hold all 15; this one checks first and, once over, takes
  nothing more.

Both are attributes of hypercorn's ``WSStream`` (``handshake.extensions``,
``buffer``), checked here by type and name; if a hypercorn release changes
them the connection is refused (fail closed) and the error log says why, and
tests/engine/server/test_pre_auth.py fails.
"""

from __future__ import annotations

import logging
from collections.abc import MutableMapping
from typing import Any, Final

import attrs
from hypercorn.protocol.ws_stream import FrameTooLargeError, WebsocketBuffer, WSStream
from starlette.websockets import WebSocket
from wsproto.events import Message

from agentrio.engine.server.refusals import RefusalLog

__all__ = [
    "HELLO_MAX_BYTES",
    "STREAM_KEY",
    "BoundedBuffer",
    "Restriction",
    "note_stream",
    "restrict_unauthenticated",
]

#: Said rarely: every connection would say it.
_unreachable = RefusalLog(logging.getLogger("agentrio.server.ws"), burst=1)

#: Largest message before authentication: ``hello`` and ``prove`` are a few hundred
#: bytes.
HELLO_MAX_BYTES: Final = 4096
#: The scope key under which `note_stream` keeps hypercorn's stream.
STREAM_KEY: Final = "agentrio.ws_stream"


def note_stream(scope: MutableMapping[str, Any], send: Any) -> None:
    """Keep the object behind a WebSocket's ASGI ``send`` in its scope."""
    if scope.get("type") == "websocket":
        scope[STREAM_KEY] = getattr(send, "__self__", None)


class BoundedBuffer(WebsocketBuffer):
    """hypercorn's message buffer, checking the limit before it writes, and refusing
    everything once a message went over it (the connection is being closed)."""

    exceeded = False

    def extend(self, event: Message[Any]) -> None:
        if self.exceeded or self.length + len(event.data) > self.max_length:
            self.exceeded = True
            raise FrameTooLargeError()
        super().extend(event)


@attrs.frozen
class Restriction:
    """The limits set on one connection until it authenticated."""

    _buffer: Any
    _limit: int

    def lift(self) -> None:
        """Authenticated: the normal message limit applies from the next message."""
        self._buffer.max_length = self._limit


def restrict_unauthenticated(websocket: WebSocket) -> Restriction | None:
    """Withdraw the compression offer and set the pre-authentication message limit of
    ``websocket``'s hypercorn stream; None when the stream cannot be reached (refuse
    the connection then)."""
    stream = websocket.scope.get(STREAM_KEY)
    handshake: Any = getattr(stream, "handshake", None)
    buffer = getattr(stream, "buffer", None)
    if (
        not isinstance(stream, WSStream)
        or not hasattr(handshake, "extensions")
        or not isinstance(buffer, WebsocketBuffer)
    ):
        _unreachable.warning(
            "hypercorn", "cannot limit an unauthenticated WebSocket (hypercorn changed?): refused"
        )
        return None
    handshake.extensions = None
    bounded = BoundedBuffer(HELLO_MAX_BYTES)
    stream.buffer = bounded
    return Restriction(bounded, int(buffer.max_length))
