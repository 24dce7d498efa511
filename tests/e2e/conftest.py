"""End-to-end fixtures: the real daemon as a subprocess (``python -m engine daemon``).

Each daemon gets a temporary ``AGENTRIO_HOME`` and ``--port 0``; its address is read
from ``daemon.json``, its token from ``<home>/token``. Teardown sends SIGTERM and
checks the exit code is 0 (R53). Waiting for the daemon to come up polls the file
with a deadline: a subprocess start cannot be awaited any other way.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, NamedTuple

import pytest

#: Seconds a daemon may take to write daemon.json.
START_DEADLINE_S = 15.0
#: R53: a stopped daemon exits within 5 s.
STOP_DEADLINE_S = 5.0
ROOT = Path(__file__).resolve().parents[2]


class Daemon(NamedTuple):
    base_url: str
    ws_url: str
    token: str
    home: Path


class DaemonProcess:
    """A daemon subprocess and how to reach it."""

    def __init__(self, home: Path, env: dict[str, str] | None = None) -> None:
        self.home = home
        environment = {**os.environ, "AGENTRIO_HOME": str(home), **(env or {})}
        home.mkdir(parents=True, exist_ok=True)
        self.log: BinaryIO | None = (home / "stdout.log").open("ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "engine", "daemon", "--port", "0", "--home", str(home)],
            cwd=ROOT,
            env=environment,
            stdin=subprocess.DEVNULL,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        self.info = self._wait_for_daemon_json()

    def _wait_for_daemon_json(self) -> Daemon:
        deadline = time.monotonic() + START_DEADLINE_S
        path = self.home / "daemon.json"
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"daemon exited with {self.process.returncode}")
            try:
                data = json.loads(path.read_text())
            except (OSError, ValueError):
                data = None
            if data is not None and data.get("pid") == self.process.pid:
                token = (self.home / "token").read_text().strip()
                host, port = data["host"], data["port"]
                return Daemon(
                    f"http://{host}:{port}", f"ws://{host}:{port}/v1/ws", token, self.home
                )
            time.sleep(0.05)
        raise AssertionError("daemon did not write daemon.json in time")

    def stop(self) -> int:
        """SIGTERM; the exit code (the daemon must be gone within 5 s)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=STOP_DEADLINE_S)
        finally:
            self.close()

    def kill(self) -> None:
        """``kill -9``: no cleanup of any kind runs."""
        self.process.kill()
        self.process.wait(timeout=STOP_DEADLINE_S)
        self.close()

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        if self.log is not None:
            self.log.close()
            self.log = None


@pytest.fixture
def daemon_home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def daemon(daemon_home: Path) -> Iterator[Daemon]:
    """A running daemon: ``(base_url, ws_url, token, home)``. Stopping it must exit 0
    within 5 s and remove daemon.json (R53, §7)."""
    process = DaemonProcess(daemon_home)
    try:
        yield process.info
    finally:
        code = process.stop()
    assert code == 0
    assert not (daemon_home / "daemon.json").exists()
