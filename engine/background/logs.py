"""A command leg's log file (R23): its output appended as it comes, in bounded memory.

The log is ``<home>/sessions/<session>/background/<leg id>.log``, created 0600 when the
leg starts and removed when it ends (`agentrio.engine.background.command_leg`).

**Capped** at ``[background] max_log_bytes`` (R81): past it the log keeps its first half
(the head) and a rolling tail, joined by one marker line saying how many bytes were
elided (`CappedLog`); the watcher sees every byte regardless, so it keeps watching.
"""

from __future__ import annotations

import errno
import fcntl
import os
from collections.abc import Iterable
from pathlib import Path
from typing import BinaryIO, Final, Protocol

import trio

from agentrio.engine.store.files import open_private

__all__ = [
    "DEFAULT_MAX_LOG_BYTES",
    "LOG_BUFFER_BYTES",
    "CappedLog",
    "LogWriter",
    "elision_marker",
    "open_log",
]

#: A leg's output waiting for its log file, at most (`LogWriter`).
LOG_BUFFER_BYTES: Final = 4 * 1024 * 1024
#: ``[background] max_log_bytes`` default.
DEFAULT_MAX_LOG_BYTES: Final = 64 * 1024 * 1024


def elision_marker(elided: int) -> bytes:
    """The line between a capped log's head and tail; fixed width, so rewriting it
    with a larger count never moves the tail."""
    return f"\n[agentrio: {elided:020d} bytes of output elided here]\n".encode()


_MARKER_BYTES: Final = len(elision_marker(0))
#: What `_move_back` copies through user space at once where the kernel cannot copy.
_MOVE_BYTES: Final = 4 * 1024 * 1024
#: copy_file_range's ways of saying this file system or kernel does not do it.
_NO_KERNEL_COPY: Final = frozenset(
    {errno.EXDEV, errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.EBADF}
)


def open_log(path: Path) -> BinaryIO:
    """Blocking: open a leg's log for appending, created 0600 (command output); read
    access too, so `CappedLog` can keep its tail."""
    fd = open_private(path, os.O_RDWR | os.O_APPEND)
    try:
        return os.fdopen(fd, "ab")
    except BaseException:
        os.close(fd)
        raise


class _Appendable(Protocol):
    def writelines(self, lines: Iterable[bytes], /) -> object: ...

    def flush(self) -> object: ...

    def fileno(self) -> int: ...


class CappedLog:
    """Blocking (run in a worker thread): appends to a log that never passes
    ``max_bytes``.

    Below the cap chunks are appended as they are. Once the next batch would pass it,
    the file becomes: the first ``max_bytes // 2`` bytes as they were written, the
    `elision_marker` with the count of bytes dropped so far, and the latest output —
    half the tail room, so the next compaction is that far away (about two bytes
    written per byte of output, and never more than ``max_bytes`` on disk). The part of
    the old tail that stays is moved inside the file by the kernel (`_move_back`),
    never read into the daemon.
    """

    def __init__(self, file: _Appendable, max_bytes: int) -> None:
        self._file = file
        self._max = max_bytes
        self._head = max_bytes // 2
        self._tail_room = max(1, max_bytes - self._head - _MARKER_BYTES)
        self.size = 0
        self.elided = 0

    def append(self, chunks: list[bytes]) -> None:
        incoming = sum(map(len, chunks))
        if self.size + incoming <= self._max:
            self._file.writelines(chunks)
            self._file.flush()
            self.size += incoming
            return
        self._compact(chunks, incoming)

    def _compact(self, chunks: list[bytes], incoming: int) -> None:
        self._file.flush()
        fd = self._file.fileno()
        if self.size < self._head:  # fill the head first
            room = self._head - self.size
            first = b"".join(chunks)
            os.write(fd, first[:room])
            self.size += min(room, len(first))
            chunks, incoming = [first[room:]], max(0, len(first) - room)
        tail_start = self._head + (_MARKER_BYTES if self.elided else 0)
        keep = min(self._tail_room // 2 or 1, self.size - tail_start + incoming)
        new = b"".join(chunks)[-keep:] if keep else b""
        old_needed = keep - len(new)
        self.elided += self.size - tail_start + incoming - keep
        old_start = self._head + _MARKER_BYTES
        # Written at offsets, so not in append mode (where pwrite appends and the
        # kernel refuses copy_file_range) until the log is whole again.
        flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        fcntl.fcntl(fd, fcntl.F_SETFL, flags & ~os.O_APPEND)
        try:
            # The kept old tail lies past the marker's place (at least half the tail
            # room further on), so writing the marker first overwrites none of it.
            _write_at(fd, elision_marker(self.elided), self._head)
            if old_needed > 0:
                _move_back(fd, self.size - old_needed, old_start, old_needed)
            os.ftruncate(fd, old_start + old_needed)
            _write_at(fd, new, old_start + old_needed)
        finally:
            fcntl.fcntl(fd, fcntl.F_SETFL, flags)
        self.size = old_start + old_needed + len(new)


def _write_at(fd: int, data: bytes, offset: int) -> None:
    """All of ``data`` at ``offset`` (a write may take only part)."""
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, offset)
        view, offset = view[written:], offset + written


def _move_back(fd: int, source: int, target: int, size: int) -> None:
    """Copy ``size`` bytes of the file from ``source`` to ``target`` (before it), front
    to back in steps that never overlap -- so each step reads only bytes not yet
    overwritten. In the kernel (copy_file_range: no copy through the daemon) where the
    file system allows, else read and written back in `_MOVE_BYTES` pieces."""
    step = source - target
    assert step > 0, (source, target)
    done = 0
    while done < size:
        count = min(size - done, step, _MOVE_BYTES)
        try:
            moved = os.copy_file_range(fd, fd, count, source + done, target + done)
        except OSError as exc:
            if exc.errno not in _NO_KERNEL_COPY:
                raise
            moved = 0
        if moved <= 0:
            piece = os.pread(fd, count, source + done)
            if not piece:
                raise OSError(errno.EIO, "leg log shorter than written")
            _write_at(fd, piece, target + done)
            moved = len(piece)
        done += moved


class LogWriter:
    """Appends a leg's output to its log file without one thread hop per chunk.

    `append` queues a chunk; `run` writes everything queued while its previous write was
    in its thread (one hop, one flush), so a quiet leg's lines reach the file at once and
    a chatty leg's many reads become a few large writes. Chunks are written as they
    came, never copied into one buffer.

    Back-pressure: while ``limit`` bytes are queued, `append` waits for `run` to take
    them, so a disk slower than the command holds up the output reading (and, once the
    pipe is full, the command) instead of memory growing: at most about twice ``limit``
    plus a chunk is held. What is queued when `run` is cancelled is dropped with the log
    (the file is removed when the leg ends, R23).
    """

    def __init__(
        self,
        file: _Appendable,
        *,
        limit: int = LOG_BUFFER_BYTES,
        max_bytes: int = DEFAULT_MAX_LOG_BYTES,
    ) -> None:
        self._file = file
        self._log = CappedLog(file, max_bytes)
        self._limit = limit
        self._chunks: list[bytes] = []
        self._queued = 0
        self._ready = trio.Event()
        self._taken = trio.Event()

    @property
    def queued_bytes(self) -> int:
        return self._queued

    async def append(self, chunk: bytes) -> None:
        while self._queued >= self._limit:
            await self._taken.wait()
        self._chunks.append(chunk)
        self._queued += len(chunk)
        self._ready.set()

    async def run(self) -> None:
        while True:
            await self._ready.wait()
            self._ready = trio.Event()
            chunks, self._chunks, self._queued = self._chunks, [], 0
            taken, self._taken = self._taken, trio.Event()
            taken.set()
            await trio.to_thread.run_sync(self._log.append, chunks)
