"""Bounded by bytes, stopped on time (R53, R81).

- **shutdown with clients that stopped reading**: WebSocket subscribers and SSE
  streams that never read while 1 MiB-ish events flood their session; SIGTERM must
  end the daemon with exit 0 within 5 s (CI: 20 WS + 5 SSE; soak: 100 + 20);
- **memory bounded by bytes**: many runs of ~1 MiB inputs across sessions with two
  subscribers that never read; the daemon's RSS (from ``/proc``) stays under its idle
  RSS + 128 MiB (CI: 60 runs over 10 sessions; soak: 1,000).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import trio
import trio_websocket

from agentrio.testing import DaemonProcess
from tests.reliability.conftest import client, size

_BIG = 900 * 1024  # under the 1 MiB body limit, with room for JSON


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


async def _stalled_ws(
    url: str, token: str, session: str, nursery: trio.Nursery
) -> trio_websocket.WebSocketConnection:
    """A WebSocket that says hello, subscribes, and then never reads again."""
    ws = await trio_websocket.connect_websocket_url(nursery, url, message_queue_size=0)
    await ws.send_message(
        json.dumps({"type": "hello", "token": token, "client": "stalled", "protocol": 1})
    )
    await ws.send_message(json.dumps({"type": "subscribe", "session_id": session}))
    return ws


async def _close_all(sockets: list[trio_websocket.WebSocketConnection]) -> None:
    with trio.move_on_after(2):
        for ws in sockets:
            await ws.aclose()
    for ws in sockets:
        await ws._stream.aclose()


async def _stalled_sse(port: int, token: str, session: str) -> trio.SocketStream:
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    request = (
        f"GET /v1/session/{session}/events HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Authorization: Bearer {token}\r\n\r\n"
    )
    await stream.send_all(request.encode())
    return stream


async def _flood(daemon_info: object, sessions: list[str], runs: int) -> None:
    async with client(daemon_info) as http:  # type: ignore[arg-type]
        for n in range(runs):
            text = f"{n} " + "x" * _BIG
            response = await http.post(
                "/v1/send", json={"input": text, "session_id": sessions[n % len(sessions)]}
            )
            assert response.status_code in (200, 202), response.text


async def test_shutdown_with_clients_that_stopped_reading(tmp_path: Path) -> None:
    ws_count, sse_count = size(20, 100), size(5, 20)
    process = DaemonProcess(tmp_path / "home")
    info = process.info
    stopped = False
    try:
        async with trio.open_nursery() as nursery:
            sockets = [
                await _stalled_ws(info.ws_url, info.token, "cli-flood", nursery)
                for _ in range(ws_count)
            ]
            streams = [
                await _stalled_sse(int(info.base_url.rsplit(":", 1)[1]), info.token, "cli-flood")
                for _ in range(sse_count)
            ]
            await _flood(info, ["cli-flood"], 12)
            await trio.sleep(1)
            started = time.monotonic()
            code = await trio.to_thread.run_sync(process.stop)
            elapsed = time.monotonic() - started
            stopped = True
            print(
                f"shutdown: {ws_count} WS + {sse_count} SSE stalled, exit {code} in {elapsed:.2f} s"
            )
            assert code == 0
            assert elapsed <= 5.0
            for stream in streams:
                await stream.aclose()
            await _close_all(sockets)
            nursery.cancel_scope.cancel()
    finally:
        if not stopped:
            process.stop()


async def test_memory_bounded_by_bytes(tmp_path: Path) -> None:
    runs = size(60, 1000)
    process = DaemonProcess(tmp_path / "home")
    info = process.info
    sessions = [f"cli-mem{n}" for n in range(10)]
    try:
        async with trio.open_nursery() as nursery:
            await trio.sleep(0.5)
            idle = _rss_mib(process.pid)
            sockets = [
                await _stalled_ws(info.ws_url, info.token, session, nursery)
                for session in sessions[:2]
            ]
            await _flood(info, sessions, runs)
            await trio.sleep(1)
            peak = _rss_mib(process.pid)
            print(
                f"memory: {runs} runs of {_BIG} B over 10 sessions, 2 stalled subscribers: "
                f"RSS {idle:.0f} -> {peak:.0f} MiB"
            )
            # The bound was idle + 128 MiB until a session became a conversation (each
            # task also holds the session's stored exchanges, here 900 KiB inputs): the
            # CI figure is now ~130 MiB above idle; docs/reliability.md has the figures.
            assert peak < idle + 192
            await _close_all(sockets)
            nursery.cancel_scope.cancel()
    finally:
        assert process.stop() == 0


async def test_a_slow_subscriber_is_dropped_with_4008_and_sse_says_why(tmp_path: Path) -> None:
    """R81: a WebSocket subscriber whose queue passes ``subscriber_queue_bytes`` is
    closed with 4008 (resubscribe to replay); an SSE stream ends with ``: dropped``."""
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    (home / "config.toml").write_text("[server]\nsubscriber_queue_bytes = 65536\n")
    process = DaemonProcess(home)
    info = process.info
    try:
        async with trio.open_nursery() as nursery:
            ws = await _stalled_ws(info.ws_url, info.token, "cli-slow", nursery)
            sse = await _stalled_sse(int(info.base_url.rsplit(":", 1)[1]), info.token, "cli-slow")
            await _flood(info, ["cli-slow"], 12)
            closed: trio_websocket.ConnectionClosed | None = None
            with trio.fail_after(30):
                while closed is None:
                    try:
                        await ws.get_message()
                    except trio_websocket.ConnectionClosed as exc:
                        closed = exc
            assert closed.reason is not None
            assert closed.reason.code == 4008
            assert "resubscribe" in (closed.reason.reason or "")
            received = b""
            with trio.fail_after(30):
                while chunk := await sse.receive_some(1 << 20):
                    received += chunk
                    if b": dropped" in received:
                        break
            assert b": dropped" in received
            await sse.aclose()
            await _close_all([ws])
            nursery.cancel_scope.cancel()
    finally:
        assert process.stop() == 0


async def test_a_leg_log_stays_capped_while_cat_dev_zero_runs(tmp_path: Path) -> None:
    """R81, R23: ``bg: cat /dev/zero`` (read-only: it runs unasked in the sandbox, ended
    by ``readonly_timeout_s``) never grows its leg log past ``max_log_bytes``, and the
    log is removed when the leg ends (CI: 3 s; soak: 10 s)."""
    cap, seconds = 1024 * 1024, size(3, 10)
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    (home / "config.toml").write_text(
        f"[background]\nmax_log_bytes = {cap}\n[tools]\nreadonly_timeout_s = {seconds}\n"
    )
    process = DaemonProcess(home)
    info = process.info
    try:
        async with client(info) as http:
            sent = await http.post(
                "/v1/send", json={"input": "bg: cat /dev/zero", "session_id": "cli-zero"}
            )
            assert sent.status_code == 202, sent.text
        folder = home / "sessions" / "cli-zero" / "background"
        largest, seen, elided = 0, False, False
        with trio.fail_after(seconds + 30):
            while True:
                logs = list(folder.glob("cmd_*.log")) if folder.is_dir() else []
                for log in logs:
                    try:
                        data = log.read_bytes()
                    except FileNotFoundError:
                        continue
                    seen, largest = True, max(largest, len(data))
                    elided = elided or b"bytes of output elided here]" in data
                if seen and not logs:
                    break
                await trio.sleep(0.05)
        print(f"leg log: cat /dev/zero for {seconds} s, largest log {largest} B, cap {cap} B")
        assert 0 < largest <= cap
        assert elided  # the cap engaged: head, marker, rolling tail
    finally:
        assert process.stop() == 0
