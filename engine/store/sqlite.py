"""The embedded store: one SQLite file in WAL mode, driven by one worker thread.

Why this shape:

- **One connection, one worker at a time.** Every call goes through
  ``trio.to_thread.run_sync(..., limiter=CapacityLimiter(1))``, so the Trio thread never
  blocks on disk and the connection (opened with ``check_same_thread=False``) is only
  ever used by one thread at a time. A call that already runs in the worker is not
  abandoned when its caller is cancelled: a transaction is never left half done.
- **Every write is all or nothing** inside a ``BEGIN IMMEDIATE`` transaction, which takes
  SQLite's write lock up front. That lock is what makes `SqliteStore.claim` an atomic
  compare-and-set across OS processes sharing the file (R37): the check and the update
  happen while no other writer can run. The busy timeout (30 s) makes a loser wait for
  the lock rather than fail, and then see the winner's marker. Concurrent writes are
  group-committed: one transaction, each write in its own savepoint (`SqliteStore._write`).
- **WAL with** ``synchronous=NORMAL``: a committed transaction survives the process
  being killed at any moment (only a power loss can drop the last commits), and a
  reader never sees half a write (R72).
- **0600**: the file holds secrets (R60), so it is created owner-only, and its mode is
  forced back to 0600 on every open; SQLite gives the ``-wal`` and ``-shm`` files it
  creates the same mode as the database file, and existing ones are tightened on open
  too (`engine.store.files`, issue 15 item 6). A missing folder is made 0700.
- **No secret in an error** (R73): backend failures become `StoreError` carrying the
  operation's name and SQLite's own message, which never quotes bound values.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any, Final, TypeVar

import attrs
import outcome
import trio

from engine.errors import BadRequest, Conflict, NotFound
from engine.messages import CONFLICT_RUNNING
from engine.store.base import (
    HistoryRow,
    StoreError,
    StoreStatistics,
    TaskRow,
    marker_key,
)
from engine.store.files import make_private_dirs, open_private
from protocol.codec import structure, unstructure
from protocol.events import Question

__all__ = [
    "AUTOCHECKPOINT_PAGES",
    "BUSY_TIMEOUT",
    "CHECKPOINT_INTERVAL_S",
    "MAX_BATCH",
    "SCHEMA_VERSION",
    "SqliteStore",
    "open_sqlite_store",
    "open_store",
]

T = TypeVar("T")

log = logging.getLogger(__name__)

#: ``PRAGMA user_version`` of the schema below.
SCHEMA_VERSION: Final = 1
#: Seconds a writer waits for another process's write lock before giving up.
BUSY_TIMEOUT: Final = 30.0

_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS tasks (
    session_id   TEXT NOT NULL,
    task_hash    TEXT NOT NULL,
    state        TEXT NOT NULL CHECK (state IN ('running', 'parked', 'interrupted')),
    objective    TEXT NOT NULL,
    origin       TEXT NOT NULL,
    model        TEXT NOT NULL,
    created_at   REAL NOT NULL,
    updated_at   REAL NOT NULL,
    snapshot     TEXT,
    questions    TEXT NOT NULL,
    has_jobs     INTEGER NOT NULL,
    ask_id       TEXT,
    resumed_from TEXT,
    PRIMARY KEY (session_id, task_hash)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS markers (
    key        TEXT PRIMARY KEY,
    expires_at REAL NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS history (
    session_id TEXT NOT NULL,
    task_hash  TEXT NOT NULL,
    end_at     REAL NOT NULL,
    objective  TEXT NOT NULL,
    model      TEXT NOT NULL,
    reasoning  TEXT NOT NULL,
    status     TEXT NOT NULL CHECK (status IN ('finished', 'failed', 'canceled')),
    content    TEXT NOT NULL,
    UNIQUE (session_id, task_hash)
);
CREATE INDEX IF NOT EXISTS history_by_end ON history (session_id, end_at);
CREATE TABLE IF NOT EXISTS secrets (
    session_id TEXT NOT NULL,
    key        TEXT NOT NULL,
    value      TEXT NOT NULL,
    PRIMARY KEY (session_id, key)
) WITHOUT ROWID;
"""

_TASK_COLUMNS: Final = (
    "session_id, task_hash, state, objective, origin, model, created_at, updated_at, "
    "snapshot, questions, has_jobs, ask_id, resumed_from"
)
_HISTORY_COLUMNS: Final = (
    "session_id, task_hash, end_at, objective, model, reasoning, status, content"
)


def _contains_casefold(haystack: str | None, needle: str | None) -> int:
    """SQL function ``contains_casefold(a, b)``: Unicode-aware, unlike SQLite's
    ``lower()`` which folds ASCII only."""
    if haystack is None or needle is None:
        return 0
    return int(needle.casefold() in haystack.casefold())


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _task_params(row: TaskRow) -> tuple[Any, ...]:
    return (
        row.session_id,
        row.task_hash,
        row.state,
        row.objective,
        row.origin,
        row.model,
        row.created_at,
        row.updated_at,
        None if row.snapshot is None else _dumps(row.snapshot),
        _dumps(unstructure(row.questions)),
        int(row.has_jobs),
        row.ask_id,
        row.resumed_from,
    )


def _task_row(r: sqlite3.Row) -> TaskRow:
    questions: list[Question] = structure(json.loads(r["questions"]), list[Question])
    return TaskRow(
        session_id=r["session_id"],
        task_hash=r["task_hash"],
        state=r["state"],
        objective=r["objective"],
        origin=r["origin"],
        model=r["model"],
        created_at=r["created_at"],
        updated_at=r["updated_at"],
        snapshot=None if r["snapshot"] is None else json.loads(r["snapshot"]),
        questions=questions,
        has_jobs=bool(r["has_jobs"]),
        ask_id=r["ask_id"],
        resumed_from=r["resumed_from"],
    )


def _history_row(r: sqlite3.Row) -> HistoryRow:
    return HistoryRow(
        session_id=r["session_id"],
        task_hash=r["task_hash"],
        end_at=r["end_at"],
        objective=r["objective"],
        model=r["model"],
        reasoning=r["reasoning"],
        status=r["status"],
        content=r["content"],
    )


def _connect(path: Path) -> sqlite3.Connection:
    """Open (creating if needed) the file 0600, set the pragmas, create the schema.

    Runs in a worker thread. Two processes opening a fresh file at once are fine: the
    busy timeout is set before anything takes a lock, and the schema is created
    inside ``BEGIN IMMEDIATE`` with ``IF NOT EXISTS``.
    """
    make_private_dirs(path.parent)
    os.close(open_private(path, os.O_RDWR))
    for side in (f"{path.name}-wal", f"{path.name}-shm"):
        # SQLite reuses an existing side file as it is: one left group- or world-readable
        # (by an older version) would leak recent writes.
        try:
            os.close(open_private(path.with_name(side), os.O_RDONLY, create=False))
        except FileNotFoundError:
            pass
    conn = sqlite3.connect(
        path, timeout=BUSY_TIMEOUT, isolation_level=None, check_same_thread=False
    )
    try:
        conn.row_factory = sqlite3.Row
        conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT * 1000)}")
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise StoreError(f"cannot put {path.name} in WAL mode (got {mode})")
        conn.execute("PRAGMA synchronous = NORMAL")
        # `SqliteStore.maintain` checkpoints off the write path; this is the safety net
        # when it does not run (a checkpoint inside a commit costs that write ~15 ms).
        conn.execute(f"PRAGMA wal_autocheckpoint = {AUTOCHECKPOINT_PAGES}")
        conn.create_function("contains_casefold", 2, _contains_casefold, deterministic=True)
        conn.execute("BEGIN IMMEDIATE")
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise StoreError(
                    f"{path.name} has schema version {version}, newer than this agentrio "
                    f"understands ({SCHEMA_VERSION})"
                )
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
    except BaseException:
        conn.close()
        raise
    return conn


#: Seconds between `SqliteStore.maintain`'s checkpoints (when something was written).
CHECKPOINT_INTERVAL_S: Final = 1.0
#: Pages in the WAL before a commit checkpoints by itself (SQLite's default: 1,000).
AUTOCHECKPOINT_PAGES: Final = 20_000

#: Most writes committed in one transaction (bounds how long the write lock is held).
MAX_BATCH: Final = 256


@attrs.define(eq=False)
class _QueuedWrite:
    """One write waiting for (or in) a group commit; ``result`` set by the worker."""

    op: str
    fn: Callable[[sqlite3.Connection], Any]
    turn: trio.Event = attrs.field(factory=trio.Event)
    result: outcome.Outcome[Any] | None = None


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
                    exc = StoreError(f"store {write.op} failed: {exc}")
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
        return StoreError(f"store {op} failed: {exc}")
    if isinstance(exc, trio.ClosedResourceError):
        return trio.ClosedResourceError(str(exc))
    return StoreError(f"store {op} failed: {type(exc).__name__}: {exc}")


def _put_task_row(conn: sqlite3.Connection, params: tuple[Any, ...]) -> None:
    conn.execute(
        f"INSERT OR REPLACE INTO tasks ({_TASK_COLUMNS}) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        params,
    )


def _set_marker(conn: sqlite3.Connection, key: str, expires_at: float) -> None:
    conn.execute(
        "INSERT OR REPLACE INTO markers (key, expires_at) VALUES (?, ?)", (key, expires_at)
    )


def _history_params(row: HistoryRow) -> tuple[Any, ...]:
    return (
        row.session_id,
        row.task_hash,
        row.end_at,
        row.objective,
        row.model,
        row.reasoning,
        row.status,
        row.content,
    )


def _add_history_row(conn: sqlite3.Connection, params: tuple[Any, ...]) -> None:
    conn.execute(
        f"INSERT OR REPLACE INTO history ({_HISTORY_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        params,
    )
    # One transaction with the history row: see `Store.add_history` (R72).
    conn.execute("DELETE FROM tasks WHERE session_id = ? AND task_hash = ?", params[:2])


class SqliteStore:
    """The SQLite implementation of `engine.store.base.Store`.

    Open it with ``await SqliteStore.open(path)``, `open_sqlite_store` or the async
    context manager `open_store`; close it with `aclose`.
    """

    def __init__(self, path: Path, conn: sqlite3.Connection, *, inline: bool = False) -> None:
        """Wrap an open connection; use `open` rather than calling this directly."""
        self._path = path
        self._conn: sqlite3.Connection | None = conn
        self._limiter = trio.CapacityLimiter(1)
        self._writes = 0
        self._batches = 0
        self._queue: list[_QueuedWrite] = []
        self._batch_running = False
        self._inline = inline

    @classmethod
    async def open(cls, path: Path | str, *, inline: bool = False) -> SqliteStore:
        """Open (creating if needed) the store file at ``path``.

        ``inline=True`` runs every call on the Trio thread instead of the worker
        thread. It is for tests under `trio.testing.MockClock`: an autojumping clock
        sees a task waiting on a thread as idle and jumps, so a 60 s TTL could pass
        during one store write. Never use it in the daemon: it blocks the event loop.
        """
        path = Path(path)
        try:
            conn = _connect(path) if inline else await trio.to_thread.run_sync(_connect, path)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open store {path.name}: {exc}") from None
        return cls(path, conn, inline=inline)

    @property
    def path(self) -> Path:
        return self._path

    def __repr__(self) -> str:
        state = "closed" if self._conn is None else "open"
        return f"<SqliteStore {str(self._path)!r} {state}>"

    # -- the worker ----------------------------------------------------------------

    async def _run(self, op: str, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn(conn)`` in the worker; translate backend errors (no values in them)."""
        try:
            return await self._run_raw(fn)
        except sqlite3.Error as exc:
            raise StoreError(f"store {op} failed: {exc}") from None

    async def _run_raw(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        def call() -> T:
            conn = self._conn
            if conn is None:
                raise trio.ClosedResourceError("the store is closed")
            return fn(conn)

        if self._inline:
            await trio.lowlevel.checkpoint()
            return call()
        return await trio.to_thread.run_sync(call, limiter=self._limiter)

    async def _write(self, op: str, fn: Callable[[sqlite3.Connection], T]) -> T:
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
            await self._run_raw(partial(_batch_transaction, batch))
            self._writes += sum(isinstance(write.result, outcome.Value) for write in batch)
            self._batches += 1
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

    async def put_task(self, row: TaskRow, *, marker_expires_at: float | None = None) -> None:
        params = _task_params(row)
        key = marker_key(row.session_id, row.task_hash)

        def put(conn: sqlite3.Connection) -> None:
            _put_task_row(conn, params)
            if marker_expires_at is not None:
                _set_marker(conn, key, marker_expires_at)

        await self._write("put_task", put)

    async def get_task(self, session_id: str, task_hash: str) -> TaskRow | None:
        def get(conn: sqlite3.Connection) -> sqlite3.Row | None:
            row: sqlite3.Row | None = conn.execute(
                f"SELECT {_TASK_COLUMNS} FROM tasks WHERE session_id = ? AND task_hash = ?",
                (session_id, task_hash),
            ).fetchone()
            return row

        found = await self._run("get_task", get)
        return None if found is None else _task_row(found)

    async def delete_task(self, session_id: str, task_hash: str) -> bool:
        def delete(conn: sqlite3.Connection) -> bool:
            cursor = conn.execute(
                "DELETE FROM tasks WHERE session_id = ? AND task_hash = ?",
                (session_id, task_hash),
            )
            return cursor.rowcount > 0

        return await self._write("delete_task", delete)

    async def list_tasks(self, session_id: str) -> list[TaskRow]:
        def select(conn: sqlite3.Connection) -> list[sqlite3.Row]:
            return conn.execute(
                f"SELECT {_TASK_COLUMNS} FROM tasks WHERE session_id = ? "
                "ORDER BY created_at, task_hash",
                (session_id,),
            ).fetchall()

        return [_task_row(r) for r in await self._run("list_tasks", select)]

    async def list_parked(self) -> list[TaskRow]:
        def select(conn: sqlite3.Connection) -> list[sqlite3.Row]:
            return conn.execute(
                f"SELECT {_TASK_COLUMNS} FROM tasks WHERE state = 'parked' "
                "ORDER BY created_at, task_hash"
            ).fetchall()

        return [_task_row(r) for r in await self._run("list_parked", select)]

    async def list_resumable(self, session_id: str, *, now: float) -> list[TaskRow]:
        # The snapshot (the bulk of a row) is left out: a listing never shows it.
        columns = ", ".join(
            "NULL AS snapshot" if name == "snapshot" else f"t.{name}"
            for name in (c.strip() for c in _TASK_COLUMNS.split(","))
        )

        def select(conn: sqlite3.Connection) -> list[sqlite3.Row]:
            return conn.execute(
                f"SELECT {columns} FROM tasks AS t "
                "LEFT JOIN markers AS m "
                "ON m.key = 'action:' || t.session_id || ':' || t.task_hash "
                "WHERE t.session_id = ? AND (m.expires_at IS NULL OR m.expires_at <= ?) "
                "ORDER BY t.updated_at DESC, t.task_hash",
                (session_id, now),
            ).fetchall()

        return [_task_row(r) for r in await self._run("list_resumable", select)]

    async def claim(
        self,
        session_id: str,
        task_hash: str,
        *,
        now: float,
        ttl: float,
        new_task_hash: str | None = None,
    ) -> TaskRow:
        """See `engine.store.base.Store.claim` (R36, R37).

        The decision is taken inside ``BEGIN IMMEDIATE``: SQLite grants that lock to
        one connection at a time across processes, so between reading the marker and
        writing it no other claim can run. A claim arriving later waits for the lock
        (up to `BUSY_TIMEOUT`) and then finds the winner's marker.
        """
        key = marker_key(session_id, task_hash)
        expires_at = now + ttl

        def cas(conn: sqlite3.Connection) -> sqlite3.Row:
            found = conn.execute(
                f"SELECT {_TASK_COLUMNS} FROM tasks WHERE session_id = ? AND task_hash = ?",
                (session_id, task_hash),
            ).fetchone()
            live = conn.execute(
                "SELECT 1 FROM markers WHERE key = ? AND expires_at > ?", (key, now)
            ).fetchone()
            if found is None:
                # The row of a task moved by a concurrent claim is gone, but its old
                # marker says a run holds it: that is the conflict, not "unknown".
                if live is not None:
                    raise Conflict(CONFLICT_RUNNING)
                raise NotFound(f"unknown pending task {task_hash}")
            if live is not None:
                raise Conflict(CONFLICT_RUNNING)
            final_hash = task_hash
            if new_task_hash is not None and new_task_hash != task_hash:
                taken = conn.execute(
                    "SELECT 1 FROM tasks WHERE session_id = ? AND task_hash = ?",
                    (session_id, new_task_hash),
                ).fetchone()
                if taken is not None:
                    raise Conflict(f"task hash {new_task_hash} is already in use")
                conn.execute(
                    f"INSERT INTO tasks ({_TASK_COLUMNS}) "
                    f"SELECT session_id, ?, state, objective, origin, model, created_at, "
                    f"updated_at, snapshot, questions, has_jobs, ask_id, ? "
                    f"FROM tasks WHERE session_id = ? AND task_hash = ?",
                    (new_task_hash, task_hash, session_id, task_hash),
                )
                conn.execute(
                    "DELETE FROM tasks WHERE session_id = ? AND task_hash = ?",
                    (session_id, task_hash),
                )
                _set_marker(conn, marker_key(session_id, new_task_hash), expires_at)
                final_hash = new_task_hash
            conn.execute(
                "UPDATE tasks SET state = 'running', updated_at = ? "
                "WHERE session_id = ? AND task_hash = ?",
                (now, session_id, final_hash),
            )
            _set_marker(conn, key, expires_at)
            row: sqlite3.Row = conn.execute(
                f"SELECT {_TASK_COLUMNS} FROM tasks WHERE session_id = ? AND task_hash = ?",
                (session_id, final_hash),
            ).fetchone()
            return row

        return _task_row(await self._write("claim", cas))

    # -- markers -------------------------------------------------------------------

    async def set_marker(self, key: str, *, expires_at: float) -> None:
        def put(conn: sqlite3.Connection) -> None:
            _set_marker(conn, key, expires_at)

        await self._write("set_marker", put)

    async def delete_marker(self, key: str) -> None:
        def delete(conn: sqlite3.Connection) -> None:
            conn.execute("DELETE FROM markers WHERE key = ?", (key,))

        await self._write("delete_marker", delete)

    async def marker_alive(self, key: str, *, now: float) -> bool:
        def alive(conn: sqlite3.Connection) -> bool:
            found = conn.execute(
                "SELECT 1 FROM markers WHERE key = ? AND expires_at > ?", (key, now)
            ).fetchone()
            return found is not None

        return await self._run("marker_alive", alive)

    async def purge_expired_markers(self, *, now: float) -> int:
        def purge(conn: sqlite3.Connection) -> int:
            return conn.execute("DELETE FROM markers WHERE expires_at <= ?", (now,)).rowcount

        return await self._write("purge_expired_markers", purge)

    # -- history -------------------------------------------------------------------

    async def add_history(self, row: HistoryRow) -> None:
        params = _history_params(row)

        def add(conn: sqlite3.Connection) -> None:
            _add_history_row(conn, params)

        await self._write("add_history", add)

    async def end_run(
        self, session_id: str, task_hash: str, *, history: HistoryRow | None, keep: TaskRow | None
    ) -> None:
        history_params = None if history is None else _history_params(history)
        keep_params = None if keep is None else _task_params(keep)
        key = marker_key(session_id, task_hash)

        def end(conn: sqlite3.Connection) -> None:
            if history_params is not None:
                _add_history_row(conn, history_params)
            if keep_params is not None:
                _put_task_row(conn, keep_params)
            conn.execute("DELETE FROM markers WHERE key = ?", (key,))

        await self._write("end_run", end)

    async def list_history(
        self, session_id: str, *, keyword: str = "", limit: int = 50
    ) -> list[HistoryRow]:
        """Newest ``end_at`` first (ties: the later written first); a negative
        ``limit`` is a `BadRequest`, ``0`` gives an empty list."""
        if limit < 0:
            raise BadRequest(f"limit must be 0 or more, got {limit}")

        def select(conn: sqlite3.Connection) -> list[sqlite3.Row]:
            where = "session_id = ?"
            params: list[Any] = [session_id]
            if keyword:
                where += " AND (contains_casefold(objective, ?) OR contains_casefold(content, ?))"
                params += [keyword, keyword]
            return conn.execute(
                f"SELECT {_HISTORY_COLUMNS} FROM history WHERE {where} "
                "ORDER BY end_at DESC, rowid DESC LIMIT ?",
                (*params, limit),
            ).fetchall()

        return [_history_row(r) for r in await self._run("list_history", select)]

    async def get_history(self, session_id: str, task_hash: str) -> HistoryRow | None:
        def get(conn: sqlite3.Connection) -> sqlite3.Row | None:
            row: sqlite3.Row | None = conn.execute(
                f"SELECT {_HISTORY_COLUMNS} FROM history WHERE session_id = ? AND task_hash = ?",
                (session_id, task_hash),
            ).fetchone()
            return row

        found = await self._run("get_history", get)
        return None if found is None else _history_row(found)

    # -- secrets -------------------------------------------------------------------

    async def put_secret(self, session_id: str, key: str, value: str) -> None:
        def put(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT OR REPLACE INTO secrets (session_id, key, value) VALUES (?, ?, ?)",
                (session_id, key, value),
            )

        await self._write("put_secret", put)

    async def get_secret(self, session_id: str, key: str) -> str | None:
        def get(conn: sqlite3.Connection) -> str | None:
            row = conn.execute(
                "SELECT value FROM secrets WHERE session_id = ? AND key = ?", (session_id, key)
            ).fetchone()
            return None if row is None else str(row["value"])

        return await self._run("get_secret", get)

    async def secret_keys(self, session_id: str) -> list[str]:
        def keys(conn: sqlite3.Connection) -> list[str]:
            rows = conn.execute(
                "SELECT key FROM secrets WHERE session_id = ? ORDER BY key", (session_id,)
            ).fetchall()
            return [str(r["key"]) for r in rows]

        return await self._run("secret_keys", keys)

    # -- lifecycle -----------------------------------------------------------------

    async def statistics(self, *, now: float | None = None) -> StoreStatistics:
        at = time.time() if now is None else now

        def count(conn: sqlite3.Connection) -> tuple[int, int, int, int]:
            row = conn.execute(
                "SELECT (SELECT count(*) FROM tasks), (SELECT count(*) FROM history), "
                "(SELECT count(*) FROM markers WHERE expires_at > ?), "
                "(SELECT count(*) FROM secrets)",
                (at,),
            ).fetchone()
            return (int(row[0]), int(row[1]), int(row[2]), int(row[3]))

        tasks, history, markers, secrets = await self._run("statistics", count)
        return StoreStatistics(
            tasks=tasks,
            history=history,
            markers_live=markers,
            secrets=secrets,
            writes_total=self._writes,
            write_batches=self._batches,
        )

    async def maintain(self, *, interval_s: float = CHECKPOINT_INTERVAL_S) -> None:
        """Checkpoint the WAL every ``interval_s`` when something was written, on a
        second connection in its own worker thread, until cancelled.

        With SQLite's automatic checkpoint, every ~1,000th page written makes one
        commit copy the log into the database file and sync it: that write (and the
        request behind it) took ~15 ms more, every ~75 park/resume cycles (bench B2's
        p99). A passive checkpoint here never blocks the store's writer; the automatic
        one stays as a safety net at `AUTOCHECKPOINT_PAGES`. Inline stores (tests
        under a mock clock) keep SQLite's own checkpoints and return at once.
        """
        if self._inline:
            return
        path = self._path
        conn = await trio.to_thread.run_sync(
            lambda: sqlite3.connect(path, timeout=BUSY_TIMEOUT, check_same_thread=False)
        )
        try:
            checkpointed_at = -1  # the first pass checkpoints what is already there
            while True:
                await trio.sleep(interval_s)
                if self._writes == checkpointed_at:
                    continue
                checkpointed_at = self._writes
                try:
                    await trio.to_thread.run_sync(conn.execute, "PRAGMA wal_checkpoint(PASSIVE)")
                except sqlite3.Error as exc:  # the writer's own checkpoint still runs
                    log.warning("store checkpoint failed: %s", exc)
        finally:
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(conn.close)

    async def aclose(self) -> None:
        """Close the connection (SQLite checkpoints the WAL as the last one closes).

        Shielded: a shutdown that is being cancelled still closes the file cleanly.
        Waits for a call already in the worker to finish first.
        """
        with trio.CancelScope(shield=True):
            conn, self._conn = self._conn, None
            if conn is not None:
                await trio.to_thread.run_sync(conn.close, limiter=self._limiter)


async def open_sqlite_store(path: Path | str) -> SqliteStore:
    """Open (creating if needed) the store file at ``path``."""
    return await SqliteStore.open(path)


@asynccontextmanager
async def open_store(path: Path | str) -> AsyncIterator[SqliteStore]:
    """``async with open_store(path) as store:`` — closed on the way out."""
    store = await SqliteStore.open(path)
    try:
        yield store
    finally:
        await store.aclose()
