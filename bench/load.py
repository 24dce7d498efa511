"""Load helpers of the daemon benches: many tasks through ``POST /v1/send``, and the
daemon's child processes read from ``/proc``."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

import httpx
import trio

__all__ = ["REQUEST_TIMEOUT_S", "children", "process_group_alive", "send_many", "wait_for"]

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
    take minutes."""
    hashes = [""] * len(bodies)
    url = httpx.URL(str(client.base_url))
    assert url.host
    assert url.port
    head = "".join(
        f"{name}: {value}\r\n"
        for name, value in client.headers.items()
        if name.lower() not in ("content-length", "content-type", "host", "connection")
    )
    queue = iter(enumerate(bodies))

    async def worker() -> None:
        # Bounded: a daemon that stops answering fails the bench instead of hanging it.
        with trio.fail_after(REQUEST_TIMEOUT_S):
            stream = await trio.open_tcp_stream(url.host, url.port)
        buffer = bytearray()
        try:
            for index, body in queue:
                payload = json.dumps(body).encode()
                request = (
                    f"POST /v1/send HTTP/1.1\r\nHost: {url.host}:{url.port}\r\n{head}"
                    f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n\r\n"
                ).encode() + payload
                with trio.fail_after(REQUEST_TIMEOUT_S):
                    await stream.send_all(request)
                    status, text = await _read_response(stream, buffer)
                if status != 202:
                    raise RuntimeError(f"send {index}: {status} {text}")
                hashes[index] = json.loads(text)["task_hash"]
        finally:
            await stream.aclose()

    async with trio.open_nursery() as nursery:
        for _ in range(min(concurrency, len(bodies))):
            nursery.start_soon(worker)
    return hashes


async def _read_response(stream: trio.SocketStream, buffer: bytearray) -> tuple[int, str]:
    """One HTTP/1.1 response with a ``Content-Length`` body (what the daemon sends)."""
    while b"\r\n\r\n" not in buffer:
        chunk = await stream.receive_some()
        if not chunk:
            raise RuntimeError("the daemon closed the connection")
        buffer += chunk
    end = buffer.index(b"\r\n\r\n") + 4
    lines = bytes(buffer[:end]).decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    length = next(
        int(line.split(":", 1)[1]) for line in lines if line.lower().startswith("content-length:")
    )
    while len(buffer) < end + length:
        chunk = await stream.receive_some()
        if not chunk:
            raise RuntimeError("the daemon closed the connection")
        buffer += chunk
    text = bytes(buffer[end : end + length]).decode()
    del buffer[: end + length]
    return status, text


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
