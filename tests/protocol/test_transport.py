"""The client transport against small raw servers: every way a connection can end
leaves no socket open and raises a plain exception (R6, R43: a script sees a dead
daemon as a closed connection, never a hang or a leaked socket)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial

import pytest
import trio
import trio_websocket

from protocol.codec import dumps
from protocol.frames import PROTOCOL_VERSION, Welcome
from protocol.groups import sole_exception
from protocol.transport import AuthRefused, open_frame_connection

Handler = Callable[[trio.SocketStream], Awaitable[None]]


async def _serve_raw(nursery: trio.Nursery, handler: Handler) -> str:
    """A TCP server on 127.0.0.1 running ``handler`` per connection; its ws:// URL."""
    listeners = await nursery.start(partial(trio.serve_tcp, handler, 0, host="127.0.0.1"))
    port = listeners[0].socket.getsockname()[1]
    return f"ws://127.0.0.1:{port}/v1/ws"


async def _serve_ws(
    nursery: trio.Nursery, handler: Callable[[trio_websocket.WebSocketConnection], Awaitable[None]]
) -> str:
    async def accept(request: trio_websocket.WebSocketRequest) -> None:
        await handler(await request.accept())

    server = await nursery.start(trio_websocket.serve_websocket, accept, "127.0.0.1", 0, None)
    return f"ws://127.0.0.1:{server.port}/v1/ws"


async def test_peer_gone_mid_handshake_is_a_handshake_error_at_once() -> None:
    """R43: a daemon that dies after accepting TCP but before answering the opening
    handshake is reported at once as HandshakeError (no 10 s wait, no socket left)."""

    async def read_then_vanish(stream: trio.SocketStream) -> None:
        await stream.receive_some()
        await stream.aclose()

    async with trio.open_nursery() as nursery:
        url = await _serve_raw(nursery, read_then_vanish)
        started = trio.current_time()
        with pytest.raises(trio_websocket.HandshakeError, match="during the handshake"):
            async with open_frame_connection(url, "t"):
                pytest.fail("no connection should open")
        assert trio.current_time() - started < 5
        nursery.cancel_scope.cancel()


async def test_silent_peer_times_out(autojump_clock: trio.testing.MockClock) -> None:
    """R43: a peer that accepts TCP and never answers ends in ConnectionTimeout after
    ``connect_timeout``."""

    async def silent(stream: trio.SocketStream) -> None:
        await trio.sleep_forever()

    async with trio.open_nursery() as nursery:
        url = await _serve_raw(nursery, silent)
        with pytest.raises(trio_websocket.ConnectionTimeout):
            async with open_frame_connection(url, "t", connect_timeout=3.0):
                pytest.fail("no connection should open")
        nursery.cancel_scope.cancel()


async def _raise_inside(url: str, error: BaseException) -> None:
    async with open_frame_connection(url, "t") as conn:
        assert conn.welcome is not None
        raise error


async def test_body_exceptions_and_peer_abort_come_out_plain() -> None:
    """R6: the body's own exception leaves the context manager as itself (not wrapped
    in an ExceptionGroup), and a daemon killed after ``welcome`` is a plain
    ConnectionClosed (1006)."""

    async def welcome_then_abort(ws: trio_websocket.WebSocketConnection) -> None:
        await ws.get_message()
        await ws.send_message(dumps(Welcome(protocol=PROTOCOL_VERSION, daemon_version="t")))
        await trio.sleep(0.05)
        await ws._stream.aclose()  # like kill -9: no closing handshake

    async with trio.open_nursery() as nursery:
        url = await _serve_ws(nursery, welcome_then_abort)
        mine = KeyError("mine")
        with pytest.raises(KeyError) as raised:
            await _raise_inside(url, mine)
        assert raised.value is mine
        with pytest.raises(trio_websocket.ConnectionClosed) as info:
            async with open_frame_connection(url, "t") as conn:
                await conn.receive()
        assert info.value.reason.code == 1006
        nursery.cancel_scope.cancel()


async def test_refused_hello_and_a_normal_close() -> None:
    """§8: a 4401 close of ``hello`` is AuthRefused; leaving the block closes the
    connection with a closing handshake the server sees as 1000."""
    closes: list[int] = []

    async def refuse_or_echo(ws: trio_websocket.WebSocketConnection) -> None:
        hello = await ws.get_message()
        if '"bad"' in str(hello):
            await ws.aclose(4401, "authentication failed")
            return
        await ws.send_message(dumps(Welcome(protocol=PROTOCOL_VERSION, daemon_version="t")))
        with pytest.raises(trio_websocket.ConnectionClosed) as info:
            await ws.get_message()
        closes.append(info.value.reason.code)

    async with trio.open_nursery() as nursery:
        url = await _serve_ws(nursery, refuse_or_echo)
        with pytest.raises(AuthRefused, match="authentication failed"):
            async with open_frame_connection(url, "bad"):
                pytest.fail("no connection should open")
        async with open_frame_connection(url, "good") as conn:
            assert conn.welcome == Welcome(protocol=PROTOCOL_VERSION, daemon_version="t")
        with trio.fail_after(5):
            while not closes:
                await trio.sleep(0.01)
        assert closes == [1000]
        nursery.cancel_scope.cancel()


def test_sole_exception_picks_the_one_error_beside_cancellations() -> None:
    """R43: a connection ending while an outer scope is being cancelled raises its own
    error (e.g. ConnectionClosed), not an ExceptionGroup holding it and a Cancelled;
    several errors stay a group; only cancellations give the first."""
    closed = trio_websocket.ConnectionClosed(None)
    cancelled = _a_cancelled()
    assert sole_exception(ExceptionGroup("g", [closed])) is closed
    assert sole_exception(BaseExceptionGroup("g", [cancelled, closed])) is closed
    nested = BaseExceptionGroup("g", [BaseExceptionGroup("h", [cancelled]), closed])
    assert sole_exception(nested) is closed
    assert sole_exception(BaseExceptionGroup("g", [cancelled])) is cancelled
    assert sole_exception(ExceptionGroup("g", [closed, KeyError("k")])) is None


def _a_cancelled() -> trio.Cancelled:
    """A real `trio.Cancelled` (it cannot be constructed directly)."""
    caught: list[trio.Cancelled] = []

    async def main() -> None:
        with trio.CancelScope() as scope:
            scope.cancel()
            try:
                await trio.lowlevel.checkpoint()
            except trio.Cancelled as exc:
                caught.append(exc)
                raise

    trio.run(main)
    return caught[0]
