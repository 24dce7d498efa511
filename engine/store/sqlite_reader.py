"""The one read of the SQLite store on a hot path: whether the home's rules may have
changed, asked before every call that would otherwise ask (issue 32 §3, B16).

The rules are kept in memory (`RuleCache`, filled by
`agentrio.engine.store.sqlite_rules`), emptied by this store's own rule writes; what
only SQLite knows is whether *another* connection committed since -- another process
on the same file. `rules_stamp` asks it: ``PRAGMA data_version`` changes whenever a
connection other than the asking one commits, and in WAL mode it reads the shared
memory index, never the disk. A worker-thread hop costs far more than that (on a
loaded machine the worker waits for a CPU, then for the GIL), so `TrioReader` asks it
on the Trio thread, with a read-only connection of its own that **never waits**: its
busy timeout is 0, and a read that finds the file busy (or a reader that cannot open)
is left to the worker, which waits as every read does. The stamp names the
connection that answered, so versions of two connections are never compared.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable
from typing import TypeVar

import attrs
import trio

from agentrio.protocol.rules import AllowedRule

__all__ = ["RuleCache", "TrioReader", "rules_stamp"]

T = TypeVar("T")


@attrs.define(eq=False)
class RuleCache:
    """The rules as last read, and the connection and ``data_version`` they were read
    at (module docstring); ``stamp`` None: nothing kept."""

    stamp: tuple[int, int] | None = None
    rules: tuple[AllowedRule, ...] = ()

    def get(self, stamp: tuple[int, int] | None) -> list[AllowedRule] | None:
        if stamp is None or stamp != self.stamp:
            return None
        return list(self.rules)

    def keep(self, stamp: tuple[int, int], rules: list[AllowedRule]) -> None:
        self.stamp, self.rules = stamp, tuple(rules)

    def clear(self) -> None:
        self.stamp, self.rules = None, ()


def rules_stamp(conn: sqlite3.Connection) -> tuple[int, int]:
    """Which connection answers, and its ``data_version`` (changed by any other
    connection's commit since this one last asked)."""
    return id(conn), int(conn.execute("PRAGMA data_version").fetchone()[0])


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
        if self._conn is None:
            return await fallback(fn)
        await trio.lowlevel.checkpoint()
        found = self.read_now(fn)
        if found is None:
            return await fallback(fn)  # the worker waits for the lock, as reads do
        return found

    def read_now(self, fn: Callable[[sqlite3.Connection], T]) -> T | None:
        """``fn(conn)`` at once, without a checkpoint; None when this reader is not
        open (yet) or the file is busy (``fn`` must not return None)."""
        conn = self._conn
        if conn is None:
            return None
        try:
            return fn(conn)
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise
            return None

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
