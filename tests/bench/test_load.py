"""The load generator of the benches (issue 23): `bench.load.send_many` reopens a
keep-alive connection the daemon ends, resends only a request the daemon provably never
read, and never resends one it may have acted on."""

from __future__ import annotations

import json
import socket
from collections.abc import Awaitable, Callable

import httpx
import pytest
import trio

from bench.load import send_many

Handler = Callable[[trio.SocketStream, int], Awaitable[None]]


async def _read_request(stream: trio.SocketStream, buffer: bytearray) -> dict[str, object]:
    while b"\r\n\r\n" not in buffer:
        chunk = await stream.receive_some()
        if not chunk:
            raise EOFError
        buffer += chunk
    end = buffer.index(b"\r\n\r\n") + 4
    head = bytes(buffer[:end]).decode("latin-1").lower()
    length = int(head.split("content-length:", 1)[1].split("\r\n", 1)[0])
    while len(buffer) < end + length:
        buffer += await stream.receive_some()
    body = json.loads(bytes(buffer[end : end + length]))
    del buffer[: end + length]
    assert isinstance(body, dict)
    return body


def _response(task_hash: str, *, close: bool) -> bytes:
    body = json.dumps({"task_hash": task_hash}).encode()
    extra = "Connection: close\r\n" if close else ""
    return (
        f"HTTP/1.1 202 Accepted\r\nContent-Type: application/json\r\n{extra}"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body


async def _serve(nursery: trio.Nursery, handler: Handler) -> httpx.AsyncClient:
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    accepted = 0

    async def on_connection(stream: trio.SocketStream) -> None:
        nonlocal accepted
        accepted += 1
        try:
            await handler(stream, accepted)
        finally:
            await stream.aclose()

    nursery.start_soon(trio.serve_listeners, on_connection, listeners)
    return httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}")


async def test_a_connection_ended_with_connection_close_is_reopened() -> None:
    """Issue 23: like hypercorn after its 1,000th request, the server answers the
    third request of each connection with ``Connection: close`` and closes; every body
    is sent exactly once, in order, over ceil(10 / 3) connections."""
    seen: list[object] = []
    connections: list[int] = []

    async def handler(stream: trio.SocketStream, number: int) -> None:
        connections.append(number)
        buffer = bytearray()
        for count in range(1, 4):
            try:
                body = await _read_request(stream, buffer)
            except EOFError:
                return
            seen.append(body["input"])
            await stream.send_all(_response(f"h{body['input']}", close=count == 3))

    async with trio.open_nursery() as nursery:
        client = await _serve(nursery, handler)
        bodies: list[dict[str, object]] = [{"input": i} for i in range(10)]
        hashes = await send_many(client, bodies, concurrency=1)
        nursery.cancel_scope.cancel()
    assert hashes == [f"h{i}" for i in range(10)]
    assert seen == list(range(10))
    assert connections == [1, 2, 3, 4]


async def test_an_idle_connection_the_server_closed_is_reopened_before_sending() -> None:
    """Issue 23: a server that closes a kept-alive connection without saying so (an
    idle timeout) after each response: the close is seen before the next request is
    written (or, when the request races the close, the server's kernel resets it
    unread), so nothing is lost and nothing is sent twice."""
    seen: list[object] = []

    async def handler(stream: trio.SocketStream, number: int) -> None:
        body = await _read_request(stream, bytearray())
        seen.append(body["input"])
        await stream.send_all(_response(f"h{body['input']}", close=False))

    async with trio.open_nursery() as nursery:
        client = await _serve(nursery, handler)
        hashes = await send_many(client, [{"input": i} for i in range(3)], concurrency=1)
        nursery.cancel_scope.cancel()
    assert hashes == ["h0", "h1", "h2"]
    assert seen == [0, 1, 2]


async def test_a_request_reset_unread_is_sent_again() -> None:
    """Issue 23: the first connection is reset with the request still unread (closed
    with data in its receive buffer, so the kernel answers RST): that request was
    never processed and is sent again on a new connection, once."""
    seen: list[object] = []

    async def handler(stream: trio.SocketStream, number: int) -> None:
        if number == 1:
            await trio.lowlevel.wait_readable(stream.socket)
            stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\1\0\0\0\0\0\0\0")
            return
        buffer = bytearray()
        while True:
            try:
                body = await _read_request(stream, buffer)
            except EOFError:
                return
            seen.append(body["input"])
            await stream.send_all(_response(f"h{body['input']}", close=False))

    async with trio.open_nursery() as nursery:
        client = await _serve(nursery, handler)
        hashes = await send_many(client, [{"input": 0}, {"input": 1}], concurrency=1)
        nursery.cancel_scope.cancel()
    assert hashes == ["h0", "h1"]
    assert seen == [0, 1]


async def test_a_request_read_and_then_closed_on_is_not_sent_again() -> None:
    """Issue 23: the server reads the request and closes without answering: it may
    have acted on it, so the sender raises instead of sending it a second time."""
    seen: list[object] = []

    async def handler(stream: trio.SocketStream, number: int) -> None:
        body = await _read_request(stream, bytearray())
        seen.append(body["input"])

    async with trio.open_nursery() as nursery:
        client = await _serve(nursery, handler)
        with pytest.RaisesGroup(
            pytest.RaisesExc(RuntimeError, match="closed the connection before answering")
        ):
            await send_many(client, [{"input": 0}], concurrency=1)
        nursery.cancel_scope.cancel()
    assert seen == [0]
