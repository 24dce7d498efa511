"""A command leg's log file (R23): its output appended as it comes, in bounded memory.

The log is ``<home>/sessions/<session>/background/<leg id>.log``, created 0600 when the
leg starts and removed when it ends (`engine.background.command_leg`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import BinaryIO, Final, Protocol

import trio

from engine.store.files import open_private

__all__ = ["LOG_BUFFER_BYTES", "LogWriter", "open_log"]

#: A leg's output waiting for its log file, at most (`LogWriter`).
LOG_BUFFER_BYTES: Final = 4 * 1024 * 1024


def open_log(path: Path) -> BinaryIO:
    """Blocking: open a leg's log for appending, created 0600 (command output)."""
    fd = open_private(path, os.O_WRONLY | os.O_APPEND)
    try:
        return os.fdopen(fd, "ab")
    except BaseException:
        os.close(fd)
        raise


class _Appendable(Protocol):
    def writelines(self, lines: Iterable[bytes], /) -> object: ...

    def flush(self) -> object: ...


def _append(file: _Appendable, chunks: list[bytes]) -> None:
    """Blocking: write ``chunks`` in order and push them to the file."""
    file.writelines(chunks)
    file.flush()


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

    def __init__(self, file: _Appendable, *, limit: int = LOG_BUFFER_BYTES) -> None:
        self._file = file
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
            await trio.to_thread.run_sync(_append, self._file, chunks)
