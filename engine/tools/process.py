"""Commands in their own process group, so a cancel reaches every process they start (R48).

`run_in_group` starts the command as the leader of a new session (and so a new process
group whose id is the leader's pid). Ending the command always means ending the *group*:

- **Cancel** (the caller's cancel scope) or **timeout**: SIGTERM (and SIGCONT, so a
  stopped member gets to act on it) to the group; wait up to ``kill_grace_s`` for the
  leader to be reaped and for the group to empty; then SIGKILL the group and wait again.
  The clean-up runs shielded, bounded by ``kill_grace_s + 2`` seconds, so it finishes even
  while the caller is being cancelled; then `trio.Cancelled` propagates (cancel) or the
  result says ``timed_out=True`` (timeout).
- **Normal end**: a foreground command owns its group, so processes it left running in
  the background (``sleep 1000 &``) are not waited on: once the leader has exited, the
  output still in the pipe is read until EOF or until it has been quiet for
  `DRAIN_IDLE_S` (at most `DRAIN_MAX_S` in all: a background child keeps the pipe open,
  so EOF may never come), and then the rest of the group is ended as above. Commands
  meant to outlive their turn are legs, which run through the background machinery.

"Gone" means: no member of the group is still running. A member that has exited but not
yet been waited for by its parent (a zombie) runs no code and holds nothing but its
process-table slot, so it counts as gone. Killing a group orphans members (``sh -c
'sleep 9'``: the shell dies, ``sleep`` loses its parent). Normally orphans go to PID 1,
whose job reaping them is -- some container init processes never do, and their zombies
would make a group look alive forever -- so `group_alive` looks past zombies through
``/proc`` (elsewhere an existing group counts as alive), a scan that costs
milliseconds on a busy machine. The daemon avoids it: inside `adopting_orphans` it is
a child subreaper (Linux), orphans of its commands come to it, `run_in_group` reaps a
killed group's orphans itself, and the kernel then says the group is gone. Only orphans
are ever reaped there, never a child someone here started and waits for.

stdout and stderr are merged into one pipe and read as they arrive: every chunk goes to
``on_output`` in order (leg logs, watchers), while the kept output is bounded to
``keep_bytes`` (its head and tail), so a command printing 200 MB runs in bounded memory.
Nothing here blocks the Trio thread: waiting for the leader goes through
`trio.Process.wait`, reading through the pipe's stream, and the ``/proc`` reads through
a worker thread.
"""

from __future__ import annotations

import codecs
import ctypes
import fcntl
import functools
import math
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Final

import attrs
import trio

from engine.causes import Cause
from engine.nursery_tasks import cancel_scope
from protocol.groups import sole_exception

__all__ = [
    "DRAIN_IDLE_S",
    "DRAIN_MAX_S",
    "REAP_INTERVAL_S",
    "ClampedOutput",
    "CommandResult",
    "adopting_orphans",
    "group_alive",
    "is_child_subreaper",
    "reap_adopted",
    "reap_adopted_members",
    "run_in_group",
    "set_child_subreaper",
]

DRAIN_IDLE_S: Final = 0.2
"""After the leader exits, stop reading once the pipe has been quiet this long."""
DRAIN_MAX_S: Final = 1.0
"""After the leader exits, stop reading after this long even if output keeps coming."""
REAP_INTERVAL_S: Final = 1.0
"""How often `adopting_orphans` reaps adopted children that have exited."""
_CLEANUP_EXTRA_S: Final = 2.0
_POLL_S: Final = 0.01
#: The first checks of a killed group come every millisecond (it usually empties fast).
_QUICK_POLL_S: Final = 0.001
_QUICK_POLLS: Final = 10
#: While adopting orphans, every this many checks of a group still look into /proc.
_SCAN_EVERY: Final = 10
#: Output reads ask for this much at first and after a small read, and at most this much.
_READ_MIN_BYTES: Final = 64 * 1024
_READ_MAX_BYTES: Final = 1024 * 1024
#: The size a busy output pipe grows to (Linux's default limit for unprivileged users).
_PIPE_BYTES: Final = 1024 * 1024
_SHELL: Final = "/bin/sh"


@attrs.frozen
class CommandResult:
    """How a command ended and what it printed.

    ``exit_code`` is None when the leader was killed by a signal (then ``signal`` names
    it). ``output`` is stdout and stderr merged, decoded as UTF-8 (invalid bytes
    replaced), clamped to its head and tail like `engine.snapshot.clamp` does;
    ``output_bytes`` counts every byte the command produced, clamped or not.
    ``timed_out`` is True when ``timeout_s`` ran out before the leader exited.
    """

    exit_code: int | None
    signal: int | None
    output: str
    output_bytes: int
    timed_out: bool
    duration_s: float


class ClampedOutput:
    """A byte stream's text, kept as `engine.snapshot.clamp` would keep it, in bounded memory.

    ``text()`` equals ``clamp(everything.decode("utf-8", errors="replace"), keep_bytes)``
    -- the first 3/4 and last 1/4 of ``keep_bytes`` (cut at character boundaries) around
    an ``...[N bytes elided]...`` marker that `engine.snapshot.has_elided` recognises --
    but never holds more than about ``2 * keep_bytes`` bytes: chunks are decoded
    incrementally (a character split across chunks decodes whole), re-encoded, and only
    their head and a trimmed tail are kept, while ``decoded_bytes`` counts the rest.
    ``total_bytes`` counts the raw bytes received.
    """

    def __init__(self, keep_bytes: int) -> None:
        if keep_bytes < 0:
            raise ValueError(f"keep_bytes must be 0 or more, got {keep_bytes}")
        self._limit = keep_bytes
        # clamp looks at the byte just past the head to find a character boundary.
        self._head_cap = keep_bytes * 3 // 4 + 1
        self._tail_cap = keep_bytes // 4
        self._head = bytearray()
        self._tail = bytearray()
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._finished = False
        self.total_bytes = 0
        self.decoded_bytes = 0

    def add(self, chunk: bytes) -> None:
        if self._finished:
            raise RuntimeError("ClampedOutput.add after text()")
        self.total_bytes += len(chunk)
        if chunk.isascii() and not self._decoder.getstate()[0]:
            # No character is split across chunks here, and ASCII decodes to itself.
            self._keep(chunk)
        else:
            self._keep(self._decoder.decode(chunk).encode("utf-8"))

    def _keep(self, data: bytes) -> None:
        self.decoded_bytes += len(data)
        room = self._head_cap - len(self._head)
        if room > 0:
            self._head += data[:room]
            data = data[room:]
        if not data:
            return
        if len(data) >= self._tail_cap:
            # The new data alone fills the tail: copy only the part kept.
            self._tail[:] = data[len(data) - self._tail_cap :]
            return
        self._tail += data
        if len(self._tail) > 2 * self._tail_cap:
            del self._tail[: len(self._tail) - self._tail_cap]

    def text(self) -> str:
        """The clamped text; ends the stream (an unfinished character becomes U+FFFD)."""
        if not self._finished:
            self._finished = True
            self._keep(self._decoder.decode(b"", final=True).encode("utf-8"))
        size = self.decoded_bytes
        tail_offset = size - len(self._tail)
        if size <= self._limit:
            # Everything fits, so nothing was trimmed: head and tail are contiguous.
            return (self._head + self._tail).decode("utf-8")
        head_end = self._limit * 3 // 4
        while head_end > 0 and _is_continuation(self._head[head_end]):
            head_end -= 1
        tail_start = size - self._tail_cap
        while tail_start < size and _is_continuation(self._byte_at(tail_start, tail_offset)):
            tail_start += 1
        if tail_start >= tail_offset:
            tail = bytes(self._tail[tail_start - tail_offset :])
        else:
            # The tail was never trimmed, so head and tail are contiguous.
            tail = bytes((self._head + self._tail)[tail_start:])
        head = self._head[:head_end].decode("utf-8")
        return f"{head}\n...[{tail_start - head_end} bytes elided]...\n{tail.decode('utf-8')}"

    def _byte_at(self, index: int, tail_offset: int) -> int:
        if index >= tail_offset:
            return self._tail[index - tail_offset]
        return self._head[index]


def _is_continuation(byte: int) -> bool:
    return byte & 0xC0 == 0x80


def _grow_pipe(fd: int) -> None:
    """Make the pipe behind ``fd`` hold `_PIPE_BYTES` (Linux; elsewhere, or when the
    system's limits say no, it keeps its size)."""
    setsize = getattr(fcntl, "F_SETPIPE_SZ", None)
    if setsize is None:
        return
    try:
        fcntl.fcntl(fd, setsize, _PIPE_BYTES)
    except OSError:
        pass


class _Reader:
    """Reads the merged output pipe; after the leader exits, only while it keeps flowing.

    Each receive runs in its own cancel scope so that `leader_exited` can put a deadline
    on the receive in progress; ``on_output`` itself is never interrupted by the drain
    deadline (only by a cancel of the whole run).

    A command that prints faster than its output is consumed keeps the pipe full, and a
    64 KiB pipe then costs one wake-up, one read and one ``on_output`` round per 64 KiB.
    So the first read that comes back full grows the pipe to `_PIPE_BYTES` (1 MiB;
    quiet commands keep the default size, so a thousand idle commands pin no kernel
    memory), and each read asks for up to twice what the last one returned, between
    `_READ_MIN_BYTES` and `_READ_MAX_BYTES`. The chunks handed on are the same bytes in
    the same order, only fewer and larger.
    """

    def __init__(
        self,
        stream: trio.abc.ReceiveStream,
        keeper: ClampedOutput,
        on_output: Callable[[bytes], Awaitable[None]] | None,
        *,
        pipe_fd: int | None = None,
    ) -> None:
        self._stream = stream
        self._keeper = keeper
        self._on_output = on_output
        self._pipe_fd = pipe_fd
        self._read_bytes = _READ_MIN_BYTES
        self._exited_at: float | None = None
        self._receive_scope: trio.CancelScope | None = None

    @property
    def leader_done(self) -> bool:
        return self._exited_at is not None

    def leader_exited(self) -> None:
        self._exited_at = trio.current_time()
        if self._receive_scope is not None:
            self._receive_scope.deadline = self._drain_deadline()

    def _drain_deadline(self) -> float:
        if self._exited_at is None:
            return math.inf
        return min(trio.current_time() + DRAIN_IDLE_S, self._exited_at + DRAIN_MAX_S)

    async def run(self) -> None:
        while True:
            with trio.CancelScope(deadline=self._drain_deadline()) as scope:
                self._receive_scope = scope
                # bytes() of a bytes object is the object itself: no copy.
                chunk = bytes(await self._stream.receive_some(self._read_bytes))
            self._receive_scope = None
            if scope.cancelled_caught or not chunk:
                return
            if len(chunk) == self._read_bytes and self._pipe_fd is not None:
                _grow_pipe(self._pipe_fd)
                self._pipe_fd = None
            self._read_bytes = max(_READ_MIN_BYTES, min(2 * len(chunk), _READ_MAX_BYTES))
            self._keeper.add(chunk)
            if self._on_output is not None:
                await self._on_output(chunk)
            del chunk  # not held while the next read allocates its buffer


async def _feed(
    stream: trio.abc.SendStream,
    data: bytes,
    *,
    task_status: trio.TaskStatus[trio.CancelScope] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Write ``data`` to the child's stdin and close it; a child that stops reading is fine.

    Hands its cancel scope to the starter, which ends the feeding once the leader exits.
    """
    with trio.CancelScope() as scope:
        task_status.started(scope)
        try:
            async with stream:
                await stream.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass


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
    if not _group_exists(pgid):
        return False
    if not os.path.isdir("/proc/self"):
        return True
    return _has_running_member(pgid)


def _group_exists(pgid: int) -> bool:
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
    ``/proc`` scan (in a worker thread) still runs every `_SCAN_EVERY` checks, for the
    rare group left holding only zombies nobody here may reap (a member whose parent
    runs outside the group, or one that went to another subreaper).

    Otherwise orphans go to PID 1, which may never reap them, so an existing group is
    looked into: the whole of ``/proc`` is scanned once for the group's running
    members, then only those pids are watched; a last full scan catches a member
    forked meanwhile.
    """
    await process.wait()
    adopting = is_child_subreaper()
    polls = 0

    async def pause() -> None:
        nonlocal polls
        await trio.sleep(_poll_interval(polls))
        polls += 1

    def gone() -> bool:
        if adopting:
            reap_adopted_members(pgid)
        return not _group_exists(pgid)

    while True:
        if gone():
            return
        if adopting and (polls + 1) % _SCAN_EVERY != 0:
            await pause()
            continue
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


async def _end_group(process: trio.Process, pgid: int, kill_grace_s: float) -> None:
    """SIGTERM the group, give it ``kill_grace_s`` to go, then SIGKILL; reap the leader."""
    if process.returncode is not None:
        if is_child_subreaper():
            reap_adopted_members(pgid)
        if not _group_exists(pgid) or not await trio.to_thread.run_sync(group_alive, pgid):
            return
    _signal_group(pgid, signal.SIGTERM)
    _signal_group(pgid, signal.SIGCONT)
    with trio.move_on_after(kill_grace_s):
        await _wait_group_gone(process, pgid)
        return
    _signal_group(pgid, signal.SIGKILL)
    await _wait_group_gone(process, pgid)


# ------------------------------------------------------------ orphans of our commands

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


def _reap_adopted(candidates: list[int] | None) -> tuple[int, bool]:
    """Reap exited adopted children: (how many, whether an exited child of our own stood
    first in line). With ``candidates`` None the kernel is asked for any exited child,
    which only ever reports the first; with a list, each of those pids is looked at."""
    own_sid = os.getsid(0)
    reaped = 0
    if candidates is not None:
        for child in candidates:
            if _peek(os.P_PID, child) == child and _adopted(child, own_sid) and _reap(child):
                reaped += 1
        return reaped, False
    while True:
        pid = _peek(os.P_ALL, 0)
        if pid is None:
            return reaped, False
        if not _adopted(pid, own_sid):
            return reaped, True
        if not _reap(pid):
            return reaped, False
        reaped += 1


async def reap_adopted() -> int:
    """One pass of `adopting_orphans`: reap every adopted child that has exited; return
    how many. Call it on the Trio thread."""
    if sys.platform != "linux":
        return 0
    reaped, blocked = _reap_adopted(None)
    if blocked:
        # One of our own children has exited and its owner has not waited for it yet:
        # waitid(P_ALL) shows nothing behind it, so look at every child instead.
        children = await trio.to_thread.run_sync(_children)
        reaped += _reap_adopted(children)[0]
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


async def _run_to_exit(process: trio.Process, reader: _Reader, stdin: bytes | None) -> None:
    """Feed stdin and read output until the leader exits and its output is drained.

    The nursery is an implementation detail: a cancel comes out as one `trio.Cancelled`
    and an ``on_output`` error as itself, not as the nursery's exception group.
    """
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(reader.run)
            feed_scope = None
            if process.stdin is not None and stdin is not None:
                feed_scope = await nursery.start(_feed, process.stdin, stdin)
            await process.wait()
            # The leader is gone: nobody reads its stdin any more, and background
            # members may hold the output pipe open for ever.
            if feed_scope is not None:
                cancel_scope(feed_scope, Cause.SUPERSEDED)
            reader.leader_exited()
    except BaseExceptionGroup as group:
        sole = sole_exception(group, trio.Cancelled)
        if sole is None:
            raise
        raise sole from sole.__cause__


async def run_in_group(
    argv_or_shell: list[str] | str,
    *,
    cwd: str | None = None,
    env: Mapping[str, str] | None = None,
    timeout_s: float | None = None,
    kill_grace_s: float = 2.0,
    on_output: Callable[[bytes], Awaitable[None]] | None = None,
    keep_bytes: int = 32 * 1024,
    stdin: bytes | None = None,
) -> CommandResult:
    """Run a command as the leader of a new process group and end the whole group (R48).

    A string runs through ``/bin/sh -c``; a list runs as argv. ``env`` replaces the
    environment (None inherits the daemon's). Without ``stdin`` bytes the child reads
    from ``/dev/null``, never from the daemon's terminal. ``on_output`` receives every
    chunk of merged stdout/stderr in order; an exception from it ends the group and
    propagates.

    Raises `OSError` (e.g. `FileNotFoundError`) when the program cannot be started, and
    `trio.Cancelled` when the caller's scope is cancelled -- in both the cancel and the
    timeout case only after no process of the group is left running (or the bounded
    clean-up of ``kill_grace_s + 2`` seconds ran out, which only an unkillable process,
    e.g. one stuck in the kernel, can cause).
    """
    argv = [_SHELL, "-c", argv_or_shell] if isinstance(argv_or_shell, str) else argv_or_shell
    keeper = ClampedOutput(keep_bytes)
    started = trio.current_time()
    process = await trio.lowlevel.open_process(
        argv,
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        cwd=cwd,
        env=dict(env) if env is not None else None,
        start_new_session=True,
    )
    pgid = process.pid
    assert process.stdout is not None
    pipe_fd = (
        process.stdout.fileno() if isinstance(process.stdout, trio.lowlevel.FdStream) else None
    )
    reader = _Reader(process.stdout, keeper, on_output, pipe_fd=pipe_fd)
    deadline = math.inf if timeout_s is None else started + timeout_s
    try:
        with trio.CancelScope(deadline=deadline) as timeout_scope:
            await _run_to_exit(process, reader, stdin)
    finally:
        with trio.CancelScope(shield=True):
            with trio.move_on_after(kill_grace_s + _CLEANUP_EXTRA_S):
                await _end_group(process, pgid, kill_grace_s)
            if process.stdin is not None:
                await process.stdin.aclose()
            await process.stdout.aclose()
    code = process.returncode
    return CommandResult(
        exit_code=code if code is not None and code >= 0 else None,
        signal=-code if code is not None and code < 0 else None,
        output=keeper.text(),
        output_bytes=keeper.total_bytes,
        timed_out=timeout_scope.cancelled_caught and not reader.leader_done,
        duration_s=trio.current_time() - started,
    )
