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

How a group is ended, and what "gone" means for it (zombies, orphans, the daemon as
their reaper), is `agentrio.engine.processes.groups`.

stdout and stderr are merged into one pipe and read as they arrive: every chunk goes to
``on_output`` in order (leg logs, watchers), while the kept output is bounded to
``keep_bytes`` (its head and tail), so a command printing 200 MB runs in bounded memory.
Nothing here blocks the Trio thread: waiting for the leader goes through
`trio.Process.wait`, reading through the pipe's stream, and the ``/proc`` reads through
a worker thread.
"""

from __future__ import annotations

import fcntl
import math
import subprocess
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Final

import attrs
import trio

from agentrio.engine.nursery_tasks import cancel_scope
from agentrio.engine.processes.groups import end_group
from agentrio.engine.processes.output import ClampedOutput
from agentrio.engine.processes.tracking import group_ended, group_started
from agentrio.protocol.causes import Cause
from agentrio.protocol.groups import sole_exception

__all__ = ["DRAIN_IDLE_S", "DRAIN_MAX_S", "CommandResult", "run_in_group"]

DRAIN_IDLE_S: Final = 0.2
"""After the leader exits, stop reading once the pipe has been quiet this long."""
DRAIN_MAX_S: Final = 1.0
"""After the leader exits, stop reading after this long even if output keeps coming."""
_CLEANUP_EXTRA_S: Final = 2.0
#: Output reads ask for this much at first and after a small read, and at most this much.
_READ_MIN_BYTES: Final = 64 * 1024
_READ_MAX_BYTES: Final = 1024 * 1024
#: The size a busy output pipe grows to (Linux's default limit for unprivileged users).
_PIPE_BYTES: Final = 1024 * 1024
#: After a read that took a busy pipe's content (at least `_PACE_MIN_BYTES`, less than
#: asked), the next read waits until this long after it (`_Reader`).
_PACE_S: Final = 0.001
_PACE_MIN_BYTES: Final = 4 * 1024
_SHELL: Final = "/bin/sh"


@attrs.frozen
class CommandResult:
    """How a command ended and what it printed.

    ``exit_code`` is None when the leader was killed by a signal (then ``signal`` names
    it). ``output`` is stdout and stderr merged, decoded as UTF-8 (invalid bytes
    replaced), clamped to its head and tail like `agentrio.engine.snapshot.clamp` does;
    ``output_bytes`` counts every byte the command produced, clamped or not.
    ``timed_out`` is True when ``timeout_s`` ran out before the leader exited.
    """

    exit_code: int | None
    signal: int | None
    output: str
    output_bytes: int
    timed_out: bool
    duration_s: float


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


def _pipe_size(fd: int | None) -> int | None:
    """How much the pipe behind ``fd`` holds now (Linux), else None.

    A user over ``pipe-user-pages-soft`` (a whole suite's daemons, or many busy commands
    at once) gets new pipes of a page or two, so "a read came back with 64 KiB" would
    never say that such a pipe is full: the reader compares with what it holds."""
    getsize = getattr(fcntl, "F_GETPIPE_SZ", None)
    if fd is None or getsize is None:
        return None
    try:
        return int(fcntl.fcntl(fd, getsize))
    except OSError:
        return None


class _Reader:
    """Reads the merged output pipe; after the leader exits, only while it keeps flowing.

    Each receive runs in its own cancel scope so that `leader_exited` can put a deadline
    on the receive in progress; ``on_output`` itself is never interrupted by the drain
    deadline (only by a cancel of the whole run).

    A command that prints faster than its output is consumed keeps the pipe full, and a
    64 KiB pipe then costs one wake-up, one read and one ``on_output`` round per 64 KiB.
    So the first read that comes back full (all it asked for, or all the pipe holds when
    the kernel made it smaller than that) grows the pipe to `_PIPE_BYTES` (1 MiB;
    quiet commands keep the default size, so a thousand idle commands pin no kernel
    memory), and each read asks for up to twice what the last one returned, between
    `_READ_MIN_BYTES` and `_READ_MAX_BYTES`. And a reader that keeps up with a fast
    command would still take each of its writes on its own (a wake-up, a watcher pass
    and a log write per few dozen KiB): after a read that found a busy pipe (at least
    `_PACE_MIN_BYTES`, but not all it asked for), the next one waits until `_PACE_S`
    after it, while the pipe fills -- a 1 MiB pipe holds more than a millisecond of
    even a fast command, so the command is not held up, and a quiet one's lines are
    read at once as before. The chunks handed on are the same bytes in the same order,
    only fewer and larger.
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
        self._pipe_bytes = _pipe_size(pipe_fd)
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

    def _filled_pipe(self, read: int) -> bool:
        if read == self._read_bytes:
            return True
        return self._pipe_bytes is not None and read >= self._pipe_bytes

    async def run(self) -> None:
        while True:
            asked = self._read_bytes
            with trio.CancelScope(deadline=self._drain_deadline()) as scope:
                self._receive_scope = scope
                # bytes() of a bytes object is the object itself: no copy.
                chunk = bytes(await self._stream.receive_some(asked))
            self._receive_scope = None
            if scope.cancelled_caught or not chunk:
                return
            read_at = trio.current_time()
            if self._pipe_fd is not None and self._filled_pipe(len(chunk)):
                _grow_pipe(self._pipe_fd)
                self._pipe_fd = None
            self._read_bytes = max(_READ_MIN_BYTES, min(2 * len(chunk), _READ_MAX_BYTES))
            self._keeper.add(chunk)
            if self._on_output is not None:
                await self._on_output(chunk)
            busy = _PACE_MIN_BYTES <= len(chunk) < asked
            del chunk  # not held while the next read allocates its buffer
            if busy:
                await trio.sleep_until(read_at + _PACE_S)


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
    pass_fds: Sequence[int] = (),
) -> CommandResult:
    """Run a command as the leader of a new process group and end the whole group (R48).

    A string runs through ``/bin/sh -c``; a list runs as argv. ``env`` replaces the
    environment (None inherits the daemon's). Without ``stdin`` bytes the child reads
    from ``/dev/null``, never from the daemon's terminal. ``on_output`` receives every
    chunk of merged stdout/stderr in order; an exception from it ends the group and
    propagates. ``pass_fds`` stay open in the child (the sandbox's working directory).

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
        pass_fds=tuple(pass_fds),
    )
    pgid = process.pid
    group_started(pgid)  # a stop's receipt names it (`agentrio.engine.stops`)
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
                await end_group(process, pgid, kill_grace_s)
            group_ended(pgid)
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
