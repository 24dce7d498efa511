"""The two small mechanisms the crash loop relies on, tested directly (R27, R48, R72).

- `agentrio.engine.processes.orphans`: a killed daemon's processes are found by their
  inherited tag and
  their whole groups ended — never an untagged process, never the caller's own group.
- `Store.add_history` (SQLite and Redis): the history row and the removal of the
  pending row are one transaction, so a task is never both ended and resumable.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentrio.engine.processes.orphans import OWNER_ENV, find_orphans, kill_orphans, owner_tag
from agentrio.engine.store.base import HistoryRow, TaskRow
from tests.engine.race_worker import open_any_store
from tests.reliability.conftest import proc_running

HASH = "a" * 32


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
        process.wait()


def _spawn(
    processes: list[subprocess.Popen[bytes]], command: str, env: dict[str, str]
) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        ["/bin/sh", "-c", command], env=env, start_new_session=True, stdout=subprocess.DEVNULL
    )
    processes.append(process)
    return process


def _members(pgid: int) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                raw = Path(f"/proc/{name}/stat").read_bytes()
            except OSError:
                continue
            if int(raw[raw.rfind(b")") + 2 :].split()[2]) == pgid:
                found.append(int(name))
    return found


def test_kill_orphans_ends_tagged_groups_only(
    tmp_path: Path, processes: list[subprocess.Popen[bytes]]
) -> None:
    """R27, R48: a tagged group (leader and a grandchild that wiped its environment) is
    found and ended; an untagged process and another home's tagged process are left
    alone; a second call finds nothing."""
    home, other = tmp_path / "home", tmp_path / "other"
    base = {"PATH": os.environ["PATH"]}
    tagged = _spawn(
        processes, "env -i /bin/sleep 60 & exec /bin/sleep 60", {**base, OWNER_ENV: owner_tag(home)}
    )
    untagged = _spawn(processes, "exec /bin/sleep 60", base)
    foreign = _spawn(processes, "exec /bin/sleep 60", {**base, OWNER_ENV: owner_tag(other)})
    while len([p for p in _members(tagged.pid) if proc_running(p)]) < 2:
        time.sleep(0.005)  # the shell forks the grandchild: wait for it to exist
    members = _members(tagged.pid)
    assert find_orphans(home) == {tagged.pid}
    assert kill_orphans(home, grace_s=2.0) == 1
    assert not any(proc_running(pid) for pid in members)
    assert proc_running(untagged.pid)
    assert proc_running(foreign.pid)
    assert find_orphans(home) == set()
    assert kill_orphans(home) == 0


def test_own_group_is_never_a_target(
    tmp_path: Path, processes: list[subprocess.Popen[bytes]]
) -> None:
    """R27: a tagged process in the caller's own process group is not signalled (the
    daemon never ends itself or whoever started it)."""
    home = tmp_path / "home"
    env = {"PATH": os.environ["PATH"], OWNER_ENV: owner_tag(home)}
    same_group = subprocess.Popen(["/bin/sleep", "60"], env=env)
    processes.append(same_group)
    assert find_orphans(home) == set()
    assert kill_orphans(home) == 0
    assert proc_running(same_group.pid)


@pytest.mark.parametrize("backend", ["sqlite", "redis"])
async def test_add_history_removes_the_pending_row_in_one_transaction(
    tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    """R72: recording a task's end in history drops its pending row in the same
    transaction: after it, the task is not resumable even if no delete follows. On
    both store backends (issue 21)."""
    location = (
        str(tmp_path / "agentrio.db")
        if backend == "sqlite"
        else request.getfixturevalue("redis_url")
    )
    async with open_any_store(location) as store:
        await store.put_task(
            TaskRow(
                session_id="chat-a",
                task_hash=HASH,
                state="running",
                objective="o",
                origin="chat-",
                model="builtin",
                created_at=1.0,
                updated_at=1.0,
                snapshot=None,
                questions=[],
            )
        )
        await store.add_history(
            HistoryRow(
                session_id="chat-a",
                task_hash=HASH,
                end_at=2.0,
                objective="o",
                model="builtin",
                reasoning="",
                status="finished",
                content="done",
            )
        )
        assert await store.get_task("chat-a", HASH) is None
        assert await store.list_resumable("chat-a", now=3.0) == []
        assert (await store.get_history("chat-a", HASH)) is not None
