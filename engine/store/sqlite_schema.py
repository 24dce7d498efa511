"""The SQLite store's schema, and how rows map to the store's values.

Kept apart from `agentrio.engine.store.sqlite` (the statements of each operation) and
`agentrio.engine.store.sqlite_worker` (the one connection and its group commit) so that each
reads on its own: this module is what is on disk.

**Versions.** ``PRAGMA user_version`` is `SCHEMA_VERSION`. Every open runs the schema
with ``IF NOT EXISTS`` inside ``BEGIN IMMEDIATE``, which is also the migration from an
older version as long as versions only add tables: version 2 added ``sessions`` (each
session's latest task, R36), version 3 the ``history_search`` index (below), filled
from the existing rows in the same transaction, and ``tasks_by_origin`` (a reopened
REPL's listing of its ``cli-`` tasks read every stored task), version 4 the
conversation's ``exchanges`` (one per history row that has one, written with it) and
``summaries`` (one per session), `agentrio.engine.conversation`, version 5 the home's
remembered ``rules`` (R92: each the JSON of its `agentrio.protocol.rules.AllowedRule`,
with its kind and time as columns to read it by), version 6 ``workdirs`` (each
session's working directory, R86). A file of a newer version is refused.

**History search** (issue 23). ``history_search`` is an FTS5 table with the
``trigram`` tokenizer holding casefolded copies (Python's `str.casefold`, see
`_search_fold`) of each history row's objective and content, under the row's
``rowid``. A keyword of three or more characters (after casefolding) is one quoted
FTS5 phrase, which with trigrams is a substring match: the same answer as
``keyword.casefold() in text.casefold()``, found through the index instead of a Python
call per row. Triggers keep it in step with ``history`` on every insert, delete and
update, whoever writes; they call the ``search_fold`` SQL function `connect`
registers, so a connection without it (the ``sqlite3`` shell) can read the file but
not write history. The cost: the copy plus the trigram index take several times the
text's size on disk, and each history write indexes its text. How a keyword is looked
up: `agentrio.engine.store.sqlite._select_history`.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any, Final

from agentrio.engine.store.base import HistoryRow, StoreError, TaskRow
from agentrio.engine.store.files import make_private_dirs, open_private
from agentrio.protocol.codec import structure, unstructure
from agentrio.protocol.events import Question

__all__ = [
    "AUTOCHECKPOINT_PAGES",
    "BUSY_TIMEOUT",
    "HISTORY_COLUMNS",
    "JOURNAL_SIZE_LIMIT",
    "MIN_INDEXED_KEYWORD",
    "NUL_STAND_IN",
    "SCHEMA",
    "SCHEMA_VERSION",
    "SEARCH_SCHEMA",
    "TASK_COLUMNS",
    "add_history_row",
    "checkpoint",
    "connect",
    "connect_checkpointer",
    "history_params",
    "history_row",
    "history_search_phrase",
    "indexable",
    "put_task_row",
    "put_workdir_row",
    "set_latest_row",
    "set_marker_row",
    "task_params",
    "task_row",
    "workdir_row",
]

#: ``PRAGMA user_version`` of the schema below.
SCHEMA_VERSION: Final = 6
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
CREATE INDEX IF NOT EXISTS tasks_by_origin ON tasks (origin, updated_at);
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
CREATE TABLE IF NOT EXISTS exchanges (
    session_id TEXT NOT NULL,
    task_hash  TEXT NOT NULL,
    end_at     REAL NOT NULL,
    messages   TEXT NOT NULL,
    PRIMARY KEY (session_id, task_hash)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS exchanges_by_end ON exchanges (session_id, end_at);
CREATE TABLE IF NOT EXISTS summaries (
    session_id TEXT PRIMARY KEY,
    text       TEXT NOT NULL,
    upto       REAL NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS workdirs (
    session_id TEXT PRIMARY KEY,
    path       TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS secrets (
    session_id TEXT NOT NULL,
    key        TEXT NOT NULL,
    value      TEXT NOT NULL,
    PRIMARY KEY (session_id, key)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS rules (
    id       TEXT PRIMARY KEY,
    kind     TEXT NOT NULL,
    added_at REAL NOT NULL,
    body     TEXT NOT NULL
) WITHOUT ROWID;
"""

#: The history search index and the triggers that keep it in step (module doc). Apart
#: from `SCHEMA` because a trigger's body holds semicolons.
SEARCH_SCHEMA: Final = (
    """CREATE VIRTUAL TABLE IF NOT EXISTS history_search USING fts5(
        objective, content, tokenize = 'trigram case_sensitive 1'
    )""",
    """CREATE TRIGGER IF NOT EXISTS history_search_insert AFTER INSERT ON history BEGIN
        INSERT INTO history_search (rowid, objective, content)
        VALUES (new.rowid, search_fold(new.objective), search_fold(new.content));
    END""",
    """CREATE TRIGGER IF NOT EXISTS history_search_delete AFTER DELETE ON history BEGIN
        DELETE FROM history_search WHERE rowid = old.rowid;
    END""",
    """CREATE TRIGGER IF NOT EXISTS history_search_update AFTER UPDATE ON history BEGIN
        DELETE FROM history_search WHERE rowid = old.rowid;
        INSERT INTO history_search (rowid, objective, content)
        VALUES (new.rowid, search_fold(new.objective), search_fold(new.content));
    END""",
)
#: Characters (after casefolding) a keyword needs for the index: a trigram's length.
MIN_INDEXED_KEYWORD: Final = 3

TASK_COLUMNS: Final = (
    "session_id, task_hash, state, objective, origin, model, created_at, updated_at, "
    "snapshot, questions, has_jobs, ask_id, resumed_from"
)
HISTORY_COLUMNS: Final = (
    "session_id, task_hash, end_at, objective, model, reasoning, status, content"
)
#: Pages in the WAL before a commit checkpoints by itself (SQLite's default: 1,000).
AUTOCHECKPOINT_PAGES: Final = 20_000


#: Bytes the ``-wal`` file is cut back to when the log restarts after a checkpoint
#: (``PRAGMA journal_size_limit``); without it the file keeps its largest size.
JOURNAL_SIZE_LIMIT: Final = 16 * 2**20


#: What a NUL becomes in the index's copies: FTS5 stops reading a text at a NUL.
NUL_STAND_IN: Final = "\ufffd"


def _search_fold(text: str | None) -> str | None:
    """SQL function ``search_fold(text)``: the index's copy of a text, Python's
    `str.casefold` (Unicode-aware, unlike SQLite's ``lower()``: 'Straße' becomes
    'strasse') with each NUL as `NUL_STAND_IN`. A keyword holding neither character is
    in the copy exactly where it is in the casefolded text; one that holds either is
    searched without the index (`indexable`)."""
    return None if text is None else text.casefold().replace("\0", NUL_STAND_IN)


def _contains_casefold(haystack: str | None, needle: str | None) -> int:
    """SQL function ``contains_casefold(a, b)``: the search without the index (a short
    or common keyword, or one the copies cannot answer, `indexable`), one Python call
    per row."""
    if haystack is None or needle is None:
        return 0
    return int(needle.casefold() in haystack.casefold())


def indexable(folded: str) -> bool:
    """Whether the index's copies answer a casefolded keyword (module doc)."""
    return "\0" not in folded and NUL_STAND_IN not in folded


def history_search_phrase(folded: str) -> str:
    """The FTS5 query for a casefolded keyword: one quoted phrase (a ``"`` doubled), so
    the keyword is data: ``NEAR``, ``*``, ``AND``, ``:`` or a quote are characters to
    find, never query syntax."""
    return '"' + folded.replace('"', '""') + '"'


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
        # A listing selects the snapshot's failure alone (`SqliteStore._resumable`).
        **({"listed_failure": r["failure"]} if "failure" in r.keys() else {}),
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
        conn.execute(f"PRAGMA journal_size_limit = {JOURNAL_SIZE_LIMIT}")
        conn.create_function("search_fold", 1, _search_fold, deterministic=True)
        conn.create_function("contains_casefold", 2, _contains_casefold, deterministic=True)
        conn.execute("BEGIN IMMEDIATE")
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise StoreError(
                    f"{path.name} has schema version {version}, newer than this agentrio "
                    f"understands ({SCHEMA_VERSION})"
                )
            for statement in (*SCHEMA.split(";"), *SEARCH_SCHEMA):
                if statement.strip():
                    conn.execute(statement)
            if version < 3:  # the index is new: fill it from the rows already there
                conn.execute(
                    "INSERT INTO history_search (rowid, objective, content) "
                    "SELECT rowid, search_fold(objective), search_fold(content) FROM history"
                )
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
    except BaseException:
        conn.close()
        raise
    return conn


def connect_checkpointer(path: Path) -> sqlite3.Connection:
    """The second connection `agentrio.engine.store.sqlite.SqliteStore.maintain` checkpoints
    with (runs in a worker thread), with the same WAL size limit as the writer's."""
    conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT, check_same_thread=False)
    conn.execute(f"PRAGMA journal_size_limit = {JOURNAL_SIZE_LIMIT}")
    return conn


def checkpoint(conn: sqlite3.Connection) -> bool:
    """One passive checkpoint: copy what it can of the WAL into the database without
    waiting for (or blocking) the writer; True when the whole log was copied.

    After a complete one the next commit starts the log from its beginning again and,
    with ``journal_size_limit``, cuts the ``-wal`` file back to `JOURNAL_SIZE_LIMIT`.
    """
    busy, frames, copied = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    return bool(busy == 0 and frames == copied)


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
        row.exchange,
    )


def add_history_row(conn: sqlite3.Connection, row_params: tuple[Any, ...]) -> None:
    """Write a history row (`history_params`) and its exchange, if it has one."""
    params, exchange = row_params[:-1], row_params[-1]
    # A delete then an insert, not INSERT OR REPLACE: a row REPLACE removes fires no
    # delete trigger (unless recursive triggers are on), so its index entry would stay.
    conn.execute("DELETE FROM history WHERE session_id = ? AND task_hash = ?", params[:2])
    conn.execute(f"INSERT INTO history ({HISTORY_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", params)
    # One transaction with the history row: see `Store.add_history` (R72).
    conn.execute("DELETE FROM tasks WHERE session_id = ? AND task_hash = ?", params[:2])
    if exchange:
        conn.execute(
            "INSERT OR REPLACE INTO exchanges (session_id, task_hash, end_at, messages) "
            "VALUES (?, ?, ?, ?)",
            (*params[:3], exchange),
        )


def set_latest_row(conn: sqlite3.Connection, session_id: str, task_hash: str) -> None:
    conn.execute(
        "INSERT OR REPLACE INTO sessions (session_id, latest_task) VALUES (?, ?)",
        (session_id, task_hash),
    )


def workdir_row(conn: sqlite3.Connection, session_id: str) -> str | None:
    """The session's stored working directory (R86), or None."""
    found = conn.execute("SELECT path FROM workdirs WHERE session_id = ?", (session_id,))
    row = found.fetchone()
    return None if row is None else str(row["path"])


def put_workdir_row(conn: sqlite3.Connection, session_id: str, path: str) -> None:
    conn.execute(
        "INSERT OR REPLACE INTO workdirs (session_id, path) VALUES (?, ?)", (session_id, path)
    )
