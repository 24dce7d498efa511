"""End-to-end fixtures: the real daemon as a subprocess, from agentrio's own pytest
plugin (`agentrio.testing`, the fixtures users get).

``daemon`` is the plugin's ``agentrio_daemon`` (a temporary ``AGENTRIO_HOME``,
``--port 0``, address from ``daemon.json``, token from ``<home>/token``; teardown sends
SIGTERM and checks the exit code is 0 and daemon.json is gone, R53) in the tuple shape
these tests were written against. ``DaemonProcess`` starts more daemons on one home.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import pytest

from agentrio.testing import START_DEADLINE_S, STOP_DEADLINE_S, DaemonProcess, RunningDaemon

__all__ = [
    "ROOT",
    "START_DEADLINE_S",
    "STOP_DEADLINE_S",
    "Daemon",
    "DaemonProcess",
]

ROOT = Path(__file__).resolve().parents[2]


class Daemon(NamedTuple):
    base_url: str
    ws_url: str
    token: str
    home: Path


@pytest.fixture
def daemon_home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def agentrio_daemon_home(daemon_home: Path) -> Path:
    """The plugin's daemon runs on ``daemon_home``, which tests also read."""
    return daemon_home


@pytest.fixture
def daemon(agentrio_daemon: RunningDaemon) -> Daemon:
    """A running daemon: ``(base_url, ws_url, token, home)``. Stopping it must exit 0
    within 5 s and remove daemon.json (R53, §7) — checked by the plugin's teardown."""
    d = agentrio_daemon
    return Daemon(d.base_url, d.ws_url, d.token, d.home)
