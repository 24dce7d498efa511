"""Lifecycle of the real daemon: kill -9 and restart, SIGTERM, one instance per home
(R51, R53, R72, §7)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import httpx
import trio

from agentrio.protocol.codec import decode
from agentrio.protocol.events import ToolCall
from agentrio.protocol.frames import EventFrame, Subscribe
from agentrio.protocol.http import PendingTasks, SendStarted
from agentrio.repl.daemon import read_stopped
from tests.e2e.conftest import ROOT, Daemon, DaemonProcess

#: Short marker times for the kill test (engine/markers.py reads them).
TTL_S = 3.0
REFRESH_S = 1.0
MARKERS = {"AGENTRIO_MARKER_TTL_S": str(TTL_S), "AGENTRIO_MARKER_REFRESH_S": str(REFRESH_S)}


def client(daemon: Daemon) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=daemon.base_url, headers={"Authorization": f"Bearer {daemon.token}"}
    )


async def pending(daemon: Daemon, session_id: str) -> list[str]:
    async with client(daemon) as http:
        response = await http.get(f"/v1/session/{session_id}/task")
    return [t.task_hash for t in decode(response.content, PendingTasks).tasks]


async def start_running(daemon: Daemon, session_id: str) -> str:
    """Start ``run: sleep 20`` over HTTP (allow-all); return once the command runs."""
    from agentrio.transport import open_frame_connection

    async with open_frame_connection(daemon.ws_url, daemon.token) as watcher:
        await watcher.send(Subscribe(session_id=session_id))
        async with client(daemon) as http:
            response = await http.post(
                "/v1/send",
                json={"input": "run: sleep 20", "session_id": session_id, "allow_all": True},
            )
        task_hash = decode(response.content, SendStarted).task_hash
        while True:
            frame = await watcher.receive()
            if isinstance(frame, EventFrame) and isinstance(frame.event, ToolCall):
                assert frame.task_hash == task_hash
                return task_hash


async def test_kill_9_then_restart_lists_the_task_once_its_marker_expires(
    daemon_home: Path,
) -> None:
    """R51, R72: after ``kill -9`` the running task is not resumable while its marker
    lives, and is listed as resumable once it expired (TTL shortened for the test)."""
    first = DaemonProcess(daemon_home, MARKERS)
    try:
        with trio.fail_after(15):
            task_hash = await start_running(first.info, "chat-kill")
    finally:
        first.kill()
    killed_at = time.monotonic()
    assert (daemon_home / "daemon.json").exists()  # nothing cleaned up
    assert read_stopped(daemon_home) is None  # a crash: an open REPL restarts it
    second = DaemonProcess(daemon_home, MARKERS)
    try:
        listed = await pending(second.info, "chat-kill")
        # The marker was refreshed at most REFRESH_S before the kill, so it is alive
        # until at least TTL_S - REFRESH_S after it.
        if time.monotonic() - killed_at < TTL_S - REFRESH_S:
            assert listed == []
        with trio.fail_after(TTL_S + 10):
            while listed != [task_hash]:
                await trio.sleep(0.1)
                listed = await pending(second.info, "chat-kill")
        assert listed == [task_hash]
    finally:
        assert second.stop() == 0


async def test_sigterm_keeps_running_tasks_resumable(daemon_home: Path) -> None:
    """R41, R53: SIGTERM cancels running tasks with cause shutdown, exits 0 within 5 s
    and removes daemon.json, leaving the note of a deliberate stop (an open REPL does
    not restart it); after a restart the task is resumable at once and the note gone."""
    first = DaemonProcess(daemon_home)
    try:
        with trio.fail_after(15):
            task_hash = await start_running(first.info, "chat-term")
        started = time.monotonic()
        assert first.stop() == 0
        assert time.monotonic() - started < 5.0
    finally:
        first.close()
    assert not (daemon_home / "daemon.json").exists()
    note = read_stopped(daemon_home)
    assert note is not None
    assert (note.pid, note.reason) == (first.pid, "SIGTERM")
    second = DaemonProcess(daemon_home)
    try:
        assert await pending(second.info, "chat-term") == [task_hash]
        assert read_stopped(daemon_home) is None
    finally:
        assert second.stop() == 0


def test_second_daemon_on_the_same_home_exits_1(daemon: Daemon) -> None:
    """§7: one daemon per home: a second start says who holds it and exits 1."""
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "agentrio.engine",
            "daemon",
            "--port",
            "0",
            "--home",
            str(daemon.home),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=20,
        check=False,
    )
    assert result.returncode == 1
    port = daemon.base_url.rsplit(":", 1)[1]
    assert "already running" in result.stderr
    assert f"http://127.0.0.1:{port}" in result.stderr


async def _parked_then_latest(daemon: Daemon, session_id: str) -> str:
    """A parked ``ask:`` task, then a finished one (now the session's latest)."""
    async with client(daemon) as http:
        sent = await http.post(
            "/v1/send", json={"input": "ask: Which? | a, b", "session_id": session_id}
        )
        parked = decode(sent.content, SendStarted).task_hash
        with trio.fail_after(15):
            while parked not in await pending(daemon, session_id):
                await trio.sleep(0.02)
        later = await http.post("/v1/send", json={"input": "hello", "session_id": session_id})
        latest = decode(later.content, SendStarted).task_hash
        with trio.fail_after(15):
            while True:
                history = (await http.get(f"/v1/session/{session_id}/task/history")).json()
                if any(task["task_hash"] == latest for task in history["tasks"]):
                    return parked
                await trio.sleep(0.02)


async def test_an_older_task_moves_to_a_new_hash_after_a_restart(daemon_home: Path) -> None:
    """R36 (issue 17 item 3): the session's latest task is kept in the store, so after
    a daemon restart a resume of an older task still moves to a new task hash."""
    first = DaemonProcess(daemon_home)
    try:
        parked = await _parked_then_latest(first.info, "chat-moved")
    finally:
        assert first.stop() == 0
    second = DaemonProcess(daemon_home)
    try:
        async with client(second.info) as http:
            response = await http.post(
                f"/v1/session/chat-moved/task/{parked}/resume", json={"answers": ["a"]}
            )
        assert response.status_code == 202
        moved = response.json()["task_hash"]
        assert moved != parked
    finally:
        assert second.stop() == 0
