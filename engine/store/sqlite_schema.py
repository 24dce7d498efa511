"""The SQLite store's schema, and how rows map to the store's values.

Kept apart from `engine.store.sqlite` (the statements of each operation) and
`engine.store.sqlite_worker` (the one connection and its group commit) so that each
reads on its own: this module is what is on disk.

**Versions.** ``PRAGMA user_version`` is `SCHEMA_VERSION`. Every open runs the schema
with ``IF NOT EXISTS`` inside ``BEGIN IMMEDIATE``, which is also the migration from an
older version as long as versions only add tables: version 2 added ``sessions`` (each
session's latest task, R36). A file of a newer version is refused.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any, Final

from engine.store.base import HistoryRow, StoreError, TaskRow
from engine.store.files import make_private_dirs, open_private
from protocol.codec import structure, unstructure
from protocol.events import Question

__all__ = [
    "AUTOCHECKPOINT_PAGES",
    "BUSY_TIMEOUT",
    "HISTORY_COLUMNS",
    "SCHEMA",
    "SCHEMA_VERSION",
    "TASK_COLUMNS",
    "add_history_row",
    "connect",
    "history_params",
    "history_row",
    "put_task_row",
    "set_latest_row",
    "set_marker_row",
    "task_params",
    "task_row",
]

#: ``PRAGMA user_version`` of the schema below.
SCHEMA_VERSION: Final = 2
#: Seconds a writer waits for another process's write lock before giving up.
BUSY_TIMEOUT: Final = 30.0

SCHEMA: Final = """
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
CREATE TABLE IF NOT EXISTS sessions (
    session_id  TEXT PRIMARY KEY,
    latest_task TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS secrets (
    session_id TEXT NOT NULL,
    key        TEXT NOT NULL,
    value      TEXT NOT NULL,
    PRIMARY KEY (session_id, key)
) WITHOUT ROWID;
"""

TASK_COLUMNS: Final = (
    "session_id, task_hash, state, objective, origin, model, created_at, updated_at, "
    "snapshot, questions, has_jobs, ask_id, resumed_from"
)
HISTORY_COLUMNS: Final = (
    "session_id, task_hash, end_at, objective, model, reasoning, status, content"
)
#: Pages in the WAL before a commit checkpoints by itself (SQLite's default: 1,000).
AUTOCHECKPOINT_PAGES: Final = 20_000


def _contains_casefold(haystack: str | None, needle: str | None) -> int:
    """SQL function ``contains_casefold(a, b)``: Unicode-aware, unlike SQLite's
    ``lower()`` which folds ASCII only."""
    if haystack is None or needle is None:
        return 0
    return int(needle.casefold() in haystack.casefold())


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def task_params(row: TaskRow) -> tuple[Any, ...]:
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


def task_row(r: sqlite3.Row) -> TaskRow:
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


def history_row(r: sqlite3.Row) -> HistoryRow:
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


def connect(path: Path) -> sqlite3.Connection:
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
            for statement in SCHEMA.split(";"):
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


def put_task_row(conn: sqlite3.Connection, params: tuple[Any, ...]) -> None:
    conn.execute(
        f"INSERT OR REPLACE INTO tasks ({TASK_COLUMNS}) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        params,
    )


def set_marker_row(conn: sqlite3.Connection, key: str, expires_at: float) -> None:
    conn.execute(
        "INSERT OR REPLACE INTO markers (key, expires_at) VALUES (?, ?)", (key, expires_at)
    )


def history_params(row: HistoryRow) -> tuple[Any, ...]:
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


def add_history_row(conn: sqlite3.Connection, params: tuple[Any, ...]) -> None:
    conn.execute(
        f"INSERT OR REPLACE INTO history ({HISTORY_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        params,
    )
    # One transaction with the history row: see `Store.add_history` (R72).
    conn.execute("DELETE FROM tasks WHERE session_id = ? AND task_hash = ?", params[:2])


def set_latest_row(conn: sqlite3.Connection, session_id: str, task_hash: str) -> None:
    conn.execute(
        "INSERT OR REPLACE INTO sessions (session_id, latest_task) VALUES (?, ?)",
        (session_id, task_hash),
    )
