"""Process groups: is one still running, and how to end one (R48).

A command runs as the leader of its own process group (`agentrio.engine.processes.runner`).
Ending it always means ending the *group*: SIGTERM (and SIGCONT, so a stopped member
gets to act on it), a grace period for the group to empty, then SIGKILL.

"Gone" means: no member of the group is still running. A member that has exited but not
yet been waited for by its parent (a zombie) runs no code and holds nothing but its
process-table slot, so it counts as gone. Killing a group orphans members (``sh -c
'sleep 9'``: the shell dies, ``sleep`` loses its parent). Normally orphans go to PID 1,
whose job reaping them is -- some container init processes never do, and their zombies
would make a group look alive forever -- so `group_alive` looks past zombies through
``/proc`` (elsewhere an existing group counts as alive), a scan that costs
milliseconds on a busy machine. The daemon avoids it: inside
`agentrio.engine.processes.reaper.adopting_orphans` it is a child subreaper (Linux), orphans of
its commands come to it, `_wait_group_gone` reaps a killed group's orphans itself, and
the kernel then says the group is gone. Only orphans are ever reaped there, never a
child someone here started and waits for.
"""

from __future__ import annotations

import os
import signal
from typing import Final

import trio

from agentrio.engine.processes.reaper import is_child_subreaper, reap_adopted_members

__all__ = ["end_group", "group_alive", "group_exists"]

_POLL_S: Final = 0.01
#: The first checks of a killed group come every millisecond (it usually empties fast).
_QUICK_POLL_S: Final = 0.001
_QUICK_POLLS: Final = 10
#: While adopting orphans, seconds a waited-for group may take to go before ``/proc``
#: is looked into for it, and then between looks. A scan reads every process's
#: ``stat`` (with 5,000 commands running, 10,000 files: 50-500 ms in a worker thread,
#: contending for the GIL), so it must not come after a fixed number of checks: on a
#: loaded machine a killed group often takes more than the ten quick ones (issue 23).
_SCAN_AFTER_S: Final = 0.25


def _signal_group(pgid: int, signum: int) -> None:
    try:
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        # Gone already, or every remaining member changed user (a setuid program):
        # nothing more this process may do to it.
        pass


def _stat_fields(pid: str) -> tuple[str, int] | None:
    """(state, pgrp) of ``/proc/<pid>/stat``, or None if the process went away."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    # "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses.
    fields = raw[raw.rfind(b")") + 2 :].split()
    if len(fields) < 3:
        return None
    return fields[0].decode("ascii", errors="replace"), int(fields[2])


def _has_running_member(pgid: int) -> bool:
    return bool(_running_members(pgid, first_only=True))


def _running_members(pgid: int, *, first_only: bool = False) -> list[str] | None:
    """Pids of the running (not zombie) members of ``pgid``, from one scan of
    ``/proc``; None when ``/proc`` cannot be read (then count the group alive)."""
    try:
        entries = os.listdir("/proc")
    except OSError:
        return None
    members: list[str] = []
    for name in entries:
        if not name.isdigit():
            continue
        fields = _stat_fields(name)
        if fields is not None and fields[1] == pgid and fields[0] not in ("Z", "X"):
            members.append(name)
            if first_only:
                break
    return members


def _still_running(pids: list[str], pgid: int) -> list[str]:
    """Those of ``pids`` still running in ``pgid`` (a few small ``/proc`` reads)."""
    alive: list[str] = []
    for pid in pids:
        fields = _stat_fields(pid)
        if fields is not None and fields[1] == pgid and fields[0] not in ("Z", "X"):
            alive.append(pid)
    return alive


def group_alive(pgid: int) -> bool:
    """True while some member of process group ``pgid`` is still running.

    Zombies (exited members nobody has reaped yet) do not count; see the module
    docstring. Without ``/proc``, an existing group counts as alive. This reads
    ``/proc`` when the group exists: from async code call it through
    `trio.to_thread.run_sync`, as `run_in_group` does. It never reaps anything (it may
    run in any thread; reaping stays on the Trio thread, see `reap_adopted_members`).
    """
    if not group_exists(pgid):
        return False
    if not os.path.isdir("/proc/self"):
        return True
    return _has_running_member(pgid)


def group_exists(pgid: int) -> bool:
    """Whether any process, zombies included, is still in group ``pgid``."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def _poll_interval(polls: int) -> float:
    """How long to sleep before the next check of a group that still exists: a killed
    group usually empties within a millisecond or two, so the first checks come fast."""
    return _QUICK_POLL_S if polls < _QUICK_POLLS else _POLL_S


async def _wait_group_gone(process: trio.Process, pgid: int) -> None:
    """Return once no member of ``pgid`` runs.

    Polling is the only way: there is no event for "group empty". When this process is
    a child subreaper (`adopting_orphans`), members orphaned by the group's own deaths
    come to it, so each check reaps those (`reap_adopted_members`) and then asks the
    kernel whether the group still exists -- a few system calls, no ``/proc`` scan. A
    ``/proc`` scan (in a worker thread) still runs once the group has lasted
    `_SCAN_AFTER_S`, and again every `_SCAN_AFTER_S`, for the rare group left holding
    only zombies nobody here may reap (a member whose parent runs outside the group, or
    one that went to another subreaper).

    Otherwise orphans go to PID 1, which may never reap them, so an existing group is
    looked into: the whole of ``/proc`` is scanned once for the group's running
    members, then only those pids are watched; a last full scan catches a member
    forked meanwhile.
    """
    await process.wait()
    adopting = is_child_subreaper()
    polls = 0
    scan_at = trio.current_time() + _SCAN_AFTER_S

    async def pause() -> None:
        nonlocal polls
        await trio.sleep(_poll_interval(polls))
        polls += 1

    def gone() -> bool:
        if adopting:
            reap_adopted_members(pgid)
        return not group_exists(pgid)

    while True:
        if gone():
            return
        if adopting and trio.current_time() < scan_at:
            await pause()
            continue
        scan_at = trio.current_time() + _SCAN_AFTER_S
        members = await trio.to_thread.run_sync(_running_members, pgid)
        if members is None:  # no /proc: an existing group counts as alive
            await pause()
            continue
        if not members:
            return
        while members:
            await pause()
            if gone():
                return
            members = await trio.to_thread.run_sync(_still_running, members, pgid)


async def end_group(process: trio.Process, pgid: int, kill_grace_s: float) -> None:
    """SIGTERM the group, give it ``kill_grace_s`` to go, then SIGKILL; reap the leader."""
    if process.returncode is not None:
        if is_child_subreaper():
            reap_adopted_members(pgid)
        if not group_exists(pgid) or not await trio.to_thread.run_sync(group_alive, pgid):
            return
    _signal_group(pgid, signal.SIGTERM)
    _signal_group(pgid, signal.SIGCONT)
    with trio.move_on_after(kill_grace_s):
        await _wait_group_gone(process, pgid)
        return
    _signal_group(pgid, signal.SIGKILL)
    await _wait_group_gone(process, pgid)
