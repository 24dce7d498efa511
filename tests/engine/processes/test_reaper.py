"""engine/processes/reaper.py, groups.py: orphans of our commands come to us and are reaped (R48).

Inside `adopting_orphans` the test process is a child subreaper (Linux), so a command's
orphaned members are re-parented to it instead of to PID 1. These tests run real
processes on the real clock; every wait is bounded by ``fail_after`` and ends as soon as
its condition holds.
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

import pytest
import trio

import agentrio.engine.processes.groups as groups_module
import agentrio.engine.processes.reaper as reaper_module
from agentrio.engine.nursery_tasks import cancel_scope
from agentrio.engine.processes.reaper import (
    adopting_orphans,
    is_child_subreaper,
    reap_adopted,
    reap_adopted_members,
)
from agentrio.engine.processes.runner import run_in_group
from agentrio.protocol.causes import Cause

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="child subreapers are Linux's")


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, ppid, pgrp) of ``pid``, or None once nothing is left of it (reaped)."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except FileNotFoundError:
        return None
    fields = raw[raw.rfind(b")") + 2 :].split()
    return fields[0].decode(), int(fields[1]), int(fields[2])


def _exists(pid: int) -> bool:
    """True while ``pid`` is in the process table, zombies included."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _group_exists(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


class FirstLine:
    """Collects output; ``pids`` are the whitespace-separated numbers of its first line."""

    def __init__(self) -> None:
        self.seen = bytearray()
        self.pids: list[int] = []
        self.ready = trio.Event()

    async def __call__(self, chunk: bytes) -> None:
        self.seen += chunk
        if not self.ready.is_set() and b"\n" in self.seen:
            self.pids = [int(word) for word in bytes(self.seen).split(b"\n", 1)[0].split()]
            self.ready.set()


async def test_adopting_orphans_makes_us_the_subreaper_and_restores() -> None:
    """R48: inside adopting_orphans this process is a child subreaper; after it, not."""
    assert is_child_subreaper() is False
    async with adopting_orphans() as adopting:
        assert adopting is True
        assert is_child_subreaper() is True
    assert is_child_subreaper() is False


async def test_cancel_reaps_the_orphaned_grandchild_without_a_proc_scan(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """R48: a cancelled command whose member was orphaned (its parent subshell exited)
    ends with that member adopted by us and reaped -- not left a zombie -- and the
    group gone, found by the kernel alone: the ``/proc`` fallback is never used."""

    def no_scan(*args: object) -> list[str]:
        raise AssertionError("the /proc fallback ran")

    monkeypatch.setattr(groups_module, "_running_members", no_scan)
    monkeypatch.setattr(groups_module, "_still_running", no_scan)
    monkeypatch.setattr(groups_module, "_SCAN_AFTER_S", 10**9)
    watcher = FirstLine()
    async with adopting_orphans():
        async with trio.open_nursery() as nursery:
            nursery.start_soon(
                lambda: run_in_group(
                    "p=$(sleep 1000 >/dev/null 2>&1 & echo $!); echo $p $$; sleep 1000",
                    on_output=watcher,
                )
            )
            with trio.fail_after(5):
                await watcher.ready.wait()
            orphan, leader = watcher.pids
            state = _stat(orphan)
            assert state is not None
            assert state[1:] == (os.getpid(), leader)  # adopted by us, still in the group
            cancelled_at = trio.current_time()
            cancel_scope(nursery.cancel_scope, Cause.USER_CANCELED)
        assert trio.current_time() - cancelled_at < 1
        assert _exists(orphan) is False
        assert _group_exists(leader) is False


async def test_a_group_slow_to_go_is_not_scanned_before_its_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """R48, issue 23 (cancel tail under load): a killed group whose member outlives
    the leader by 0.2 s (it ignores SIGTERM) takes far more than the ten quick checks,
    yet ``/proc`` is not scanned before `_SCAN_AFTER_S` has passed: with thousands of
    commands running, a scan costs 50-500 ms. The kernel's check sees the group go."""

    def no_scan(*args: object) -> list[str]:
        raise AssertionError("the /proc fallback ran")

    monkeypatch.setattr(groups_module, "_running_members", no_scan)
    monkeypatch.setattr(groups_module, "_SCAN_AFTER_S", 30.0)
    watcher = FirstLine()
    async with adopting_orphans():
        async with trio.open_nursery() as nursery:
            nursery.start_soon(
                lambda: run_in_group(
                    # The member prints its pid and the leader's once it ignores TERM.
                    "sh -c \"trap '' TERM; echo \\$\\$ $$; exec sleep 0.2\" & sleep 1000",
                    on_output=watcher,
                )
            )
            with trio.fail_after(5):
                await watcher.ready.wait()
            slow, leader = watcher.pids
            cancelled_at = trio.current_time()
            cancel_scope(nursery.cancel_scope, Cause.USER_CANCELED)
        took = trio.current_time() - cancelled_at
        assert 0.15 < took < 5
        assert _exists(slow) is False
        assert _group_exists(leader) is False


async def test_own_children_keep_their_exit_status() -> None:
    """R48: children this process started itself -- in a new session (like the sudo
    check) or in ours -- are never reaped by the reaper, even once they have exited and
    wait for their owner: each owner still gets the real exit code."""
    async with adopting_orphans():
        leader = await trio.lowlevel.open_process(
            ["/bin/sh", "-c", "exit 7"], start_new_session=True
        )
        plain = await trio.lowlevel.open_process(["/bin/sh", "-c", "exit 5"])
        for child in (leader, plain):
            # Wait until it has exited, without reaping it (WNOWAIT).
            await trio.to_thread.run_sync(os.waitid, os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)
            assert _stat(child.pid) == ("Z", os.getpid(), os.getpgid(child.pid))
        assert reap_adopted_members(leader.pid) == 0
        assert reap_adopted_members(os.getpgrp()) == 0
        assert await reap_adopted() == 0
        assert (await leader.wait(), await plain.wait()) == (7, 5)
        done = await trio.run_process(["/bin/sh", "-c", "exit 3"], check=False)
        assert done.returncode == 3


async def test_periodic_pass_reaps_an_orphan_that_left_the_group() -> None:
    """R48: an orphan that moved to a process group of its own, which no group wait
    looks at, is still reaped once it exits -- by the periodic pass."""
    # A child moved to a group of its own by its parent, which then prints its pid and
    # exits: the child is orphaned outside the command's group.
    leave_group = "\n".join(
        [
            "import os, time",
            "pid = os.fork()",
            "if pid == 0:",
            "    os.close(1)",
            "    time.sleep(0.5)",
            "    os._exit(0)",
            "os.setpgid(pid, pid)",
            "print(pid)",
        ]
    )
    watcher = FirstLine()
    async with adopting_orphans(interval_s=0.05):
        result = await run_in_group(
            f"p=$({sys.executable} -c '{leave_group}' 2>/dev/null); echo $p $$",
            on_output=watcher,
        )
        assert result.exit_code == 0
        orphan, leader = watcher.pids
        state = _stat(orphan)
        assert state is not None
        assert state[1:] == (os.getpid(), orphan)  # adopted, leading a group of its own
        with trio.fail_after(5):
            while _exists(orphan):
                await trio.sleep(0.02)
        assert _group_exists(leader) is False


async def test_reap_adopted_looks_past_an_own_child_waiting_for_its_owner(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """R48: an exited child of our own that its owner has not waited for yet stands
    first in line for waitid(P_ALL); the pass then lists every child, reaps the adopted
    zombie behind it and leaves our own child (and its exit status) alone. Every child
    is looked at in a worker thread, never on the Trio thread (issue 23: with 5,000
    commands running that look held the Trio thread ~30 ms once a second)."""
    listed: list[list[int]] = []
    peeked_here: list[int] = []  # pids peeked at one by one on the Trio thread
    real_children, real_peek = reaper_module._children, reaper_module._peek

    def children() -> list[int]:
        listed.append(real_children())
        return listed[-1]

    def peek(idtype: int, ident: int) -> int | None:
        if idtype == os.P_PID and threading.current_thread() is threading.main_thread():
            peeked_here.append(ident)
        return real_peek(idtype, ident)

    monkeypatch.setattr(reaper_module, "_children", children)
    monkeypatch.setattr(reaper_module, "_peek", peek)
    async with adopting_orphans(interval_s=3600):
        # Spawned from this thread (not through trio's worker thread), so it is first
        # among the children waitid(P_ALL) looks at from here.
        own = os.posix_spawn(  # noqa: ASYNC221 -- returns once the child exists
            "/bin/sh", ["/bin/sh", "-c", "exit 9"], dict(os.environ)
        )
        await trio.to_thread.run_sync(os.waitid, os.P_PID, own, os.WEXITED | os.WNOWAIT)
        # The session leader exits at once; its child is orphaned inside that session
        # (adopted by us) and exits a moment later.
        started = await trio.run_process(
            ["setsid", "/bin/sh", "-c", "sh -c 'sleep 0.1' >/dev/null & echo $!"],
            capture_stdout=True,
        )
        orphan = int(started.stdout)
        with trio.fail_after(5):
            while (_stat(orphan) or ("", 0, 0))[0] != "Z":
                await trio.sleep(0.01)
        assert await reap_adopted() == 1
        assert _exists(orphan) is False
        assert len(listed) == 1
        assert own in listed[0]
        # Only the zombie found in the worker thread is looked at again here.
        assert peeked_here == [orphan]
        # It has exited (see the waitid above): this does not block.
        assert os.waitpid(own, os.WNOHANG) == (own, 9 << 8)  # noqa: ASYNC222


async def test_sigkill_after_grace_still_reaps_adopted_members() -> None:
    """R48: a group that ignores SIGTERM is SIGKILLed after the grace, and its orphaned
    members are reaped by us too."""
    watcher = FirstLine()
    async with adopting_orphans():
        async with trio.open_nursery() as nursery:
            nursery.start_soon(
                lambda: run_in_group(
                    "trap '' TERM; p=$(sleep 1000 >/dev/null 2>&1 & echo $!); echo $p $$; "
                    "sleep 1000",
                    on_output=watcher,
                    kill_grace_s=0.3,
                )
            )
            with trio.fail_after(5):
                await watcher.ready.wait()
            orphan, leader = watcher.pids
            state = _stat(orphan)
            assert state is not None
            assert state[1:] == (os.getpid(), leader)
            cancelled_at = trio.current_time()
            cancel_scope(nursery.cancel_scope, Cause.USER_CANCELED)
        assert 0.3 <= trio.current_time() - cancelled_at < 2
        assert _exists(orphan) is False
        assert _group_exists(leader) is False
