"""A read of the SQLite store on the Trio thread, for the one read on a hot path: the
home's rules, read before every call that would otherwise ask (issue 32 §3, B16).

A worker-thread hop costs more than that read (a few rows of a small table): on a
loaded machine the worker must wait for a CPU, then for the GIL, on every MCP call.
So `TrioReader` keeps a read-only connection of its own, used only from the Trio
thread, that **never waits**: its busy timeout is 0, and a read that finds the file
busy (or a reader that cannot open) is left to the worker, which waits as every read
does. The rules are still read from the store on every call: a rule forgotten by this
daemon or by another process on the same file stops covering at once (a cache would
not know).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable
from typing import TypeVar

import trio

__all__ = ["TrioReader"]

T = TypeVar("T")


class TrioReader:
    """Reads on the Trio thread with a connection that never waits (module docstring);
    ``fallback`` is the worker's read, used when this one cannot answer at once."""

    def __init__(self, locate: Callable[[], Awaitable[str]]) -> None:
        #: The database file's path, asked of the worker's connection once.
        self._locate = locate
        self._conn: sqlite3.Connection | None = None
        self._opened = False

    async def read(
        self,
        fn: Callable[[sqlite3.Connection], T],
        fallback: Callable[[Callable[[sqlite3.Connection], T]], Awaitable[T]],
    ) -> T:
        """``fn(conn)`` here, or through ``fallback`` when busy or not open."""
        if not self._opened:
            self._opened = True
            self._conn = await _open(await self._locate())
        conn = self._conn
        if conn is None:
            return await fallback(fn)
        await trio.lowlevel.checkpoint()
        try:
            return fn(conn)
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise
            return await fallback(fn)  # the worker waits for the lock, as reads do

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()


async def _open(path: str) -> sqlite3.Connection | None:
    """A read-only connection to ``path`` with busy timeout 0, or None (the worker then
    does every read: an in-memory database, a file it cannot open)."""
    if not path:
        return None

    def connect() -> sqlite3.Connection | None:
        try:
            conn = sqlite3.connect(
                f"file:{path}?mode=ro",
                uri=True,
                timeout=0,
                isolation_level=None,
                check_same_thread=False,
            )
        except sqlite3.Error:
            return None
        conn.row_factory = sqlite3.Row
        return conn

    return await trio.to_thread.run_sync(connect)
