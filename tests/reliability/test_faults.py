"""Honest under faults (issue 18): a full disk, a deleted lock file, start-up errors.

Through real daemon processes. The disk-full test runs on a small tmpfs home mounted
here, so it needs root (CI runs as root) and skips with the reason otherwise.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import trio

from agentrio import StartFailed, connect
from agentrio.testing import DaemonProcess
from tests.reliability.conftest import size

#: The tmpfs home of the disk-full test: room for the store, little more.
HOME_BYTES = 8 * 1024 * 1024


def _mount_tmpfs(path: Path, options: str) -> None:
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs home needs root (CI runs as root)")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")


@pytest.fixture
def small_home(tmp_path: Path) -> Iterator[Path]:
    home = tmp_path / "home"
    _mount_tmpfs(home, f"size={HOME_BYTES},mode=0700")
    try:
        yield home
    finally:
        subprocess.run(["umount", "-l", str(home)], check=False)


def _fill(path: Path) -> int:
    """Write zeros to ``path`` until the disk is full; the bytes written."""
    written = 0
    chunk = b"\0" * 65536
    with path.open("wb", buffering=0) as f:
        while True:
            try:
                written += f.write(chunk) or 0
            except OSError as exc:
                assert exc.errno == errno.ENOSPC, exc
                break
    for small in (4096, 512, 1):  # the last pages too
        with path.open("ab", buffering=0) as f:
            while True:
                try:
                    written += f.write(b"\0" * small) or 0
                except OSError:
                    break
    return written


async def _run_task(url: str, token: str, session: str) -> tuple[str, str | None, str]:
    """One ``run: echo hi``: (outcome, task hash, error). Outcome is the ``done``
    status, or ``refused`` when it never was accepted."""
    async with connect(url, token) as client:
        try:
            handle = await client.run(session, "run: echo hi", allow_all=True)
        except StartFailed as exc:
            return "refused", None, str(exc)
        done = await handle.wait_done()
        return done.status, handle.task_hash, done.error


async def test_disk_full_never_lies(small_home: Path) -> None:
    rounds = size(12, 120)
    process = DaemonProcess(small_home)
    daemon = process.info
    reported: dict[str, str] = {}  # task hash -> status the client was told
    accepted: set[str] = set()
    codes: dict[int, int] = {}
    bodies: set[str] = set()
    try:
        headers = {"Authorization": f"Bearer {daemon.token}"}
        async with httpx.AsyncClient(base_url=daemon.base_url, headers=headers) as http:
            status, task, _ = await _run_task(daemon.ws_url, daemon.token, "cli-before")
            assert status == "finished"
            assert task is not None
            reported[task] = status
            # A task accepted before the disk fills and ending after: its end cannot be
            # written, so it must be reported failed (with the store's error).
            async with connect(daemon.ws_url, daemon.token) as slow_client:
                slow = await slow_client.run("cli-slow", "run: sleep 1", allow_all=True)
                accepted.add(slow.task_hash)
                filled = await trio.to_thread.run_sync(_fill, small_home / "fill")
                slow_done = await slow.wait_done()
                reported[slow.task_hash] = slow_done.status
                if slow_done.status != "finished":
                    assert slow_done.status == "failed"
                    assert "store" in slow_done.error
                print(
                    f"disk full: the task ending while full: {slow_done.status} {slow_done.error!r}"
                )
            for i in range(rounds):
                status, task, _error = await _run_task(daemon.ws_url, daemon.token, f"cli-f{i}")
                if task is not None:
                    accepted.add(task)
                    reported[task] = status
                response = await http.post(
                    "/v1/send", json={"input": "run: echo hi", "session_id": f"cli-h{i}"}
                )
                codes[response.status_code] = codes.get(response.status_code, 0) + 1
                if response.status_code == 503:
                    bodies.add(response.json()["error"]["code"])
                elif response.is_success:
                    accepted.add(response.json()["task_hash"])
            (small_home / "fill").unlink()
            recovered_after = 0.0
            started = time.monotonic()
            while True:  # recovery needs nothing but space
                status, task, _ = await _run_task(daemon.ws_url, daemon.token, "cli-after")
                if status == "finished":
                    assert task is not None
                    reported[task] = status
                    break
                assert time.monotonic() - started < 10, "no recovery once space returned"
                await trio.sleep(0.2)
            recovered_after = time.monotonic() - started
    finally:
        (small_home / "fill").unlink(missing_ok=True)
        assert process.stop() == 0
    with sqlite3.connect(small_home / "agentrio.db") as db:
        history = dict(db.execute("SELECT task_hash, status FROM history").fetchall())
        kept = {row[0] for row in db.execute("SELECT task_hash FROM tasks")}
    lies = [t for t, s in reported.items() if s == "finished" and history.get(t) != "finished"]
    unaccepted = kept - accepted - set(reported)
    print(
        f"disk full: filled {filled} bytes; {rounds} ws runs + {rounds} HTTP sends while "
        f"full; HTTP status counts {codes}; outcomes "
        f"{sorted((s, list(reported.values()).count(s)) for s in set(reported.values()))}; "
        f"recovered {recovered_after:.2f} s after space returned; {len(lies)} finished "
        f"not in store, {len(unaccepted)} kept tasks never accepted"
    )
    assert codes.get(503, 0) > 0, codes
    assert 500 not in codes, codes
    assert bodies == {"unavailable"}
    assert lies == []
    assert unaccepted == set()


def test_deleting_the_lock_file_admits_no_second_daemon(tmp_path: Path) -> None:
    home = tmp_path / "home"
    first = DaemonProcess(home)
    try:
        marker = home / "sessions" / "cli-x" / "background"
        marker.mkdir(parents=True)
        (home / "daemon.lock").unlink()
        second = subprocess.run(
            [sys.executable, "-m", "agentrio.engine", "daemon", "--port", "0", "--home", str(home)],
            capture_output=True,
            timeout=30,
        )
        assert second.returncode == 1, second.stderr
        assert f"already running for {home} (pid {first.pid}" in second.stderr.decode()
        assert first.process.poll() is None
        assert marker.is_dir()  # the second daemon touched nothing
        info = (home / "daemon.json").read_text(encoding="utf-8")
        assert f'"pid": {first.pid}' in info
    finally:
        assert first.stop() == 0


def _start(home: Path, *prefix: str, port: int = 0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            *prefix,
            sys.executable,
            "-m",
            "engine",
            "daemon",
            "--port",
            str(port),
            "--home",
            str(home),
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )


def _one_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def test_port_in_use(tmp_path: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        home = tmp_path / "home"
        assert _one_line(_start(home, port=port)) == (
            f"agentrio daemon: port {port} on 127.0.0.1 is already in use: stop what uses "
            f"it, or choose another port with --port N (or [server] port in "
            f"{home / 'config.toml'})"
        )


def test_corrupt_database(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    db = home / "agentrio.db"
    db.write_bytes(b"this is not a database, " * 100)
    db.chmod(0o600)
    assert _one_line(_start(home)) == (
        f"agentrio daemon: {db} is not a readable agentrio database (corrupt?): move it "
        f"aside (mv {db} {db}.broken) and start again, or restore a backup"
    )


def test_read_only_home(tmp_path: Path) -> None:
    home = tmp_path / "home"
    _mount_tmpfs(home, "size=1m,mode=0700,ro")
    try:
        assert _one_line(_start(home)) == (
            f"agentrio daemon: home {home} is on a read-only file system: choose another "
            "home with --home DIR or AGENTRIO_HOME"
        )
    finally:
        subprocess.run(["umount", "-l", str(home)], check=False)


def test_full_disk_at_start(tmp_path: Path) -> None:
    home = tmp_path / "home"
    _mount_tmpfs(home, "size=1m,mode=0700")
    try:
        _fill(home / "fill")
        assert _one_line(_start(home)) == (
            f"agentrio daemon: no space left on the disk holding {home}: free some space "
            "and start again, or choose another home with --home DIR or AGENTRIO_HOME"
        )
    finally:
        subprocess.run(["umount", "-l", str(home)], check=False)


def test_unwritable_home(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        # Root writes anywhere; without CAP_DAC_OVERRIDE it meets the mode like anyone.
        prefix: tuple[str, ...] = (
            "setpriv",
            "--inh-caps=-all",
            "--bounding-set=-dac_override,-dac_read_search",
        )
    else:
        prefix = ()
    home = tmp_path / "home"
    home.mkdir(mode=0o500)
    try:
        assert _one_line(_start(home, *prefix)) == (
            f"agentrio daemon: home {home} is not writable by this user "
            f"({home / 'daemon.lock'}: permission denied): fix its owner or mode "
            "(chown/chmod), or choose another home with --home DIR or AGENTRIO_HOME"
        )
    finally:
        home.chmod(0o700)
