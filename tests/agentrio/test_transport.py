"""The client transport against small raw servers: every way a connection can end
leaves no socket open and raises one documented `ClientError` (R6, R43: a script
sees a dead daemon as a closed connection, never a hang, a leaked socket or a
library's exception); and the one table that maps library errors.

Testing rules kept here (as trio-websocket's own tests do): servers start with
``nursery.start``; a server that must break the protocol owns its TCP stream and
closes it itself (no private attribute of the library is touched); every test ends
its server nursery."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Awaitable, Callable
from functools import partial

import httpx
import pytest
import trio
import trio_websocket

from agentrio.errors import (
    AuthRefused,
    ClientError,
    Disconnected,
    HandshakeError,
    Timeout,
    Unreachable,
)
from agentrio.protocol.challenge import client_proof, daemon_proof, new_nonce
from agentrio.protocol.codec import dumps
from agentrio.protocol.frames import PROTOCOL_VERSION, Challenge, ErrorFrame, Welcome
from agentrio.transport import map_errors, open_frame_connection, open_http

Handler = Callable[[trio.SocketStream], Awaitable[None]]
WsHandler = Callable[[trio_websocket.WebSocketConnection, trio.SocketStream], Awaitable[None]]
WELCOME = dumps(Welcome(protocol=PROTOCOL_VERSION, daemon_version="t"))
_WS_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


async def _prove_daemon(
    ws: trio_websocket.WebSocketConnection, token: str = "t", hello: str | bytes | None = None
) -> None:
    """Play the daemon's side of the mutual challenge (`agentrio.protocol.challenge`) for the
    client's ``hello`` (read here unless given)."""
    if hello is None:
        hello = await ws.get_message()
    nonce = json.loads(hello)["nonce"]
    mine = new_nonce()
    proof = daemon_proof(token, nonce, mine)
    await ws.send_message(dumps(Challenge(nonce=mine, proof=proof)))
    prove = json.loads(await ws.get_message())
    assert prove == {"type": "prove", "proof": client_proof(token, nonce, mine)}


async def _serve_raw(nursery: trio.Nursery, handler: Handler) -> str:
    """A TCP server on 127.0.0.1 running ``handler`` per connection; its ws:// URL."""
    listeners = await nursery.start(partial(trio.serve_tcp, handler, 0, host="127.0.0.1"))
    port = listeners[0].socket.getsockname()[1]
    return f"ws://127.0.0.1:{port}/v1/ws"


async def _serve_ws(nursery: trio.Nursery, handler: WsHandler) -> str:
    """A WebSocket server whose handler also gets the TCP stream it owns."""

    async def on_tcp(stream: trio.SocketStream) -> None:
        async with stream, trio.open_nursery() as reader:
            request = await trio_websocket.wrap_server_stream(reader, stream)
            try:
                await handler(await request.accept(), stream)
            finally:
                await stream.aclose()  # ends the server's reader task

    return await _serve_raw(nursery, on_tcp)


async def test_peer_gone_mid_handshake_is_a_handshake_error_at_once() -> None:
    """R43: a daemon that dies after accepting TCP but before answering the opening
    handshake is reported at once as HandshakeError (no 10 s wait, no socket left)."""

    async def read_then_vanish(stream: trio.SocketStream) -> None:
        await stream.receive_some()
        await stream.aclose()

    async with trio.open_nursery() as nursery:
        url = await _serve_raw(nursery, read_then_vanish)
        started = trio.current_time()
        with pytest.raises(HandshakeError, match="during the handshake") as info:
            async with open_frame_connection(url, "t"):
                pytest.fail("no connection should open")
        assert trio.current_time() - started < 5
        assert (info.value.code, info.value.where) == ("unreachable", url)
        nursery.cancel_scope.cancel()


async def test_silent_peer_times_out(autojump_clock: trio.testing.MockClock) -> None:
    """R43: a peer that accepts TCP and never answers ends in Timeout after
    ``connect_timeout``."""

    async def silent(stream: trio.SocketStream) -> None:
        await trio.sleep_forever()

    async with trio.open_nursery() as nursery:
        url = await _serve_raw(nursery, silent)
        with pytest.raises(Timeout):
            async with open_frame_connection(url, "t", connect_timeout=3.0):
                pytest.fail("no connection should open")
        nursery.cancel_scope.cancel()


async def test_a_daemon_that_never_welcomes_times_out(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R43: the connect timeout covers ``welcome`` too: an upgrade answered by a
    daemon that then says nothing is a Timeout, not a hang."""

    async def mute(ws: trio_websocket.WebSocketConnection, stream: trio.SocketStream) -> None:
        await trio.sleep_forever()

    async with trio.open_nursery() as nursery:
        url = await _serve_ws(nursery, mute)
        with pytest.raises(Timeout, match="welcome"):
            async with open_frame_connection(url, "t", connect_timeout=3.0):
                pytest.fail("no connection should open")
        nursery.cancel_scope.cancel()


async def test_nothing_listening_is_unreachable() -> None:
    """§8: a refused TCP connect is Unreachable (the OSError kept as its cause)."""
    with trio.socket.socket() as sock:
        await sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, never listening: connects are refused
        url = f"ws://127.0.0.1:{port}/v1/ws"
        with pytest.raises(Unreachable) as info:
            async with open_frame_connection(url, "t"):
                pytest.fail("no connection should open")
    assert type(info.value) is Unreachable
    assert isinstance(info.value.__cause__, OSError)


async def test_a_refused_upgrade_is_a_handshake_error_with_its_status() -> None:
    """§8: an HTTP answer other than 101 to the upgrade (a 403 for a foreign Origin)
    is a HandshakeError naming the status."""

    async def forbid(stream: trio.SocketStream) -> None:
        await stream.receive_some()
        await stream.send_all(b"HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\n\r\n")
        await trio.sleep(1)
        await stream.aclose()

    async with trio.open_nursery() as nursery:
        url = await _serve_raw(nursery, forbid)
        with pytest.raises(HandshakeError, match="HTTP 403"):
            async with open_frame_connection(url, "t"):
                pytest.fail("no connection should open")
        nursery.cancel_scope.cancel()


async def _raise_inside(url: str, error: BaseException) -> None:
    async with open_frame_connection(url, "t") as conn:
        assert conn.welcome is not None
        raise error


async def test_body_exceptions_and_peer_abort_come_out_plain() -> None:
    """R6: the body's own exception leaves the context manager as itself (not wrapped
    in an ExceptionGroup), and a daemon killed after ``welcome`` is Disconnected with
    close code 1006."""

    async def welcome_then_abort(
        ws: trio_websocket.WebSocketConnection, stream: trio.SocketStream
    ) -> None:
        await _prove_daemon(ws)
        await ws.send_message(WELCOME)
        await trio.sleep(0.05)
        await stream.aclose()  # like kill -9: no closing handshake

    async with trio.open_nursery() as nursery:
        url = await _serve_ws(nursery, welcome_then_abort)
        mine = KeyError("mine")
        with pytest.raises(KeyError) as raised:
            await _raise_inside(url, mine)
        assert raised.value is mine
        with pytest.raises(Disconnected) as info:
            async with open_frame_connection(url, "t") as conn:
                await conn.receive()
        assert info.value.close_code == 1006
        assert info.value.code == "disconnected"
        nursery.cancel_scope.cancel()


async def test_refused_hello_and_a_normal_close() -> None:
    """§8: a 4401 close of ``hello`` is AuthRefused; leaving the block closes the
    connection with a closing handshake the server sees as 1000."""
    closes: list[int] = []

    async def refuse_or_echo(
        ws: trio_websocket.WebSocketConnection, stream: trio.SocketStream
    ) -> None:
        hello = await ws.get_message()
        if '"bad"' in str(hello):
            await ws.aclose(4401, "authentication failed")
            return
        await _prove_daemon(ws, "good", hello)
        await ws.send_message(WELCOME)
        with pytest.raises(trio_websocket.ConnectionClosed) as info:
            await ws.get_message()
        assert info.value.reason is not None
        closes.append(info.value.reason.code)

    async with trio.open_nursery() as nursery:
        url = await _serve_ws(nursery, refuse_or_echo)
        with pytest.raises(AuthRefused, match="authentication failed") as refused:
            async with open_frame_connection(url, "t", client="bad"):
                pytest.fail("no connection should open")
        assert refused.value.code == "unauthorized"
        async with open_frame_connection(url, "good") as conn:
            assert conn.welcome == Welcome(protocol=PROTOCOL_VERSION, daemon_version="t")
        with trio.fail_after(5):
            while not closes:
                await trio.sleep(0.01)
        assert closes == [1000]
        nursery.cancel_scope.cancel()


async def test_closed_before_welcome_or_answered_otherwise() -> None:
    """§8: a close other than 4401 before ``welcome`` is Disconnected (its code kept);
    a first frame that is not ``welcome`` is AuthRefused."""

    async def misbehave(ws: trio_websocket.WebSocketConnection, stream: trio.SocketStream) -> None:
        hello = await ws.get_message()
        if '"close"' in str(hello):
            await ws.aclose(4001, "shutting down")
            return
        await _prove_daemon(ws, "t", hello)
        await ws.send_message(dumps(ErrorFrame(code="bad_frame", message="no")))
        await trio.sleep_forever()

    async with trio.open_nursery() as nursery:
        url = await _serve_ws(nursery, misbehave)
        with pytest.raises(Disconnected) as closed:
            async with open_frame_connection(url, "t", client="close"):
                pytest.fail("no connection should open")
        assert (closed.value.close_code, closed.value.close_reason) == (4001, "shutting down")
        with pytest.raises(AuthRefused, match="expected welcome, got error"):
            async with open_frame_connection(url, "t"):
                pytest.fail("no connection should open")
        nursery.cancel_scope.cancel()


async def _read_masked_frame(stream: trio.SocketStream) -> bytes:
    """One small masked client frame (payload under 64 KiB), unmasked."""
    data = b""

    async def at_least(n: int) -> None:
        nonlocal data
        while len(data) < n:
            data += await stream.receive_some()

    await at_least(2)
    length, start = data[1] & 0x7F, 2
    if length == 126:
        await at_least(4)
        length, start = int.from_bytes(data[2:4], "big"), 4
    await at_least(start + 4 + length)
    mask, payload = data[start : start + 4], data[start + 4 : start + 4 + length]
    return bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


async def test_a_daemon_closing_first_leaves_no_socket_open() -> None:
    """R43: when the daemon closes the WebSocket first (4001 on shutdown) and waits,
    the client answers the close and closes its socket: the server reads EOF
    (trio-websocket alone leaves that socket open). The server speaks raw WebSocket
    so that it can keep its side of TCP open."""
    eof = trio.Event()

    async def close_first(stream: trio.SocketStream) -> None:
        request = b""
        while b"\r\n\r\n" not in request:
            request += await stream.receive_some()
        key = next(
            line.split(b":", 1)[1].strip()
            for line in request.split(b"\r\n")
            if line.lower().startswith(b"sec-websocket-key:")
        )
        accept = base64.b64encode(hashlib.sha1(key + _WS_GUID).digest())
        await stream.send_all(
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
            b"Connection: Upgrade\r\nSec-WebSocket-Accept: " + accept + b"\r\n\r\n"
        )
        nonce = json.loads(await _read_masked_frame(stream))["nonce"]
        mine = new_nonce()
        challenge = dumps(Challenge(nonce=mine, proof=daemon_proof("t", nonce, mine))).encode()
        await stream.send_all(bytes([0x81, 126]) + len(challenge).to_bytes(2, "big") + challenge)
        await _read_masked_frame(stream)  # prove
        welcome = WELCOME.encode()
        await stream.send_all(bytes([0x81, len(welcome)]) + welcome)
        close = (4001).to_bytes(2, "big") + b"bye"
        await stream.send_all(bytes([0x88, len(close)]) + close)
        while await stream.receive_some():
            pass  # the client's hello, then its close frame, then EOF
        eof.set()

    async with trio.open_nursery() as nursery:
        url = await _serve_raw(nursery, close_first)
        with pytest.raises(Disconnected) as info:
            async with open_frame_connection(url, "t") as conn:
                await conn.receive()
        assert (info.value.close_code, info.value.close_reason) == (4001, "bye")
        with trio.fail_after(5):
            await eof.wait()
        nursery.cancel_scope.cancel()


# ---------------------------------------------------------------------- the table


def _closed(code: int, reason: str | None) -> trio_websocket.ConnectionClosed:
    return trio_websocket.ConnectionClosed(trio_websocket.CloseReason(code, reason))


@pytest.mark.parametrize(
    ("phase", "error", "expected", "code"),
    [
        ("connect", ConnectionRefusedError(111, "refused"), Unreachable, "unreachable"),
        ("open", ConnectionResetError(104, "reset"), Disconnected, "disconnected"),
        ("http", OSError("no route"), Unreachable, "unreachable"),
        ("connect", trio_websocket.ConnectionTimeout(), Timeout, "unreachable"),
        ("connect", trio.TooSlowError(), Timeout, "unreachable"),
        ("connect", trio_websocket.ConnectionRejected(403, (), b""), HandshakeError, None),
        ("connect", trio_websocket.HandshakeError("x"), HandshakeError, "unreachable"),
        ("open", trio_websocket.DisconnectionTimeout(), Disconnected, "disconnected"),
        ("connect", trio.BrokenResourceError(), HandshakeError, "unreachable"),
        ("open", trio.BrokenResourceError(), Disconnected, "disconnected"),
        ("open", trio.ClosedResourceError(), Disconnected, "disconnected"),
        ("open", _closed(4001, "bye"), Disconnected, "disconnected"),
        ("connect", _closed(1006, None), Disconnected, "disconnected"),
        ("http", httpx.ConnectTimeout("slow"), Timeout, "unreachable"),
        ("http", httpx.ReadTimeout("slow"), Timeout, "unreachable"),
        ("http", httpx.ConnectError("refused"), Unreachable, "unreachable"),
        ("http", httpx.RemoteProtocolError("garbage"), Unreachable, "unreachable"),
        ("http", httpx.InvalidURL("bad"), ClientError, "bad_url"),
    ],
)
def test_each_library_error_maps_to_one_client_error(
    phase: str, error: BaseException, expected: type[ClientError], code: str | None
) -> None:
    """§8, R43: the one error boundary: each library error leaving `map_errors`
    becomes exactly this `ClientError` class, with the library error as its cause."""
    with pytest.raises(ClientError) as info, map_errors(phase, "ws://h:1/v1/ws"):  # type: ignore[arg-type]
        raise error
    assert type(info.value) is expected
    assert info.value.code == (code or "unreachable")
    assert info.value.__cause__ is error


def test_map_errors_keeps_close_details_and_passes_the_rest_through() -> None:
    """§8: a close keeps its code and reason; a close with no reason says its code;
    errors that are not a library's (a bug, a cancellation) pass unchanged."""
    with pytest.raises(Disconnected) as info, map_errors("open"):
        raise _closed(4001, "daemon shutting down")
    assert (info.value.close_code, info.value.close_reason) == (4001, "daemon shutting down")
    assert info.value.message == "daemon shutting down"
    with pytest.raises(Disconnected, match="closed with code 1006"), map_errors("open"):
        raise _closed(1006, None)
    with pytest.raises(Disconnected) as unknown, map_errors("open"):
        raise trio_websocket.ConnectionClosed(None)
    assert unknown.value.close_code is None
    with pytest.raises(KeyError), map_errors("open"):
        raise KeyError("a bug stays a bug")


# ---------------------------------------------------------------------- HTTP


async def test_http_replies_with_any_status_and_maps_failures() -> None:
    """R70, §9: requests carry the bearer token (the client's, or one given per call);
    an error status is a reply, not an exception; transport failures are
    Unreachable/Timeout naming the request."""
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if request.url.path == "/down":
            raise httpx.ConnectError("refused")
        if request.url.path == "/slow":
            raise httpx.ReadTimeout("slow")
        return httpx.Response(404, json={"error": {"code": "not_found", "message": "no"}})

    transport = httpx.MockTransport(handler)
    async with open_http("http://d:1", token="tok", transport=transport) as http:
        reply = await http.request("GET", "/v1/x", params={"a": "b"})
        assert (reply.status, reply.json()["error"]["code"]) == (404, "not_found")
        await http.request("GET", "http://other:2/v1/health", token="t2")
        with pytest.raises(Unreachable) as down:
            await http.request("POST", "/down")
        assert (down.value.where, down.value.message) == ("POST /down", "refused")
        with pytest.raises(Timeout):
            await http.request("GET", "/slow")
    assert str(seen[0].url) == "http://d:1/v1/x?a=b"
    assert seen[0].headers["authorization"] == "Bearer tok"
    assert (str(seen[1].url), seen[1].headers["authorization"]) == (
        "http://other:2/v1/health",
        "Bearer t2",
    )
