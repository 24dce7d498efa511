"""What a client that never authenticates can do to the real daemon (issue 29 findings
7 and 10).

- Memory (finding 7): before, 80 unauthenticated connections took the daemon from
  327 MB to 1.3 GB and 597 KiB of compressed frames to 710 MB. Here hundreds of
  connections offer permessage-deflate, send compressed bombs and announce 15 MiB
  messages; the daemon's peak RSS (``VmHWM``) must stay within idle + 64 MiB, no
  compression may be negotiated, connections beyond the cap are refused, and the
  daemon still serves a real client afterwards.
- DNS rebinding (finding 10): a request whose ``Host`` is not the daemon's is refused
  (HTTP 421, upgrade 403) and learns nothing of ``/v1/health``.
- Log flooding (finding 10): hundreds of refused Origins and Hosts leave a handful of
  lines in ``daemon.log``, plus one saying the rest were left out.
"""

from __future__ import annotations

import base64
import os
import zlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest
import trio

import agentrio
from tests.e2e.conftest import Daemon

MIB = 1024 * 1024


def _memory(pid: int) -> dict[str, int]:
    """``VmRSS`` and ``VmHWM`` (peak) of ``pid`` in bytes."""
    values: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, rest = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            values[name] = int(rest.split()[0]) * 1024
    return values


def _port(daemon: Daemon) -> int:
    return int(daemon.base_url.rsplit(":", 1)[1])


@asynccontextmanager
async def raw_upgrade(
    port: int, *, host: str | None = None, origin: str | None = None, deflate: bool = True
) -> AsyncIterator[tuple[int, bytes, trio.SocketStream]]:
    """A WebSocket upgrade sent by hand: ``(status, response head, stream)``."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        key = base64.b64encode(os.urandom(16))
        lines = [
            b"GET /v1/ws HTTP/1.1",
            b"Host: " + (host or f"127.0.0.1:{port}").encode(),
            b"Upgrade: websocket",
            b"Connection: Upgrade",
            b"Sec-WebSocket-Key: " + key,
            b"Sec-WebSocket-Version: 13",
        ]
        if deflate:
            lines.append(b"Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits")
        if origin is not None:
            lines.append(b"Origin: " + origin.encode())
        await stream.send_all(b"\r\n".join(lines) + b"\r\n\r\n")
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = await stream.receive_some()
            if not chunk:
                break
            head += chunk
        status = int(head.split(b" ", 2)[1]) if head else 0
        yield status, head.partition(b"\r\n\r\n")[0], stream


def _frame(payload: bytes, *, opcode: int = 0x1, rsv1: bool = False, length: int = -1) -> bytes:
    """A masked client frame (the mask is zero: XOR leaves the payload as it is);
    ``length`` may announce more than ``payload`` holds."""
    announced = len(payload) if length < 0 else length
    first = 0x80 | (0x40 if rsv1 else 0) | opcode
    if announced < 126:
        size = bytes([0x80 | announced])
    elif announced < 1 << 16:
        size = bytes([0x80 | 126]) + announced.to_bytes(2, "big")
    else:
        size = bytes([0x80 | 127]) + announced.to_bytes(8, "big")
    return bytes([first]) + size + b"\0\0\0\0" + payload


#: A permessage-deflate body that inflates to 64 MiB of "a" (about 64 KiB on the wire).
_BOMB = zlib.compressobj(9, zlib.DEFLATED, -15).compress(b"a" * 64 * MIB)


async def _attack(port: int, kind: str, outcomes: list[tuple[int, bool]]) -> None:
    """One unauthenticated connection trying to make the daemon hold memory."""
    with trio.move_on_after(30):
        async with raw_upgrade(port) as (status, head, stream):
            outcomes.append((status, b"sec-websocket-extensions" in head.lower()))
            if status != 101:
                return
            try:
                if kind == "bomb":
                    await stream.send_all(_frame(_BOMB, rsv1=True))
                else:  # announce 15 MiB and send 1 MiB of it
                    await stream.send_all(_frame(b"x" * MIB, length=15 * MIB))
                while await stream.receive_some():
                    pass  # until the daemon closes
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return


async def test_unauthenticated_clients_cannot_grow_the_daemon(daemon: Daemon) -> None:
    """Issue 29 finding 7: 3 rounds of 120 simultaneous unauthenticated connections
    (compression offered; deflate bombs and 15 MiB messages) leave the daemon's peak
    RSS within idle + 64 MiB; compression is never negotiated; at most 32 wait at
    once (the rest get 403); a real client still connects afterwards."""
    port = _port(daemon)
    pid = int((daemon.home / "daemon.lock").read_text().strip())
    async with agentrio.connect(daemon.base_url, daemon.token) as client:  # warm up
        await client.request("GET", "/v1/health")
    idle = _memory(pid)["VmRSS"]
    outcomes: list[tuple[int, bool]] = []
    for _ in range(3):
        async with trio.open_nursery() as nursery:
            for n in range(120):
                nursery.start_soon(_attack, port, "bomb" if n % 2 else "big", outcomes)
    peak = _memory(pid)["VmHWM"]
    assert peak - idle < 64 * MIB, (idle // MIB, peak // MIB)
    assert len(outcomes) == 360
    assert not any(deflated for _, deflated in outcomes)
    assert {status for status, _ in outcomes} <= {101, 403}
    assert 0 < sum(status == 101 for status, _ in outcomes) < 360
    async with agentrio.connect(daemon.base_url, daemon.token) as client:
        assert (await client.request("GET", "/v1/health")).status == 200


async def test_a_hello_over_4_kib_closes_before_authentication(daemon: Daemon) -> None:
    """Issue 29 finding 7: before ``welcome`` a message over 4 KiB is not read: the
    daemon closes with 1009 (message too big)."""
    async with raw_upgrade(_port(daemon), deflate=False) as (status, _, stream):
        assert status == 101
        await stream.send_all(_frame(b'{"type":"hello",' + b" " * 5000 + b"}"))
        data = b""
        while chunk := await stream.receive_some():
            data += chunk
    assert data[:1] == b"\x88"  # a close frame
    assert int.from_bytes(data[2:4], "big") == 1009


async def test_a_foreign_host_is_refused(daemon: Daemon) -> None:
    """Issue 29 finding 10 (DNS rebinding): ``Host: evil.example`` gets 421 from
    ``/v1/health`` with none of its content, and 403 for a WebSocket upgrade; the
    daemon's own names pass."""
    port = _port(daemon)
    async with httpx.AsyncClient(base_url=daemon.base_url) as http:
        refused = await http.get("/v1/health", headers={"Host": f"evil.example:{port}"})
        assert refused.status_code == 421
        assert "uptime_s" not in refused.text
        assert "version" not in refused.text
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", "localhost"):
            assert (await http.get("/v1/health", headers={"Host": host})).status_code == 200
    async with raw_upgrade(port, host=f"evil.example:{port}") as (status, _, _stream):
        assert status == 403


async def test_refusals_are_logged_rate_limited(daemon: Daemon) -> None:
    """Issue 29 finding 10: 200 refused Origins and 200 refused Hosts write at most 5
    lines each to daemon.log, and say that the rest were left out."""
    port = _port(daemon)
    for _ in range(200):
        async with raw_upgrade(port, origin="https://evil.example") as (status, _, _stream):
            assert status == 403
    async with httpx.AsyncClient(base_url=daemon.base_url) as http:
        for _ in range(200):
            response = await http.get("/v1/health", headers={"Host": "evil.example"})
            assert response.status_code == 421
    log = (daemon.home / "daemon.log").read_text()
    assert 1 <= log.count("refused a WebSocket upgrade from origin") <= 5
    assert 1 <= log.count("refused a request for host") <= 5
    assert "further 'origin' lines are left out" in log
    assert "further 'host' lines are left out" in log


@pytest.fixture
def agentrio_daemon_home(tmp_path: Path) -> Path:
    return tmp_path / "home"
