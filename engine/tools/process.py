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
process-table slot, so it counts as gone. Orphaned members are reparented to PID 1, whose
job reaping them is; some container init processes never do, and their zombies would
otherwise make a group look alive forever. `group_alive` therefore looks past zombies
(through ``/proc`` on Linux; elsewhere an existing group counts as alive).

stdout and stderr are merged into one pipe and read as they arrive: every chunk goes to
``on_output`` in order (leg logs, watchers), while the kept output is bounded to
``keep_bytes`` (its head and tail), so a command printing 200 MB runs in bounded memory.
Nothing here blocks the Trio thread: waiting for the leader goes through
`trio.Process.wait`, reading through the pipe's stream, and the ``/proc`` scan through a
worker thread.
"""

from __future__ import annotations

import codecs
import math
import os
import signal
import subprocess
from collections.abc import Awaitable, Callable, Mapping
from typing import Final

import attrs
import trio

from engine.causes import Cause
from engine.nursery_tasks import cancel_scope

__all__ = [
    "DRAIN_IDLE_S",
    "DRAIN_MAX_S",
    "ClampedOutput",
    "CommandResult",
    "group_alive",
    "run_in_group",
]

DRAIN_IDLE_S: Final = 0.2
"""After the leader exits, stop reading once the pipe has been quiet this long."""
DRAIN_MAX_S: Final = 1.0
"""After the leader exits, stop reading after this long even if output keeps coming."""
_CLEANUP_EXTRA_S: Final = 2.0
_POLL_S: Final = 0.01
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
        self._keep(self._decoder.decode(chunk).encode("utf-8"))

    def _keep(self, data: bytes) -> None:
        self.decoded_bytes += len(data)
        room = self._head_cap - len(self._head)
        if room > 0:
            self._head += data[:room]
            data = data[room:]
        if not data:
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


class _Reader:
    """Reads the merged output pipe; after the leader exits, only while it keeps flowing.

    Each receive runs in its own cancel scope so that `leader_exited` can put a deadline
    on the receive in progress; ``on_output`` itself is never interrupted by the drain
    deadline (only by a cancel of the whole run).
    """

    def __init__(
        self,
        stream: trio.abc.ReceiveStream,
        keeper: ClampedOutput,
        on_output: Callable[[bytes], Awaitable[None]] | None,
    ) -> None:
        self._stream = stream
        self._keeper = keeper
        self._on_output = on_output
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
                chunk = bytes(await self._stream.receive_some())
            self._receive_scope = None
            if scope.cancelled_caught or not chunk:
                return
            self._keeper.add(chunk)
            if self._on_output is not None:
                await self._on_output(chunk)


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
    `trio.to_thread.run_sync`, as `run_in_group` does.
    """
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    if not os.path.isdir("/proc/self"):
        return True
    return _has_running_member(pgid)


async def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return await trio.to_thread.run_sync(group_alive, pgid)


async def _wait_group_gone(process: trio.Process, pgid: int) -> None:
    """Return once no member of ``pgid`` runs.

    Polling is the only way: the kernel tells nobody but the parent (and for orphans,
    PID 1) when a member exits, and there is no event for "group empty". To keep each
    poll cheap on a busy machine, the whole of ``/proc`` is scanned once for the
    group's members and then only those pids are watched; a last full scan catches a
    member forked meanwhile.
    """
    await process.wait()
    while True:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        except PermissionError:
            pass
        members = await trio.to_thread.run_sync(_running_members, pgid)
        if members is None:  # no /proc: an existing group counts as alive
            await trio.sleep(_POLL_S)
            continue
        if not members:
            return
        while members:
            await trio.sleep(_POLL_S)
            members = await trio.to_thread.run_sync(_still_running, members, pgid)


async def _end_group(process: trio.Process, pgid: int, kill_grace_s: float) -> None:
    """SIGTERM the group, give it ``kill_grace_s`` to go, then SIGKILL; reap the leader."""
    if process.returncode is not None and not await _group_alive(pgid):
        return
    _signal_group(pgid, signal.SIGTERM)
    _signal_group(pgid, signal.SIGCONT)
    with trio.move_on_after(kill_grace_s):
        await _wait_group_gone(process, pgid)
        return
    _signal_group(pgid, signal.SIGKILL)
    await _wait_group_gone(process, pgid)


def _sole_exception(group: BaseExceptionGroup[BaseException]) -> BaseException | None:
    """The one exception ``group`` stands for, or None when it holds several errors.

    Only cancellations besides one error: that error. Only cancellations: the first one
    (the scope that was cancelled recognises it as its own and catches it).
    """
    leaves: list[BaseException] = []
    pending: list[BaseException] = [group]
    while pending:
        exc = pending.pop()
        if isinstance(exc, BaseExceptionGroup):
            pending.extend(reversed(exc.exceptions))
        else:
            leaves.append(exc)
    errors = [exc for exc in leaves if not isinstance(exc, trio.Cancelled)]
    if not errors:
        return leaves[0] if leaves else None
    return errors[0] if len(errors) == 1 else None


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
        sole = _sole_exception(group)
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
    reader = _Reader(process.stdout, keeper, on_output)
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
