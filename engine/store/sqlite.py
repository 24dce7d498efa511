"""The embedded store: one SQLite file in WAL mode, driven by one worker thread.

Why this shape:

- **One connection, one worker at a time** (`agentrio.engine.store.sqlite_worker`): the Trio
  thread never blocks on disk, and a call that already runs in the worker is not
  abandoned when its caller is cancelled: a transaction is never left half done.
- **Every write is all or nothing** inside a ``BEGIN IMMEDIATE`` transaction, which takes
  SQLite's write lock up front. That lock is what makes `SqliteStore.claim` an atomic
  compare-and-set across OS processes sharing the file (R37): the check and the update
  happen while no other writer can run. The busy timeout (30 s) makes a loser wait for
  the lock rather than fail, and then see the winner's marker. Concurrent writes are
  group-committed: one transaction, each write in its own savepoint
  (`agentrio.engine.store.sqlite_worker.SqliteWorker.write`).
- **WAL with** ``synchronous=NORMAL``: a committed transaction survives the process
  being killed at any moment (only a power loss can drop the last commits), and a
  reader never sees half a write (R72).
- **0600**: the file holds secrets (R60), so it is created owner-only, and its mode is
  forced back to 0600 on every open; SQLite gives the ``-wal`` and ``-shm`` files it
  creates the same mode as the database file, and existing ones are tightened on open
  too (`agentrio.engine.store.files`, issue 15 item 6). A missing folder is made 0700.
- **No secret in an error** (R73): backend failures become `StoreError` carrying the
  operation's name and SQLite's own message, which never quotes bound values.

The schema and the mapping of rows to values are `agentrio.engine.store.sqlite_schema`; this
module holds the statements of each operation.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any, Final, TypeVar

import trio

from agentrio.engine.conversation import StoredConversation, Summary, exchange_of
from agentrio.engine.errors import BadRequest, Conflict, NotFound
from agentrio.engine.messages import CONFLICT_RUNNING
from agentrio.engine.store import sqlite_schema as schema
from agentrio.engine.store.base import (
    HistoryRow,
    StoreError,
    StoreFull,
    StoreStatistics,
    StoreUnreadable,
    TaskRow,
    marker_key,
)
from agentrio.engine.store.sqlite_rules import SqliteRules
from agentrio.engine.store.sqlite_schema import (
    AUTOCHECKPOINT_PAGES,
    BUSY_TIMEOUT,
    HISTORY_COLUMNS,
    JOURNAL_SIZE_LIMIT,
    MIN_INDEXED_KEYWORD,
    SCHEMA_VERSION,
    TASK_COLUMNS,
)
from agentrio.engine.store.sqlite_worker import MAX_BATCH, SqliteWorker

__all__ = [
    "AUTOCHECKPOINT_PAGES",
    "BUSY_TIMEOUT",
    "CHECKPOINT_INTERVAL_S",
    "INDEX_MATCHES",
    "JOURNAL_SIZE_LIMIT",
    "MAX_BATCH",
    "SCHEMA_VERSION",
    "SqliteStore",
    "open_sqlite_store",
    "open_store",
]

T = TypeVar("T")

log = logging.getLogger(__name__)

#: Seconds between `SqliteStore.maintain`'s checkpoints (when something was written).
CHECKPOINT_INTERVAL_S: Final = 1.0


class SqliteStore(SqliteRules):
    """The SQLite implementation of `agentrio.engine.store.base.Store`.

    Open it with ``await SqliteStore.open(path)``, `open_sqlite_store` or the async
    context manager `open_store`; close it with `aclose`.
    """

    #: The ``[store] backend`` name (``/v1/health``).
    backend: Final = "sqlite"

    def __init__(self, path: Path, conn: sqlite3.Connection, *, inline: bool = False) -> None:
        """Wrap an open connection; use `open` rather than calling this directly."""
        self._path = path
        self._worker = SqliteWorker(conn, inline=inline)

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
            conn = (
                schema.connect(path)
                if inline
                else await trio.to_thread.run_sync(schema.connect, path)
            )
        except sqlite3.Error as exc:
            raise _open_error(path, exc) from None
        return cls(path, conn, inline=inline)

    @property
    def path(self) -> Path:
        return self._path

    def __repr__(self) -> str:
        state = "closed" if self._worker.closed else "open"
        return f"<SqliteStore {str(self._path)!r} {state}>"

    async def _run(self, op: str, fn: Callable[[sqlite3.Connection], T]) -> T:
        """A read (or a write that needs no group commit) in the worker."""
        return await self._worker.run(op, fn)

    async def _write(self, op: str, fn: Callable[[sqlite3.Connection], T]) -> T:
        """One all-or-nothing write, group-committed, committed before this returns."""
        return await self._worker.write(op, fn)

    # -- pending tasks -------------------------------------------------------------

    async def put_task(
        self, row: TaskRow, *, marker_expires_at: float | None = None, latest: bool = False
    ) -> None:
        params = schema.task_params(row)
        key = marker_key(row.session_id, row.task_hash)

        def put(conn: sqlite3.Connection) -> None:
            schema.put_task_row(conn, params)
            if marker_expires_at is not None:
                schema.set_marker_row(conn, key, marker_expires_at)
            if latest:
                schema.set_latest_row(conn, row.session_id, row.task_hash)

        await self._write("put_task", put)

    async def get_task(self, session_id: str, task_hash: str) -> TaskRow | None:
        def get(conn: sqlite3.Connection) -> sqlite3.Row | None:
            row: sqlite3.Row | None = conn.execute(
                f"SELECT {TASK_COLUMNS} FROM tasks WHERE session_id = ? AND task_hash = ?",
                (session_id, task_hash),
            ).fetchone()
            return row

        found = await self._run("get_task", get)
        return None if found is None else schema.task_row(found)

    async def latest_task(self, session_id: str) -> str | None:
        def get(conn: sqlite3.Connection) -> str | None:
            found = conn.execute(
                "SELECT latest_task FROM sessions WHERE session_id = ?", (session_id,)
            ).fetchone()
            return None if found is None else str(found["latest_task"])

        return await self._run("latest_task", get)

    async def session_ids(self, prefix: str, *, limit: int) -> list[str]:
        """See `agentrio.engine.store.base.Store.session_ids`."""

        def select(conn: sqlite3.Connection) -> list[str]:
            found = conn.execute(
                "SELECT session_id FROM sessions WHERE substr(session_id, 1, ?) = ? "
                "ORDER BY session_id LIMIT ?",
                (len(prefix), prefix, limit),
            ).fetchall()
            return [str(row["session_id"]) for row in found]

        return await self._run("session_ids", select)

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
                f"SELECT {TASK_COLUMNS} FROM tasks WHERE session_id = ? "
                "ORDER BY created_at, task_hash",
                (session_id,),
            ).fetchall()

        return [schema.task_row(r) for r in await self._run("list_tasks", select)]

    async def list_parked(self) -> list[TaskRow]:
        def select(conn: sqlite3.Connection) -> list[sqlite3.Row]:
            return conn.execute(
                f"SELECT {TASK_COLUMNS} FROM tasks WHERE state = 'parked' "
                "ORDER BY created_at, task_hash"
            ).fetchall()

        return [schema.task_row(r) for r in await self._run("list_parked", select)]

    async def list_resumable(self, session_id: str, *, now: float) -> list[TaskRow]:
        return await self._resumable("t.session_id = ?", (session_id, now), "list_resumable")

    async def list_resumable_by_origin(
        self, origin: str, *, now: float, limit: int
    ) -> list[TaskRow]:
        """See `agentrio.engine.store.base.Store.list_resumable_by_origin`."""
        where = "t.origin = ?"
        return await self._resumable(where, (origin, now, limit), "list_resumable_by_origin")

    async def _resumable(self, where: str, params: tuple[Any, ...], name: str) -> list[TaskRow]:
        """Task rows matching ``where`` whose marker is not live at the ``now`` that
        follows ``where``'s parameters (and a ``LIMIT`` after it, when given)."""
        # The snapshot (the bulk of a row) is left out: a listing never shows it, only
        # why a task whose model kept failing was kept (`TaskRow.failure`).
        columns = ", ".join(
            "NULL AS snapshot" if name == "snapshot" else f"t.{name}"
            for name in (c.strip() for c in TASK_COLUMNS.split(","))
        )
        columns += ", COALESCE(json_extract(t.snapshot, '$.failure'), '') AS failure"
        limit = " LIMIT ?" if len(params) == 3 else ""

        def select(conn: sqlite3.Connection) -> list[sqlite3.Row]:
            return conn.execute(
                f"SELECT {columns} FROM tasks AS t "
                "LEFT JOIN markers AS m "
                "ON m.key = 'action:' || t.session_id || ':' || t.task_hash "
                f"WHERE {where} AND (m.expires_at IS NULL OR m.expires_at <= ?) "
                f"ORDER BY t.updated_at DESC, t.task_hash{limit}",
                params,
            ).fetchall()

        return [schema.task_row(r) for r in await self._run(name, select)]

    async def claim(
        self,
        session_id: str,
        task_hash: str,
        *,
        now: float,
        ttl: float,
        new_task_hash: str | None = None,
    ) -> TaskRow:
        """See `agentrio.engine.store.base.Store.claim` (R36, R37).

        The decision is taken inside ``BEGIN IMMEDIATE``: SQLite grants that lock to
        one connection at a time across processes, so between reading the marker and
        writing it no other claim can run. A claim arriving later waits for the lock
        (up to `BUSY_TIMEOUT`) and then finds the winner's marker.
        """
        key = marker_key(session_id, task_hash)
        expires_at = now + ttl

        def cas(conn: sqlite3.Connection) -> sqlite3.Row:
            found = conn.execute(
                f"SELECT {TASK_COLUMNS} FROM tasks WHERE session_id = ? AND task_hash = ?",
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
                    f"INSERT INTO tasks ({TASK_COLUMNS}) "
                    f"SELECT session_id, ?, state, objective, origin, model, created_at, "
                    f"updated_at, snapshot, questions, has_jobs, ask_id, ? "
                    f"FROM tasks WHERE session_id = ? AND task_hash = ?",
                    (new_task_hash, task_hash, session_id, task_hash),
                )
                conn.execute(
                    "DELETE FROM tasks WHERE session_id = ? AND task_hash = ?",
                    (session_id, task_hash),
                )
                schema.set_marker_row(conn, marker_key(session_id, new_task_hash), expires_at)
                final_hash = new_task_hash
            conn.execute(
                "UPDATE tasks SET state = 'running', updated_at = ? "
                "WHERE session_id = ? AND task_hash = ?",
                (now, session_id, final_hash),
            )
            schema.set_marker_row(conn, key, expires_at)
            row: sqlite3.Row = conn.execute(
                f"SELECT {TASK_COLUMNS} FROM tasks WHERE session_id = ? AND task_hash = ?",
                (session_id, final_hash),
            ).fetchone()
            return row

        return schema.task_row(await self._write("claim", cas))

    # -- markers -------------------------------------------------------------------

    async def set_marker(self, key: str, *, expires_at: float) -> None:
        def put(conn: sqlite3.Connection) -> None:
            schema.set_marker_row(conn, key, expires_at)

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
        params = schema.history_params(row)

        def add(conn: sqlite3.Connection) -> None:
            schema.add_history_row(conn, params)

        await self._write("add_history", add)

    async def end_run(
        self, session_id: str, task_hash: str, *, history: HistoryRow | None, keep: TaskRow | None
    ) -> None:
        history_params = None if history is None else schema.history_params(history)
        keep_params = None if keep is None else schema.task_params(keep)
        key = marker_key(session_id, task_hash)

        def end(conn: sqlite3.Connection) -> None:
            if history_params is not None:
                schema.add_history_row(conn, history_params)
            if keep_params is not None:
                schema.put_task_row(conn, keep_params)
            conn.execute("DELETE FROM markers WHERE key = ?", (key,))

        await self._write("end_run", end)

    async def list_history(
        self, session_id: str, *, keyword: str = "", limit: int = 50
    ) -> list[HistoryRow]:
        """Newest ``end_at`` first (ties: the later written first); a negative
        ``limit`` is a `BadRequest`, ``0`` gives an empty list. How a keyword is
        looked up, and what it costs: `_select_history`."""
        if limit < 0:
            raise BadRequest(f"limit must be 0 or more, got {limit}")
        select = partial(_select_history, session_id=session_id, keyword=keyword, limit=limit)
        return [schema.history_row(r) for r in await self._run("list_history", select)]

    async def get_history(self, session_id: str, task_hash: str) -> HistoryRow | None:
        def get(conn: sqlite3.Connection) -> sqlite3.Row | None:
            row: sqlite3.Row | None = conn.execute(
                f"SELECT {HISTORY_COLUMNS} FROM history WHERE session_id = ? AND task_hash = ?",
                (session_id, task_hash),
            ).fetchone()
            return row

        found = await self._run("get_history", get)
        return None if found is None else schema.history_row(found)

    # -- conversation ------------------------------------------------------------------

    async def conversation(
        self, session_id: str, *, limit: int, folded: bool = False
    ) -> StoredConversation:
        def read(conn: sqlite3.Connection) -> StoredConversation:
            found = conn.execute(
                "SELECT text, upto FROM summaries WHERE session_id = ?", (session_id,)
            ).fetchone()
            summary = None if found is None else Summary(text=found["text"], upto=found["upto"])
            rows = conn.execute(
                "SELECT task_hash, end_at, messages FROM exchanges "
                "WHERE session_id = ? AND end_at > ? ORDER BY end_at DESC LIMIT ?",
                (session_id, -1.0 if summary is None or folded else summary.upto, limit),
            ).fetchall()
            exchanges = [exchange_of(r["task_hash"], r["end_at"], r["messages"]) for r in rows]
            return StoredConversation(summary=summary, exchanges=exchanges[::-1])

        return await self._run("conversation", read)

    async def put_summary(self, session_id: str, summary: Summary) -> None:
        def put(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT OR REPLACE INTO summaries (session_id, text, upto) VALUES (?, ?, ?)",
                (session_id, summary.text, summary.upto),
            )

        await self._write("put_summary", put)

    async def session_workdir(self, session_id: str) -> str | None:  # R86
        return await self._run("session_workdir", lambda c: schema.workdir_row(c, session_id))

    async def put_session_workdir(self, session_id: str, path: str) -> None:
        await self._write("put_workdir", lambda c: schema.put_workdir_row(c, session_id, path))

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
            writes_total=self._worker.writes,
            write_batches=self._worker.batches,
        )

    async def maintain(self, *, interval_s: float = CHECKPOINT_INTERVAL_S) -> None:
        """Checkpoint the WAL every ``interval_s`` when something was written, on a
        second connection in its own worker thread, until cancelled.

        With SQLite's automatic checkpoint, every ~1,000th page written makes one
        commit copy the log into the database file and sync it: that write (and the
        request behind it) took ~15 ms more, every ~75 park/resume cycles (bench B2's
        p99). A passive checkpoint here never blocks the store's writer; the automatic
        one stays as a safety net at `AUTOCHECKPOINT_PAGES`. After a checkpoint that
        copied the whole log, the next commit cuts the ``-wal`` file back to
        `JOURNAL_SIZE_LIMIT` (issue 23: it kept its largest size, ~80 MiB, for good).
        Inline stores (tests under a mock clock) keep SQLite's own checkpoints and
        return at once.
        """
        if self._worker.inline:
            return
        path = self._path
        conn = await trio.to_thread.run_sync(schema.connect_checkpointer, path)
        try:
            checkpointed_at = -1  # the first pass checkpoints what is already there
            while True:
                await trio.sleep(interval_s)
                if self._worker.writes == checkpointed_at:
                    continue
                checkpointed_at = self._worker.writes
                try:
                    await trio.to_thread.run_sync(schema.checkpoint, conn)
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
        await self._worker.close()


#: Index matches (in every session) up to which a keyword's rows are read through the
#: index; a keyword with more is common, and found sooner by reading newest first.
INDEX_MATCHES: Final = 500
_ORDER: Final = "ORDER BY h.end_at DESC, h.rowid DESC LIMIT ?"
_COLUMNS: Final = ", ".join(f"h.{c.strip()}" for c in HISTORY_COLUMNS.split(","))


def _select_history(
    conn: sqlite3.Connection, *, session_id: str, keyword: str, limit: int
) -> list[sqlite3.Row]:
    """A session's history rows, newest first, holding ``keyword`` (issue 23).

    A keyword of `MIN_INDEXED_KEYWORD` characters or more (casefolded) that at most
    `INDEX_MATCHES` rows hold is read through the trigram index: the cost follows
    those rows, not the size of the history (a rare or absent keyword: ~0.1–0.4 ms at
    1,000 or 100,000 rows, docs/benchmarks.md). Any other keyword reads the session's
    rows newest first through Python's ``str.casefold`` until ``limit`` of them match:
    quick for a common keyword, but a shorter one (no trigram to look up) or one
    holding a NUL or `schema.NUL_STAND_IN` (`schema.indexable`) that is rare in the
    session reads each of its rows, ~3 µs a row.
    """
    folded = keyword.casefold()
    select = f"SELECT {_COLUMNS} FROM history AS h"
    if not keyword:
        return conn.execute(
            f"{select} WHERE h.session_id = ? {_ORDER}", (session_id, limit)
        ).fetchall()
    if len(folded) >= MIN_INDEXED_KEYWORD and schema.indexable(folded):
        found = conn.execute(
            "SELECT rowid FROM history_search WHERE history_search MATCH ? LIMIT ?",
            (schema.history_search_phrase(folded), INDEX_MATCHES + 1),
        ).fetchall()
        if len(found) <= INDEX_MATCHES:
            return conn.execute(
                # ``+``: not through history_by_end, which would read the session's rows
                f"{select} WHERE h.rowid IN (SELECT value FROM json_each(?)) "
                f"AND +h.session_id = ? {_ORDER}",
                (json.dumps([r[0] for r in found]), session_id, limit),
            ).fetchall()
    where = "(contains_casefold(h.objective, ?) OR contains_casefold(h.content, ?))"
    return conn.execute(
        f"{select} WHERE h.session_id = ? AND {where} {_ORDER}",
        (session_id, folded, folded, limit),
    ).fetchall()


def _open_error(path: Path, exc: sqlite3.Error) -> StoreError:
    """Why ``path`` could not be opened, as the `StoreError` subclass a start-up error
    message is chosen by (`agentrio.engine.server.startup`)."""
    message = f"cannot open store {path.name}: {exc}"
    code = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF
    if code == sqlite3.SQLITE_FULL:
        return StoreFull(message)
    if code in (sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CORRUPT):
        return StoreUnreadable(message)
    return StoreError(message)


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
