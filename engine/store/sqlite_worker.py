"""The SQLite store's one connection, driven by one worker thread, with group commit.

Every call goes through ``trio.to_thread.run_sync(..., limiter=CapacityLimiter(1))``, so
the Trio thread never blocks on disk and the connection (opened with
``check_same_thread=False``) is only ever used by one thread at a time. A call that
already runs in the worker is not abandoned when its caller is cancelled: a transaction
is never left half done.

Writes are group-committed (`SqliteWorker.write`): writes that arrive while a batch is
in the worker wait, and the next batch takes them all in one ``BEGIN IMMEDIATE``, each
inside its own ``SAVEPOINT`` so a failing one is rolled back alone.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from functools import partial
from typing import Any, Final, TypeVar

import attrs
import outcome
import trio

from agentrio.engine.store.base import StoreError, StoreFull
from agentrio.engine.store.sqlite_reader import RuleCache, TrioReader

__all__ = ["MAX_BATCH", "SqliteWorker", "store_error"]

T = TypeVar("T")

#: Most writes committed in one transaction (bounds how long the write lock is held).
MAX_BATCH: Final = 256


@attrs.define(eq=False)
class _QueuedWrite:
    """One write waiting for (or in) a group commit; ``result`` set by the worker."""

    op: str
    fn: Callable[[sqlite3.Connection], Any]
    turn: trio.Event = attrs.field(factory=trio.Event)
    result: outcome.Outcome[Any] | None = None


def store_error(op: str, exc: sqlite3.Error) -> StoreError:
    """The `StoreError` for a backend error of operation ``op``: `StoreFull` when the
    disk is full (SQLite's ``SQLITE_FULL``, which it also gives for ``ENOSPC``), so
    callers can answer 503 rather than 500."""
    message = f"store {op} failed: {exc}"
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None and code & 0xFF == sqlite3.SQLITE_FULL:
        return StoreFull(f"{message} (the disk holding the store is full)")
    return StoreError(message)


def _batch_transaction(batch: list[_QueuedWrite], conn: sqlite3.Connection) -> None:
    """Worker side of a group commit: each write in a savepoint, one commit for all.

    A write that raises is rolled back to its savepoint and gets its exception (a
    backend error as `StoreError` naming its operation); the others still commit.
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        for write in batch:
            conn.execute("SAVEPOINT write")
            try:
                value = write.fn(conn)
            except Exception as exc:
                conn.execute("ROLLBACK TO write")
                conn.execute("RELEASE write")
                if isinstance(exc, sqlite3.Error):
                    exc = store_error(write.op, exc)
                write.result = outcome.Error(exc)
            else:
                conn.execute("RELEASE write")
                write.result = outcome.Value(value)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def _whole_batch_failed(op: str, exc: BaseException) -> BaseException:
    """The exception one write of a batch gets when the batch itself failed: its own
    object (each waiting caller raises and chains its own), naming its operation."""
    if isinstance(exc, sqlite3.Error):
        return store_error(op, exc)
    if isinstance(exc, trio.ClosedResourceError):
        return trio.ClosedResourceError(str(exc))
    return StoreError(f"store {op} failed: {type(exc).__name__}: {exc}")


class SqliteWorker:
    """One open connection: reads (`run`) and group-committed writes (`write`).

    ``inline=True`` runs every call on the Trio thread instead of the worker thread
    (tests under a mock clock, see `agentrio.engine.store.sqlite.SqliteStore.open`).
    """

    def __init__(self, conn: sqlite3.Connection, *, inline: bool = False) -> None:
        self._conn: sqlite3.Connection | None = conn
        self._limiter = trio.CapacityLimiter(1)
        self._queue: list[_QueuedWrite] = []
        self._batch_running = False
        self.inline = inline
        self._reader = TrioReader(self._path)
        #: The rules table as last read (`agentrio.engine.store.sqlite_rules`).
        self.rules = RuleCache()
        #: Writes committed since the connection was opened, and the batches they took.
        self.writes = 0
        self.batches = 0

    @property
    def closed(self) -> bool:
        return self._conn is None

    async def run(self, op: str, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn(conn)`` in the worker; translate backend errors (no values in them)."""
        try:
            return await self.run_raw(fn)
        except sqlite3.Error as exc:
            raise store_error(op, exc) from None

    async def read_here(self, op: str, fn: Callable[[sqlite3.Connection], T]) -> T:
        """A small read on the Trio thread (`TrioReader`: never waits; busy, the worker
        reads). Only for reads cheaper than a thread hop, on a hot path."""
        if self.inline:
            return await self.run(op, fn)
        try:
            return await self._reader.read(fn, partial(self.run, op))
        except sqlite3.Error as exc:
            raise store_error(op, exc) from None

    def read_now(self, op: str, fn: Callable[[sqlite3.Connection], T]) -> T | None:
        """A tiny read on the Trio thread with no checkpoint: ``fn`` of the connection
        that never waits (inline: the one connection); None when it cannot answer at
        once (not open yet, busy). Only for a check whose caller checkpoints next."""
        try:
            if self.inline:
                return None if self._conn is None else fn(self._conn)
            return self._reader.read_now(fn)
        except sqlite3.Error as exc:
            raise store_error(op, exc) from None

    async def _path(self) -> str:
        def path(conn: sqlite3.Connection) -> str:
            return str(conn.execute("PRAGMA database_list").fetchone()["file"] or "")

        return await self.run("read_here", path)

    async def run_raw(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        def call() -> T:
            conn = self._conn
            if conn is None:
                raise trio.ClosedResourceError("the store is closed")
            return fn(conn)

        if self.inline:
            await trio.lowlevel.checkpoint()
            return call()
        return await trio.to_thread.run_sync(call, limiter=self._limiter)

    async def write(self, op: str, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn(conn)`` as one all-or-nothing write, committed before this returns.

        Writes that arrive while another batch is in the worker queue up and are then
        committed together (group commit): one ``BEGIN IMMEDIATE`` … ``COMMIT`` and one
        thread hop for the whole batch, each write inside its own ``SAVEPOINT`` so a
        failing one (a claim's `Conflict`, a constraint) is rolled back alone. Under
        load this turns thousands of tasks' row and marker writes into a few hundred
        transactions; a lone write costs what it did before. The first queued writer
        leads the next batch; waiting is shielded because a queued write will be
        committed whatever happens to its caller (as a write already in the worker
        always was).
        """
        write = _QueuedWrite(op, fn)
        self._queue.append(write)
        with trio.CancelScope(shield=True):
            if self._batch_running:
                await write.turn.wait()
            if write.result is None:  # this write leads the next batch
                await self._run_batch()
        assert write.result is not None
        return write.result.unwrap()  # type: ignore[no-any-return]

    async def _run_batch(self) -> None:
        """Commit the queued writes (up to `MAX_BATCH`), then hand over to the next."""
        self._batch_running = True
        batch, self._queue = self._queue[:MAX_BATCH], self._queue[MAX_BATCH:]
        try:
            await self.run_raw(partial(_batch_transaction, batch))
            self.writes += sum(isinstance(write.result, outcome.Value) for write in batch)
            self.batches += 1
        except BaseException as exc:  # BEGIN or COMMIT failed: none of them was written
            for write in batch:
                write.result = outcome.Error(_whole_batch_failed(write.op, exc))
            if not isinstance(exc, Exception):
                raise
        finally:
            for write in batch:
                write.turn.set()
            if self._queue:
                self._queue[0].turn.set()  # its owner wakes with no result: it leads
            else:
                self._batch_running = False

    # -- pending tasks -------------------------------------------------------------

    async def close(self) -> None:
        """Close the connection once a call already in the worker has finished;
        idempotent, and it completes even when cancelled."""
        with trio.CancelScope(shield=True):
            self._reader.close()
            conn, self._conn = self._conn, None
            if conn is not None:
                await trio.to_thread.run_sync(conn.close, limiter=self._limiter)
