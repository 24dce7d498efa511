"""Load helpers of the daemon benches: many tasks through ``POST /v1/send``, and the
daemon's child processes read from ``/proc``."""

from __future__ import annotations

import json
import os
import select
from collections.abc import Awaitable, Sequence
from pathlib import Path
from typing import TypeVar

import httpx
import trio

__all__ = ["REQUEST_TIMEOUT_S", "children", "process_group_alive", "send_many", "wait_for"]

T = TypeVar("T")

#: Seconds one ``/v1/send`` may take before the load generator gives up.
REQUEST_TIMEOUT_S = 60.0


async def send_many(
    client: httpx.AsyncClient,
    bodies: Sequence[dict[str, object]],
    *,
    concurrency: int = 16,
) -> list[str]:
    """POST every body to ``/v1/send`` (``concurrency`` requests in flight, each on its
    own keep-alive connection); the task hashes, in order. Any status but 202 raises.

    Uses a minimal HTTP/1.1 client on raw Trio sockets, with the address and headers
    of ``client``: httpx costs about 3 ms of CPU per request, which on a 2-core
    machine takes CPU from the daemon being measured and made starting 10,000 tasks
    take minutes. A connection the daemon closes is reopened (see `_Sender`): hypercorn
    ends a keep-alive connection after 1,000 requests."""
    hashes = [""] * len(bodies)
    url = httpx.URL(str(client.base_url))
    host, port = url.host, url.port
    assert host
    assert port
    head = "".join(
        f"{name}: {value}\r\n"
        for name, value in client.headers.items()
        if name.lower() not in ("content-length", "content-type", "host", "connection")
    )
    queue = iter(enumerate(bodies))

    async def worker() -> None:
        async with _Sender(host, port) as sender:
            for index, body in queue:
                payload = json.dumps(body).encode()
                request = (
                    f"POST /v1/send HTTP/1.1\r\nHost: {url.host}:{url.port}\r\n{head}"
                    f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n\r\n"
                ).encode() + payload
                status, text = await sender.request(request)
                if status != 202:
                    raise RuntimeError(f"send {index}: {status} {text}")
                hashes[index] = json.loads(text)["task_hash"]

    async with trio.open_nursery() as nursery:
        for _ in range(min(concurrency, len(bodies))):
            nursery.start_soon(worker)
    return hashes


class _Unread(Exception):
    """The daemon reset the connection while the request was still unread."""


class _Sender:
    """One keep-alive HTTP/1.1 connection at a time, reopened when the daemon ends it.

    A request is sent at most once unless it provably was not processed:

    * a response with ``Connection: close`` ends the connection: the next request goes
      on a new one;
    * before a request is written on a connection kept open, a non-blocking peek tells
      whether the daemon has already closed it (end of file waiting): then it is
      reopened first, nothing having been sent;
    * a connection *reset* before any byte of the response means the daemon's kernel
      discarded the request unread (a socket closed with unread data answers with RST,
      one that read everything with FIN), so it is sent again on a new connection;
    * an orderly close after the request was written and before the response is
      ambiguous (the daemon may have read and acted on it): that raises.
    """

    #: Resends of one request after resets before the sender gives up.
    RESENDS = 3

    def __init__(self, host: str, port: int) -> None:
        self._host = host
        self._port = port
        self._stream: trio.SocketStream | None = None
        self._buffer = bytearray()
        #: Connections opened (the first included): how often the daemon closed one.
        self.opened = 0

    async def __aenter__(self) -> _Sender:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._close()

    async def _close(self) -> None:
        if self._stream is not None:
            stream, self._stream = self._stream, None
            await stream.aclose()
        self._buffer.clear()

    async def _connection(self) -> trio.SocketStream:
        if self._stream is not None and _closed_by_peer(self._stream):
            await self._close()
        if self._stream is None:
            # Bounded: a daemon that stops answering fails the bench instead of hanging.
            with trio.fail_after(REQUEST_TIMEOUT_S):
                self._stream = await trio.open_tcp_stream(self._host, self._port)
            self.opened += 1
        return self._stream

    async def request(self, request: bytes) -> tuple[int, str]:
        """Send ``request``, read its response: (status, body text)."""
        for _ in range(self.RESENDS + 1):
            stream = await self._connection()
            try:
                with trio.fail_after(REQUEST_TIMEOUT_S):
                    await _reset_as_unread(stream.send_all(request), self._buffer)
                    status, text, close = await _reset_as_unread(
                        _read_response(stream, self._buffer), self._buffer
                    )
            except _Unread:
                await self._close()
                continue
            if close:
                await self._close()
            return status, text
        raise RuntimeError(f"the daemon reset the connection {self.RESENDS + 1} times")


async def _reset_as_unread(step: Awaitable[T], buffer: bytearray) -> T:
    """Await ``step``; a connection reset while no byte of the response has arrived
    becomes `_Unread` (the request was discarded by the daemon's kernel)."""
    try:
        return await step
    except trio.BrokenResourceError as error:
        if not buffer and isinstance(error.__cause__, ConnectionResetError):
            raise _Unread from error
        raise


def _closed_by_peer(stream: trio.SocketStream) -> bool:
    """Whether the daemon has closed ``stream``, without reading or blocking: between
    requests nothing is owed, so a readable connection is an end of file (or a reset)
    waiting."""
    poller = select.poll()
    poller.register(stream.socket.fileno(), select.POLLIN)
    return bool(poller.poll(0))


async def _read_response(stream: trio.SocketStream, buffer: bytearray) -> tuple[int, str, bool]:
    """One HTTP/1.1 response with a ``Content-Length`` body (what the daemon sends):
    (status, body, whether the daemon ends the connection after it)."""
    while b"\r\n\r\n" not in buffer:
        buffer += await _receive(stream)
    end = buffer.index(b"\r\n\r\n") + 4
    lines = bytes(buffer[:end]).decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = [line.split(":", 1) for line in lines[1:] if ":" in line]
    length = next(int(value) for name, value in headers if name.lower() == "content-length")
    close = any(
        name.lower() == "connection" and "close" in value.lower() for name, value in headers
    )
    while len(buffer) < end + length:
        buffer += await _receive(stream)
    text = bytes(buffer[end : end + length]).decode()
    del buffer[: end + length]
    return status, text, close


async def _receive(stream: trio.SocketStream) -> bytes:
    chunk = await stream.receive_some()
    if not chunk:
        raise RuntimeError("the daemon closed the connection before answering a request")
    return chunk


def children(parent: int) -> dict[int, list[str]]:
    """Live (non-zombie) direct children of ``parent``: pid → argv."""
    found: dict[int, list[str]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
            fields = stat.rsplit(")", 1)[1].split()
            if int(fields[1]) != parent or fields[0] == "Z":
                continue
            argv = Path(entry.path, "cmdline").read_bytes().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue
        found[int(entry.name)] = [part.decode() for part in argv if part]
    return found


def process_group_alive(pgid: int) -> bool:
    """Whether any non-zombie process is still in group ``pgid``."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            fields = Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


async def wait_for(
    predicate: object, what: str, timeout_s: float, interval_s: float = 0.05
) -> None:
    """Poll a blocking ``predicate()`` in a thread until it is true."""
    assert callable(predicate)
    with trio.fail_after(timeout_s):
        while not await trio.to_thread.run_sync(predicate):
            await trio.sleep(interval_s)
    del what


def health(base_url: str) -> dict[str, object]:
    """``GET /v1/health`` (blocking)."""
    import urllib.request

    with urllib.request.urlopen(f"{base_url}/v1/health", timeout=5) as response:
        data: dict[str, object] = json.load(response)
    return data
