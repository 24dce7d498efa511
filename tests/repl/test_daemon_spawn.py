"""Starting a daemon from the REPL leaves no zombie behind (SPEC §11, issue 19).

When the daemon died and two REPLs restarted it at once, the REPL whose daemon lost the
race used the winner and never waited for its own child, which stayed a zombie until
the REPL exited. These tests spawn real child processes (not daemons: a daemon's race
is end to end, tests/e2e/test_daemon_control.py) and read ``/proc``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import httpx
import pytest

from agentrio.repl.daemon import ensure_daemon, process_state, spawn_daemon
from agentrio.transport import HttpApi, open_http

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")

#: How long a test waits for a child to be reaped (bounds a failure, times nothing).
REAP_DEADLINE_S = 15.0


def healthy() -> AbstractAsyncContextManager[HttpApi]:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"ok": True})

    return open_http(transport=httpx.MockTransport(handler))


def wait_reaped(pid: int) -> str:
    """Poll until ``pid`` is gone from ``/proc`` (reaped); return its last state."""
    state = process_state(pid)
    end = time.monotonic() + REAP_DEADLINE_S
    while state is not None and time.monotonic() < end:
        time.sleep(0.05)
        state = process_state(pid)
    return state or "reaped"


def winner_elsewhere(home: Path) -> None:
    """``daemon.json`` of a daemon another REPL started (not our child)."""
    info = {"pid": os.getppid(), "host": "127.0.0.1", "port": 4242, "started_at": 0.0}
    (home / "daemon.json").write_text(json.dumps(info))
    (home / "token").write_text("theirs")


@pytest.mark.parametrize("child", ["exits soon", "keeps running"])
async def test_a_start_that_lost_the_race_reaps_its_child(tmp_path: Path, child: str) -> None:
    """§11, issue 19: another REPL's daemon answered while ours was starting; ours is
    waited for (no zombie) and, if it still runs after the grace, ended too."""
    script = f"import time; time.sleep({0.3 if child == 'exits soon' else 600})"
    spawned: list[int] = []

    def spawn(home: Path) -> int:
        pid = spawn_daemon(home, [sys.executable, "-c", script])
        spawned.append(pid)
        winner_elsewhere(home)
        return pid

    async with healthy() as http:
        endpoint = await ensure_daemon(
            tmp_path, http, status=lambda s: None, spawn=spawn, lost_grace_s=1.0
        )
    assert endpoint.token == "theirs"
    [pid] = spawned
    assert wait_reaped(pid) == "reaped"


async def test_the_daemon_we_started_is_reaped_when_it_ends(tmp_path: Path) -> None:
    """§11: the daemon a REPL started is its child: once it exits (``agentrio stop``)
    while the REPL still runs, the REPL reaps it rather than keeping a zombie."""
    spawned: list[int] = []

    def spawn(home: Path) -> int:
        pid = spawn_daemon(home, [sys.executable, "-c", "import time; time.sleep(0.5)"])
        spawned.append(pid)
        info = {"pid": pid, "host": "127.0.0.1", "port": 4242, "started_at": 0.0}
        (home / "daemon.json").write_text(json.dumps(info))
        return pid

    async with healthy() as http:
        await ensure_daemon(tmp_path, http, status=lambda s: None, spawn=spawn)
    [pid] = spawned
    assert wait_reaped(pid) == "reaped"
