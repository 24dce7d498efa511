"""``agentrio status``, ``agentrio stop``, ``agentrio start`` against real daemons, the
REPL's connecting code after a deliberate stop, and two REPLs racing to restart a
daemon (SPEC §7, §11, R53, issue 19).

The commands run as ``python -m agentrio.repl …`` subprocesses; the REPL's connecting code
(`agentrio.repl.client.run_client`) runs in the test with its real defaults. Waits poll with
deadlines that bound a failure and time nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

import agentrio.repl.client as repl_client_module
from agentrio.protocol.codec import decode
from agentrio.protocol.http import ShutdownAccepted
from agentrio.repl.client import run_client, stopped_text
from agentrio.repl.daemon import StopNote, ensure_daemon, process_state, read_stopped, spawn_daemon
from agentrio.repl.messages import Connected, Incoming, Outgoing, Status
from agentrio.transport import open_http
from tests.e2e.conftest import ROOT, Daemon, DaemonProcess
from tests.e2e.test_daemon_restart import pending, start_running
from tests.e2e.test_repl_tmux import Tmux, wait_armed, wait_for

pytestmark = pytest.mark.skipif(not Path("/proc/locks").exists(), reason="needs /proc/locks")

#: Bounds every wait of these tests.
DEADLINE_S = 20.0


async def agentrio(home: Path, *argv: str) -> subprocess.CompletedProcess[bytes]:
    """``agentrio ARGV --home HOME`` as a subprocess (``python -m agentrio.repl``)."""
    return await trio.run_process(
        [sys.executable, "-m", "agentrio.repl", *argv, "--home", str(home)],
        cwd=ROOT,
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )


def out(done: subprocess.CompletedProcess[bytes]) -> str:
    return done.stdout.decode() + done.stderr.decode()


def free_port_home(home: Path) -> Path:
    """A home whose daemons pick a free port (the REPL starts them without --port)."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text("[server]\nport = 0\n")
    return home


async def wait_until(condition: Any, what: str) -> None:
    end = trio.current_time() + DEADLINE_S
    while not condition():
        if trio.current_time() > end:
            raise AssertionError(f"timed out waiting for {what}")
        await trio.sleep(0.05)


def ended(pid: int) -> bool:
    """Gone from /proc: exited and reaped (a zombie is not ended)."""
    return process_state(pid) is None


# ---------------------------------------------------------------------- status


async def test_status_when_no_daemon_runs(tmp_path: Path) -> None:
    """§11: ``agentrio status`` on a home without a daemon says so in one line and
    exits 3; ``--json`` says the same for scripts."""
    home = tmp_path / "home"
    done = await agentrio(home, "status")
    assert done.returncode == 3
    assert out(done) == f"no agentrio daemon runs for {home}\n"
    done = await agentrio(home, "status", "--json")
    assert done.returncode == 3
    data = json.loads(done.stdout)
    assert (data["state"], data["running"], data["pid"]) == ("not running", False, None)


@pytest.fixture
def bystander() -> Iterator[subprocess.Popen[bytes]]:
    """A live process that is no daemon."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield process
    process.kill()
    process.wait()


async def test_status_of_a_stale_daemon_json(
    tmp_path: Path, bystander: subprocess.Popen[bytes]
) -> None:
    """§11: a daemon.json left by a daemon that is gone is called stale; ``stop`` then
    has nothing to stop and never signals the pid it names (here a live process that
    is not a daemon: only the holder of the home's lock is ever signalled)."""
    home = free_port_home(tmp_path / "home")
    info = {"pid": bystander.pid, "host": "127.0.0.1", "port": 9, "started_at": 0.0}
    (home / "daemon.json").write_text(json.dumps(info))
    done = await agentrio(home, "status")
    assert done.returncode == 3
    assert "daemon.json is stale" in out(done)
    assert f"pid {bystander.pid}" in out(done)
    done = await agentrio(home, "stop", "--force")
    assert done.returncode == 0
    assert "nothing to stop" in out(done)
    assert bystander.poll() is None


async def test_status_of_a_running_daemon(daemon: Daemon) -> None:
    """§7, §11: a running daemon's address, pid, version, uptime, sandbox, tasks,
    pending tasks and clients; exit 0."""
    info = json.loads((daemon.home / "daemon.json").read_text())
    done = await agentrio(daemon.home, "status")
    assert done.returncode == 0, out(done)
    text = out(done)
    assert text.startswith(f"agentrio daemon running for {daemon.home}\n")
    for line in (
        f"  address   {daemon.base_url}",
        f"  pid       {info['pid']}",
        f"  version   {info['version']}",
        "  tasks     0 running, 0 queued; 0 background legs",
        "  pending   0 resumable",
    ):
        assert line in text.splitlines()
    assert "  sandbox   " in text
    assert "  uptime    " in text
    done = await agentrio(daemon.home, "status", "--json")
    data = json.loads(done.stdout)
    assert data["state"] == "running"
    assert (data["pid"], data["address"]) == (info["pid"], daemon.base_url)
    assert data["pending"] == {"total": 0, "cli-": 0, "chat-": 0, "tg-": 0, "dc-": 0}
    assert set(data["sandbox"]) == {"active", "detail"}


# ---------------------------------------------------------------------- stop


async def test_stop_keeps_a_running_task_resumable(daemon_home: Path) -> None:
    """R53: ``agentrio stop`` stops the daemon gracefully: it exits 0, its running task
    ends with cause shutdown and is resumable after a restart; the command says so,
    and leaves the stop note, which the next daemon removes."""
    first = DaemonProcess(daemon_home)
    try:
        with trio.fail_after(DEADLINE_S):
            task_hash = await start_running(first.info, "chat-stop")
        done = await agentrio(daemon_home, "stop")
        assert done.returncode == 0, out(done)
        assert out(done) == (
            f"stopped the agentrio daemon (pid {first.pid}) of {daemon_home}; "
            "1 running task kept in /pending\n"
        )
        assert first.process.poll() == 0  # exited by the time `stop` returned
    finally:
        first.close()
    assert not (daemon_home / "daemon.json").exists()
    note = read_stopped(daemon_home)
    assert note is not None
    assert (note.pid, note.reason) == (first.pid, "agentrio stop")
    assert (await agentrio(daemon_home, "status")).returncode == 3
    second = DaemonProcess(daemon_home)
    try:
        assert await pending(second.info, "chat-stop") == [task_hash]
        assert read_stopped(daemon_home) is None
    finally:
        assert second.stop() == 0


async def test_stop_without_a_daemon(tmp_path: Path) -> None:
    """§11: stopping a home without a daemon is not an error."""
    done = await agentrio(tmp_path / "home", "stop")
    assert done.returncode == 0
    assert out(done) == f"no agentrio daemon runs for {tmp_path / 'home'}; nothing to stop\n"


async def test_shutdown_route_needs_the_token_and_answers_202(daemon_home: Path) -> None:
    """R70, R53: ``POST /v1/shutdown`` without the token is 401 and stops nothing; with
    it, 202 ``ShutdownAccepted`` naming the daemon's pid, and the daemon exits 0."""
    first = DaemonProcess(daemon_home)
    try:
        async with httpx.AsyncClient(base_url=first.info.base_url) as http:
            refused = await http.post("/v1/shutdown", json={"reason": "x"})
            assert refused.status_code == 401
            assert first.process.poll() is None
            accepted = await http.post(
                "/v1/shutdown",
                json={"reason": "maintenance"},
                headers={"Authorization": f"Bearer {first.info.token}"},
            )
        assert accepted.status_code == 202
        assert decode(accepted.content, ShutdownAccepted) == ShutdownAccepted(
            pid=first.pid, tasks=0, legs=0
        )
        assert await trio.to_thread.run_sync(first.process.wait, DEADLINE_S) == 0
    finally:
        first.close()
    note = read_stopped(daemon_home)
    assert note is not None
    assert note.reason == "maintenance"


@pytest.fixture
def stuck(tmp_path: Path) -> Iterator[tuple[Path, subprocess.Popen[bytes]]]:
    """A home whose lock a process holds without serving (a stuck daemon), and that
    process; daemon.json names it at a port nobody listens on."""
    home = free_port_home(tmp_path / "home")
    script = (
        "import fcntl, os, sys, time\n"
        "fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)\n"
        "fcntl.flock(fd, fcntl.LOCK_EX)\n"
        "print('locked', flush=True)\n"
        "time.sleep(60)\n"
    )
    holder = subprocess.Popen([sys.executable, "-c", script, str(home)], stdout=subprocess.PIPE)
    assert holder.stdout is not None
    try:
        assert holder.stdout.readline() == b"locked\n"
        info = {"pid": holder.pid, "host": "127.0.0.1", "port": 9, "started_at": 0.0}
        (home / "daemon.json").write_text(json.dumps(info))
        yield home, holder
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()


async def test_stop_force_kills_a_daemon_that_does_not_answer(
    stuck: tuple[Path, subprocess.Popen[bytes]],
) -> None:
    """§11: a process that holds the home's lock but does not answer (a stuck daemon)
    is reported (exit 1); ``--force`` kills it after verifying it holds the lock."""
    home, holder = stuck
    done = await agentrio(home, "status")
    assert done.returncode == 1
    assert f"(pid {holder.pid}) does not answer" in out(done)
    done = await agentrio(home, "stop")
    assert done.returncode == 1
    assert "--force" in out(done)
    assert holder.poll() is None
    done = await agentrio(home, "stop", "--force")
    assert done.returncode == 0, out(done)
    assert f"killed the agentrio daemon (pid {holder.pid})" in out(done)
    assert await trio.to_thread.run_sync(holder.wait, DEADLINE_S) == -signal.SIGKILL
    assert not (home / "daemon.json").exists()
    assert read_stopped(home) is not None


# ---------------------------------------------------------------------- the REPL


async def test_the_repl_does_not_restart_a_daemon_stopped_on_purpose(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """§11, R53: the REPL's connecting code starts a daemon for its first connection;
    after ``agentrio stop`` it says the daemon was stopped and starts none, however
    long past the restart grace; ``agentrio start`` brings one back and it reconnects."""
    monkeypatch.setattr(repl_client_module, "RESTART_GRACE_S", 0.5)
    home = free_port_home(tmp_path / "home")
    monkeypatch.setenv("AGENTRIO_HOME", str(home))  # as the REPL sets it
    got: list[Incoming] = []
    _, outgoing = trio.open_memory_channel[Outgoing](10)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(lambda: run_client(home=home, outgoing=outgoing, deliver=got.append))
            await wait_until(lambda: any(isinstance(m, Connected) for m in got), "connected")
            first = json.loads((home / "daemon.json").read_text())["pid"]
            done = await agentrio(home, "stop")
            assert done.returncode == 0, out(done)
            note = StopNote(pid=first, at=0.0, reason="agentrio stop")
            stopped = Status(text=stopped_text(note), error=True)
            await wait_until(lambda: stopped in got, "the REPL to say the daemon was stopped")
            await trio.sleep(3.0)  # six restart graces: a restart would have happened
            assert not (home / "daemon.json").exists()
            assert (await agentrio(home, "status")).returncode == 3
            assert await trio.to_thread.run_sync(ended, first)  # reaped: no zombie
            assert not any(isinstance(m, Connected) and m.reconnect for m in got)
            done = await agentrio(home, "start")
            assert done.returncode == 0, out(done)
            await wait_until(
                lambda: any(isinstance(m, Connected) and m.reconnect for m in got),
                "the REPL to reconnect",
            )
            nursery.cancel_scope.cancel()
    finally:
        await agentrio(home, "stop", "--force")


# ---------------------------------------------------------------------- restart race


async def test_two_racing_restarts_leave_one_daemon_and_no_zombie(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """§11, issue 19: two REPLs start a daemon at the same moment; both end up on the
    one that won the home's lock, and the loser's child is reaped (no zombie); the
    winner is reaped too once ``agentrio stop`` ended it."""
    home = free_port_home(tmp_path / "home")
    monkeypatch.setenv("AGENTRIO_HOME", str(home))  # as the REPL sets it
    spawned: list[int] = []

    def spawn(home: Path) -> int:
        pid = spawn_daemon(home)
        spawned.append(pid)
        return pid

    endpoints: list[Any] = []
    try:
        async with open_http() as http:

            async def restart() -> None:
                endpoints.append(
                    await ensure_daemon(home, http, status=lambda s: None, spawn=spawn)
                )

            async with trio.open_nursery() as nursery:
                nursery.start_soon(restart)
                nursery.start_soon(restart)
        assert len(spawned) == 2
        assert endpoints[0] == endpoints[1]
        winner = json.loads((home / "daemon.json").read_text())["pid"]
        [loser] = [pid for pid in spawned if pid != winner]
        await wait_until(lambda: ended(loser), "the losing child to be reaped")
        assert process_state(winner) not in (None, "Z")
        done = await agentrio(home, "stop")
        assert done.returncode == 0, out(done)
        await wait_until(lambda: ended(winner), "the stopped daemon to be reaped")
    finally:
        for pid in spawned:
            if process_state(pid) not in (None, "Z"):
                os.kill(pid, signal.SIGKILL)
        with trio.move_on_after(DEADLINE_S):  # the reaper threads wait for them
            while any(process_state(pid) == "Z" for pid in spawned):
                await trio.sleep(0.05)


# ---------------------------------------------------------------------- in a terminal


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_the_repl_in_tmux_says_the_daemon_was_stopped_and_does_not_restart_it(
    tmp_path: Path,
) -> None:
    """§11, R53: a REPL that started its daemon sees ``agentrio stop``: it says its
    running task was kept and that the daemon was stopped, starts no daemon for longer
    than the restart grace, and reconnects after ``agentrio start``."""
    home = free_port_home(tmp_path / "home")
    tmux = Tmux()

    def screen() -> str:
        return tmux("capture-pane", "-p", "-J", "-S", "-200", "-t", "repl")

    def cli(*argv: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            [sys.executable, "-m", "agentrio.repl", *argv, "--home", str(home)],
            cwd=ROOT,
            capture_output=True,
            timeout=60,
            check=False,
        )

    command = (
        f"cd {ROOT} && AGENTRIO_HOME={home} {sys.executable} -m agentrio.repl; "
        "echo REPL-EXITED $?; sleep 60"
    )
    tmux("new-session", "-d", "-s", "repl", "-x", "120", "-y", "40", command)
    try:
        wait_for(lambda: "connected to agentrio daemon" in screen(), "REPL connected")
        tmux("send-keys", "-t", "repl", "run: sleep 30", "Enter")
        wait_for(lambda: "Confirm tool call" in screen(), "the confirmation dialog")
        wait_armed(tmux)
        tmux("send-keys", "-t", "repl", "Enter")
        wait_for(lambda: "→ Approve (run_command)" in screen(), "the approval")
        done = cli("stop")
        assert done.returncode == 0, done.stderr
        assert b"1 running task kept in /pending" in done.stdout
        wait_for(
            lambda: "stopped (daemon shut down) — kept: resume it with /pending" in screen(),
            "the task's end line",
        )
        wait_for(
            lambda: (
                "the daemon was stopped (agentrio stop); this REPL does not restart it" in screen()
            ),
            "the REPL to say the daemon was stopped",
        )
        time.sleep(repl_client_module.RESTART_GRACE_S + 2)  # past the grace: a restart would show
        assert screen().count("started one (pid") == 1  # the first connection's only
        assert cli("status").returncode == 3
        assert cli("start").returncode == 0
        wait_for(lambda: "reconnected to the daemon" in screen(), "the REPL to reconnect")
        tmux("send-keys", "-t", "repl", "/quit", "Enter")
        wait_for(lambda: "REPL-EXITED 0" in screen(), "the REPL to exit")
    finally:
        tmux("kill-server")
        cli("stop", "--force")
