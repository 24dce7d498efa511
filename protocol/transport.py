"""The only wrapper of a trio-websocket connection: frames in, frames out.

Any number of tasks may send at once: trio-websocket frames each message synchronously
and writes it under its own FIFO lock, so messages go out whole and in call order (a
second lock here only cost each send one more scheduler pass, bench B1). Reads happen
in one task per connection, the caller's. Decode problems from the daemon are
raised as `FrameDecodeError`; a closed connection as
`trio_websocket.ConnectionClosed`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, cast
from urllib.parse import urlsplit

import trio
import trio_websocket

from protocol.codec import MAX_MESSAGE_BYTES, decode_server_frame, dumps
from protocol.errors import CLOSE_AUTH_FAILED
from protocol.frames import PROTOCOL_VERSION, Hello, ServerFrame, Welcome
from protocol.groups import sole_exception

__all__ = [
    "CLOSE_TIMEOUT_S",
    "CONNECT_TIMEOUT_S",
    "AuthRefused",
    "FrameConnection",
    "close_socket_after_peer_close",
    "open_frame_connection",
]


#: Seconds for the TCP connect plus the opening handshake and ``welcome``.
CONNECT_TIMEOUT_S = 10.0
#: Seconds the closing handshake may take before the socket is closed anyway.
CLOSE_TIMEOUT_S = 2.0


class AuthRefused(Exception):
    """The daemon refused ``hello`` (close code 4401): wrong token or protocol."""


class FrameConnection:
    """A client's view of ``/v1/ws``: `send` frames, `receive` frames."""

    def __init__(self, ws: trio_websocket.WebSocketConnection) -> None:
        self._ws = ws
        self.welcome: Welcome | None = None

    async def send(self, frame: Any) -> None:
        await self._ws.send_message(dumps(frame))

    async def send_raw(self, text: str) -> None:
        """Send text as it is (tests use it to send malformed frames)."""
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
    url: str,
    token: str,
    *,
    client: str = "script",
    origin: str | None = None,
    connect_timeout: float = CONNECT_TIMEOUT_S,
) -> AsyncIterator[FrameConnection]:
    """Connect to ``url`` (``ws://host:port/v1/ws``), say ``hello``, await ``welcome``.

    Raises `AuthRefused` when the daemon closes the handshake with 4401,
    `trio_websocket.HandshakeError` when the daemon goes away (or stays silent for
    ``connect_timeout`` seconds) before the WebSocket is open, `OSError` when nothing
    listens.

    This function owns the TCP stream, so the socket is closed on every way out,
    including a daemon that dies in the middle of the opening handshake (where
    trio-websocket's own ``open_websocket_url`` keeps waiting and then leaks the
    socket). Leaving is bounded: the closing handshake gets `CLOSE_TIMEOUT_S`, then
    the stream is closed regardless.
    """
    parts = urlsplit(url)
    if parts.scheme != "ws" or parts.hostname is None or parts.port is None:
        raise ValueError(f"expected ws://host:port/path, got {url!r}")
    headers = [(b"Origin", origin.encode())] if origin else None
    deadline = trio.current_time() + connect_timeout
    with trio.move_on_at(deadline) as connecting:
        stream = _WatchedStream(await trio.open_tcp_stream(parts.hostname, parts.port))
    if connecting.cancelled_caught:
        raise trio_websocket.ConnectionTimeout
    # The body's own exception is kept out of the reader nursery (which would wrap it
    # in an ExceptionGroup) and raised as it is once the connection is closed.
    body_error: BaseException | None = None
    try:
        async with trio.open_nursery() as reader_nursery:
            ws = await _open_handshake(
                reader_nursery,
                stream,
                host=f"{parts.hostname}:{parts.port}",
                resource=parts.path or "/",
                headers=headers,
                deadline=deadline,
            )
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
                try:
                    yield conn
                except BaseException as exc:
                    body_error = exc
            finally:
                with trio.CancelScope(shield=True):
                    with trio.move_on_after(CLOSE_TIMEOUT_S):
                        await ws.aclose()
                    await stream.aclose()  # ends the reader task: the nursery can exit
    except BaseExceptionGroup as group:
        if body_error is None:
            raise (sole_exception(group) or group) from None
    finally:
        with trio.CancelScope(shield=True):
            await stream.aclose()
    if body_error is not None:
        raise body_error


async def _open_handshake(
    reader_nursery: trio.Nursery,
    stream: _WatchedStream,
    *,
    host: str,
    resource: str,
    headers: list[tuple[bytes, bytes]] | None,
    deadline: float,
) -> trio_websocket.WebSocketConnection:
    """The client's opening handshake, ended early when the peer goes away."""
    opened: list[trio_websocket.WebSocketConnection] = []

    async def handshake(race: trio.CancelScope) -> None:
        opened.append(
            await trio_websocket.wrap_client_stream(
                reader_nursery,
                # Typed for a SocketStream; trio-websocket uses only the Stream methods.
                cast(trio.SocketStream, stream),
                host,
                resource,
                extra_headers=headers,
                max_message_size=MAX_MESSAGE_BYTES * 4,
            )
        )
        race.cancel()

    async def peer_gone(race: trio.CancelScope) -> None:
        await stream.peer_gone.wait()
        race.cancel()

    with trio.move_on_at(deadline) as timer:
        async with trio.open_nursery() as race:
            race.start_soon(handshake, race.cancel_scope)
            race.start_soon(peer_gone, race.cancel_scope)
    if opened:
        return opened[0]
    if timer.cancelled_caught:
        raise trio_websocket.ConnectionTimeout
    raise trio_websocket.HandshakeError("the daemon closed the connection during the handshake")


class _WatchedStream(trio.abc.HalfCloseableStream):
    """A client's TCP stream that notes when the peer is gone (EOF or a broken socket),
    which trio-websocket does not report while its opening handshake is pending."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self._stream = stream
        self.peer_gone = trio.Event()

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self._stream.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self._stream.wait_send_all_might_not_block()

    async def send_eof(self) -> None:
        await self._stream.send_eof()

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        try:
            data = await self._stream.receive_some(max_bytes)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self.peer_gone.set()
            raise
        if not data:
            self.peer_gone.set()
        return bytes(data)

    async def aclose(self) -> None:
        await self._stream.aclose()


async def close_socket_after_peer_close(ws: trio_websocket.WebSocketConnection) -> None:
    """Close the TCP stream of a connection whose *peer* closed the WebSocket.

    trio-websocket 0.12 leaves the client's socket open in that case (its ``aclose``
    returns early once a close reason is set, and the reader stops at EOF without
    closing the stream), which leaks the socket. Closing it twice is harmless.
    """
    if ws.closed is not None:
        with trio.CancelScope(shield=True):
            await ws._stream.aclose()
