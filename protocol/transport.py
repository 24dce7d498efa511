"""The only wrapper of a trio-websocket connection: frames in, frames out.

Sends are serialised by a lock (trio-websocket allows one sender at a time); reads
happen in one task per connection, the caller's. Decode problems from the daemon are
raised as `FrameDecodeError`; a closed connection as
`trio_websocket.ConnectionClosed`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio
import trio_websocket

from protocol.codec import MAX_MESSAGE_BYTES, decode_server_frame, dumps
from protocol.errors import CLOSE_AUTH_FAILED
from protocol.frames import PROTOCOL_VERSION, Hello, ServerFrame, Welcome

__all__ = [
    "AuthRefused",
    "FrameConnection",
    "close_socket_after_peer_close",
    "open_frame_connection",
]


class AuthRefused(Exception):
    """The daemon refused ``hello`` (close code 4401): wrong token or protocol."""


class FrameConnection:
    """A client's view of ``/v1/ws``: `send` frames, `receive` frames."""

    def __init__(self, ws: trio_websocket.WebSocketConnection) -> None:
        self._ws = ws
        self._send_lock = trio.Lock()
        self.welcome: Welcome | None = None

    async def send(self, frame: Any) -> None:
        async with self._send_lock:
            await self._ws.send_message(dumps(frame))

    async def send_raw(self, text: str) -> None:
        """Send text as it is (tests use it to send malformed frames)."""
        async with self._send_lock:
            await self._ws.send_message(text)

    async def receive(self) -> ServerFrame:
        message = await self._ws.get_message()
        return decode_server_frame(message)

    async def aclose(self, code: int = 1000, reason: str = "") -> None:
        await self._ws.aclose(code, reason)

    @property
    def closed(self) -> bool:
        return self._ws.closed is not None


@asynccontextmanager
async def open_frame_connection(
    url: str, token: str, *, client: str = "script", origin: str | None = None
) -> AsyncIterator[FrameConnection]:
    """Connect to ``url`` (``ws://host:port/v1/ws``), say ``hello``, await ``welcome``.

    Raises `AuthRefused` when the daemon closes the handshake with 4401.
    """
    headers = [(b"Origin", origin.encode())] if origin else None
    async with trio_websocket.open_websocket_url(
        url, extra_headers=headers, max_message_size=MAX_MESSAGE_BYTES * 4
    ) as ws:
        try:
            conn = FrameConnection(ws)
            await conn.send(Hello(token=token, client=client, protocol=PROTOCOL_VERSION))
            try:
                first = await conn.receive()
            except trio_websocket.ConnectionClosed as exc:
                if exc.reason is not None and exc.reason.code == CLOSE_AUTH_FAILED:
                    raise AuthRefused(exc.reason.reason or "authentication failed") from None
                raise
            if not isinstance(first, Welcome):
                raise AuthRefused(f"expected welcome, got {type(first).TYPE}")
            conn.welcome = first
            yield conn
        finally:
            await close_socket_after_peer_close(ws)


async def close_socket_after_peer_close(ws: trio_websocket.WebSocketConnection) -> None:
    """Close the TCP stream of a connection whose *peer* closed the WebSocket.

    trio-websocket 0.12 leaves the client's socket open in that case (its ``aclose``
    returns early once a close reason is set, and the reader stops at EOF without
    closing the stream), which leaks the socket. Closing it twice is harmless.
    """
    if ws.closed is not None:
        with trio.CancelScope(shield=True):
            await ws._stream.aclose()
