"""Reliability tests: sizes, seeds and the shared daemon helpers.

Every test here runs twice over: a short version in ``make test`` (CI) and the big one
in ``make soak`` (``AGENTRIO_SOAK=1``). `size` picks between the two; ``AGENTRIO_SEED``
replaces the fixed default seed (each test prints the seed it used, so a failing run
can be replayed exactly).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest

from tests.e2e.conftest import Daemon, DaemonProcess

__all__ = ["SOAK", "client", "daemon", "proc_running", "seed", "size", "tagged_daemon"]

#: ``make soak`` sets ``AGENTRIO_SOAK=1``: the big sizes.
SOAK = os.environ.get("AGENTRIO_SOAK", "") == "1"
_DEFAULT_SEED = 20261130


def size(ci: int, soak: int) -> int:
    """The CI size, or the soak size under ``AGENTRIO_SOAK=1``."""
    return soak if SOAK else ci


def seed(name: str) -> int:
    """The seed of test ``name``: ``AGENTRIO_SEED`` or the fixed default; printed."""
    value = int(os.environ.get("AGENTRIO_SEED", str(_DEFAULT_SEED)))
    print(f"{name}: seed {value} (replay with AGENTRIO_SEED={value})")
    return value


def client(daemon: Daemon, token: str | None = None) -> httpx.AsyncClient:
    """An HTTP client of ``daemon`` sending ``token`` (the daemon's by default)."""
    return httpx.AsyncClient(
        base_url=daemon.base_url,
        headers={"Authorization": f"Bearer {token if token is not None else daemon.token}"},
        timeout=30,
    )


def proc_running(pid: int) -> bool:
    """True while ``pid`` runs; a zombie (nobody reaps orphans here) counts as gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return raw[raw.rfind(b")") + 2 :].split()[0] not in (b"Z", b"X")


@asynccontextmanager
async def tagged_daemon(home: Path, env: dict[str, str] | None = None) -> AsyncIterator[Daemon]:
    """A daemon subprocess on ``home`` that must stop with exit 0 (R53)."""
    process = DaemonProcess(home, env)
    try:
        yield process.info
    finally:
        assert process.stop() == 0


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[Daemon]:
    """A running daemon on a temporary home; stopping it must exit 0 (R53)."""
    process = DaemonProcess(tmp_path / "home")
    try:
        yield process.info
    finally:
        assert process.stop() == 0
