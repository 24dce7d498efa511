"""A process that takes a killed daemon's port never gets the token (issue 29 finding 3).

The attack as it was found: the daemon dies by ``kill -9`` (or the OOM killer), a
process of another user takes the freed port, answers ``/v1/health`` and whatever
comes, and records every byte. Then ``agentrio status``, a script's
``agentrio.connect`` (through the home, and with an explicit TCP URL and the token)
and the REPL's reconnect loop run against the home. What must hold: the listener
never receives the token (nor a valid client proof it could replay), ``status``
does not call the dead daemon running, and the clients fail with a clear error.
"""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

import pytest
import trio

import agentrio
import agentrio.repl.daemon as repl_daemon
from agentrio import AuthRefused, ClientError
from agentrio.repl.client import run_client
from agentrio.repl.messages import Connected, Incoming, Outgoing
from tests.e2e.conftest import DaemonProcess
from tests.e2e.test_daemon_control import agentrio as agentrio_cli
from tests.e2e.test_daemon_control import out

pytestmark = pytest.mark.skipif(not Path("/proc/locks").exists(), reason="needs /proc/locks")

_HEALTH = json.dumps({"ok": True, "version": "6.6.6", "uptime_s": 1.0, "tasks": 0}).encode()


class FakeListener:
    """What an attacker puts on the freed port: answers health with ``ok``, accepts
    any WebSocket upgrade and welcomes it at once, and keeps every byte it got."""

    def __init__(self) -> None:
        self.received: list[bytes] = []
        self.connections = 0

    async def handle(self, stream: trio.SocketStream) -> None:
        self.connections += 1
        data = b""
        with trio.move_on_after(10):
            try:
                while b"\r\n\r\n" not in data:
                    chunk = await stream.receive_some()
                    if not chunk:
                        return
                    data += chunk
                self.received.append(data)
                if b"upgrade: websocket" in data.lower():
                    await self._welcome(stream, data)
                else:
                    await stream.send_all(
                        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                        b"content-length: %d\r\n\r\n%s" % (len(_HEALTH), _HEALTH)
                    )
                while chunk := await stream.receive_some():
                    self.received.append(chunk)
            except trio.BrokenResourceError:
                return
            finally:
                await stream.aclose()

    async def _welcome(self, stream: trio.SocketStream, request: bytes) -> None:
        import base64
        import hashlib

        key = next(
            line.split(b":", 1)[1].strip()
            for line in request.split(b"\r\n")
            if line.lower().startswith(b"sec-websocket-key:")
        )
        accept = base64.b64encode(
            hashlib.sha1(key + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest()
        )
        await stream.send_all(
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
            b"Connection: Upgrade\r\nSec-WebSocket-Accept: " + accept + b"\r\n\r\n"
        )
        welcome = b'{"type":"welcome","protocol":1,"daemon_version":"6.6.6"}'
        await stream.send_all(bytes([0x81, len(welcome)]) + welcome)

    def got(self, secret: str) -> bool:
        """Whether ``secret`` reached the listener, even split across reads or masked
        in a WebSocket frame (unmasked here by trying every frame)."""
        raw = b"".join(self.received)
        return secret.encode() in raw or secret.encode() in _unmask_all(raw)


def _unmask_all(raw: bytes) -> bytes:
    """Whatever any masked client frame header at any offset of ``raw`` would carry,
    unmasked (payloads under 64 KiB): the token cannot hide in a frame."""
    found = bytearray()
    for start in range(len(raw) - 6):
        if not raw[start + 1] & 0x80:
            continue
        length, head = raw[start + 1] & 0x7F, start + 2
        if length == 127:
            continue
        if length == 126:
            length, head = int.from_bytes(raw[head : head + 2], "big"), head + 2
        mask = raw[head : head + 4]
        payload = raw[head + 4 : head + 4 + length]
        if len(mask) == 4:
            found += bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return bytes(found)


async def _killed_and_taken(
    tmp_path: Path, nursery: trio.Nursery
) -> tuple[Path, str, int, FakeListener]:
    """A daemon that served the home, ``kill -9``'d, and a fake on its port."""
    home = tmp_path / "home"
    daemon = await trio.to_thread.run_sync(DaemonProcess, home)
    token, port = daemon.info.token, int(daemon.info.base_url.rsplit(":", 1)[1])
    assert (home / "daemon.sock").exists()
    await trio.to_thread.run_sync(daemon.kill)
    fake = FakeListener()
    await nursery.start(partial(trio.serve_tcp, fake.handle, port, host="127.0.0.1"))
    return home, token, port, fake


async def test_status_and_scripts_never_send_the_token_to_a_stale_port(tmp_path: Path) -> None:
    """Issue 29 finding 3: after kill -9 a fake takes the port; ``agentrio status``
    says "not running" (exit 3) without asking it, ``agentrio.connect(home=…)`` fails
    on the dead socket without trying TCP, ``agentrio.connect(url, token)`` refuses
    the fake's welcome, and the fake never got the token."""
    async with trio.open_nursery() as nursery:
        home, token, port, fake = await _killed_and_taken(tmp_path, nursery)

        done = await agentrio_cli(home, "status")
        assert done.returncode == 3, out(done)
        assert "no agentrio daemon runs for" in out(done)
        assert "running for" not in out(done).replace("no agentrio daemon runs for", "")
        assert fake.connections == 0

        with pytest.raises(ClientError) as through_home:
            async with agentrio.connect(home=home):
                pytest.fail("connected to a dead daemon")
        assert through_home.value.code == "unreachable"
        assert "daemon.sock" in str(through_home.value)
        assert fake.connections == 0

        with pytest.raises(AuthRefused, match="expected challenge, got welcome"):
            async with agentrio.connect(f"http://127.0.0.1:{port}", token):
                pytest.fail("connected to the fake")
        assert fake.connections == 1
        assert not fake.got(token)
        nursery.cancel_scope.cancel()


async def test_the_repl_reconnect_loop_never_sends_the_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 29 finding 3: a REPL connected to its daemon, which is then killed; a
    fake takes the port; the REPL's reconnect loop runs (several attempts, within
    the restart grace, so it does not start a daemon itself) and never sends the
    token to the fake, nor shows it as connected."""
    home = tmp_path / "home"
    daemon = await trio.to_thread.run_sync(DaemonProcess, home)
    token, port = daemon.info.token, int(daemon.info.base_url.rsplit(":", 1)[1])
    delivered: list[Incoming] = []
    send, receive = trio.open_memory_channel[Outgoing](16)
    fake = FakeListener()
    looks: list[Path] = []  # each attempt of the loop reads daemon.json once
    real_read_named = repl_daemon._read_named

    def counted(home: Path) -> object:
        looks.append(home)
        return real_read_named(home)

    monkeypatch.setattr(repl_daemon, "_read_named", counted)
    async with send, trio.open_nursery() as nursery:
        nursery.start_soon(
            partial(run_client, home=home, outgoing=receive, deliver=delivered.append)
        )
        with trio.fail_after(20):
            while not any(isinstance(d, Connected) for d in delivered):
                await trio.sleep(0.02)
        await trio.to_thread.run_sync(daemon.kill)
        await nursery.start(partial(trio.serve_tcp, fake.handle, port, host="127.0.0.1"))
        connected = len([d for d in delivered if isinstance(d, Connected)])
        before = len(looks)
        with trio.fail_after(20):  # RETRY_DELAYS: 0.2 + 0.5 + 1 + 2 s: four attempts
            while len(looks) < before + 4:
                await trio.sleep(0.02)
        nursery.cancel_scope.cancel()
    assert len([d for d in delivered if isinstance(d, Connected)]) == connected == 1
    assert not fake.got(token)
    assert fake.connections == 0
