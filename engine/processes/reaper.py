"""The daemon as the reaper of its commands' orphans (Linux child subreaper).

Killing a command's process group orphans its members; normally they go to PID 1, which
in some containers never reaps them, and their zombies make a group look alive. Inside
`adopting_orphans` the daemon is a child subreaper instead: orphans of its commands come
to it, `agentrio.engine.processes.groups` reaps a killed group's orphans while it waits for the
group, and a periodic pass reaps the rest. Only orphans are ever reaped here, never a
child someone here started and waits for (`_adopted` says which is which).
"""

from __future__ import annotations

import ctypes
import functools
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Final

import trio

from agentrio.engine.nursery_tasks import cancel_scope
from agentrio.protocol.causes import Cause

__all__ = [
    "REAP_INTERVAL_S",
    "adopting_orphans",
    "is_child_subreaper",
    "reap_adopted",
    "reap_adopted_members",
    "set_child_subreaper",
]

REAP_INTERVAL_S: Final = 1.0
"""How often `adopting_orphans` reaps adopted children that have exited."""

_PR_SET_CHILD_SUBREAPER: Final = 36
_PR_GET_CHILD_SUBREAPER: Final = 37


@functools.cache
def _libc() -> ctypes.CDLL | None:
    if sys.platform != "linux":
        return None
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


def set_child_subreaper(enabled: bool) -> bool:
    """Make this process (or stop it being) the reaper of its descendants' orphans.

    While it is set, a process whose parent dies is re-parented to its nearest living
    ancestor that is a subreaper instead of to PID 1 (Linux ``PR_SET_CHILD_SUBREAPER``).
    Returns False where that does not exist (other systems) or the call failed; nothing
    changes then."""
    libc = _libc()
    if libc is None:
        return False
    return int(libc.prctl(_PR_SET_CHILD_SUBREAPER, int(enabled), 0, 0, 0)) == 0


def is_child_subreaper() -> bool:
    """Whether this process is a child subreaper (see `set_child_subreaper`)."""
    libc = _libc()
    if libc is None:
        return False
    value = ctypes.c_int(0)
    if int(libc.prctl(_PR_GET_CHILD_SUBREAPER, ctypes.byref(value), 0, 0, 0)) != 0:
        return False
    return value.value != 0


def _adopted(pid: int, own_sid: int) -> bool:
    """Whether our child ``pid`` can only be an orphan this process adopted.

    A child this process started itself is either in this process's session (started
    without a new session) or leads a session of its own (started with one: its sid is
    its pid) -- nothing else is possible, since a process can only enter a session by
    creating it. So a child in some *other* session that it does not lead was started
    by someone else, and nobody here waits for its exit status. Children this process
    started (`trio.Process`, `trio.run_process`, ``subprocess``) are never reaped here:
    their owners wait for them, and reaping one would rob its owner of the exit status
    (``subprocess`` then reports 0 -- a failed ``sudo -v`` would look like a success).

    What this leaves unreaped: an orphan that leads a session of its own (a ``setsid``
    whose parent then died, e.g. the middle process of a daemon's double fork) looks
    exactly like a child started with a new session. It stays a zombie until this
    process exits.
    """
    try:
        sid = os.getsid(pid)
    except OSError:
        return False
    return sid not in (pid, own_sid)


def _reap(pid: int) -> bool:
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return False
    return done == pid


def _peek(idtype: int, ident: int) -> int | None:
    """The pid of an exited child matching ``waitid(idtype, ident)``, left unreaped."""
    try:
        info = os.waitid(idtype, ident, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:  # no such child at all
        return None
    return None if info is None else info.si_pid


def reap_adopted_members(pgid: int) -> int:
    """Reap the exited members of group ``pgid`` that this process adopted; return how
    many. Cheap (a few system calls, no ``/proc``). Call it on the Trio thread only, so
    that two reaps never race for one pid.

    Only zombies `_adopted` allows are reaped, never the group's leader (our own child,
    which its `trio.Process` reaps). ``waitid`` reports one exited child at a time, so
    an exited leader not yet waited for hides the rest: call this once the leader has
    been waited for."""
    if sys.platform != "linux":
        return 0
    own_sid = os.getsid(0)
    reaped = 0
    while True:
        pid = _peek(os.P_PGID, pgid)
        if pid is None or not _adopted(pid, own_sid) or not _reap(pid):
            return reaped
        reaped += 1


def _children() -> list[int]:
    """Blocking: every child of this process, from ``/proc/self/task/*/children``."""
    pids: list[int] = []
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return pids
    for tid in tasks:
        try:
            with open(f"/proc/self/task/{tid}/children", "rb") as f:
                pids.extend(int(word) for word in f.read().split())
        except OSError:
            continue
    return pids


def _reap_adopted() -> tuple[int, bool]:
    """Reap exited adopted children: (how many, whether an exited child of our own stood
    first in line). The kernel is asked for any exited child, which only ever reports
    the first."""
    own_sid = os.getsid(0)
    reaped = 0
    while True:
        pid = _peek(os.P_ALL, 0)
        if pid is None:
            return reaped, False
        if not _adopted(pid, own_sid):
            return reaped, True
        if not _reap(pid):
            return reaped, False
        reaped += 1


def _exited_adopted() -> list[int]:
    """Blocking (a worker thread): the children that have exited and were adopted,
    peeked at one by one and left unreaped. Peeking is safe from any thread; only the
    reaping stays on the Trio thread."""
    own_sid = os.getsid(0)
    return [pid for pid in _children() if _peek(os.P_PID, pid) == pid and _adopted(pid, own_sid)]


async def reap_adopted() -> int:
    """One pass of `adopting_orphans`: reap every adopted child that has exited; return
    how many. Call it on the Trio thread.

    When an exited child of our own stands first (its owner has not waited yet, or it
    never will: an orphan that leads a session of its own, see `_adopted`, e.g. the
    sandbox's inner bubblewrap), every child is looked at -- in a worker thread, since
    with 5,000 commands running that is 5,000 ``waitid`` calls, ~30 ms that held the
    Trio thread once a second and made the cancel tail (issue 23)."""
    if sys.platform != "linux":
        return 0
    reaped, blocked = _reap_adopted()
    if blocked:
        own_sid = os.getsid(0)
        for pid in await trio.to_thread.run_sync(_exited_adopted):
            # Looked at again here: the pid was not reaped (and reused) meanwhile.
            if _peek(os.P_PID, pid) == pid and _adopted(pid, own_sid) and _reap(pid):
                reaped += 1
    return reaped


async def _reap_forever(interval_s: float) -> None:
    while True:
        await trio.sleep(interval_s)
        await reap_adopted()


@asynccontextmanager
async def adopting_orphans(*, interval_s: float = REAP_INTERVAL_S) -> AsyncIterator[bool]:
    """While the block runs, orphans of this process's commands come to it and are reaped.

    Makes this process a child subreaper (`set_child_subreaper`, Linux) and runs a
    supervised task that reaps adopted children that have exited (`_adopted` says
    which) every ``interval_s``. This is what lets a cancel end in a millisecond or two:
    a killed command's orphaned members come here, `run_in_group` reaps them itself
    while it waits for the group, and then the kernel reports the group gone -- no
    ``/proc`` scan, no waiting for a PID 1 that may never reap. The periodic pass is for
    the rest: members orphaned while their command still runs, and processes that left
    their command's group.

    Yields whether it is in effect: False where subreapers do not exist, and then
    orphans go to PID 1 and `run_in_group` looks through ``/proc`` as before. On exit
    the previous setting is restored and a last pass reaps what exited meanwhile.
    """
    was_subreaper = is_child_subreaper()
    if not set_child_subreaper(True):
        yield False
        return
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_reap_forever, interval_s)
            try:
                yield True
            finally:
                cancel_scope(nursery.cancel_scope, Cause.SHUTDOWN)
    finally:
        if not was_subreaper:
            set_child_subreaper(False)
        with trio.CancelScope(shield=True):
            await reap_adopted()
