"""engine/store/sqlite at scale (issue 23): the history search index, the bounded WAL,
the statements that must not scan.

What every backend must answer is in tests/engine/test_store.py (the conformance
suite); these are the SQLite file's own machinery: the FTS5 index stays in step with
the history table under every write, an older file gains it, a common keyword takes
the other route, the ``-wal`` file shrinks back after a checkpoint, and a task's
writes and the listings search by key.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from agentrio.engine.store import HistoryRow, SqliteStore, TaskRow, open_store
from agentrio.engine.store import sqlite_schema as schema
from agentrio.engine.store.sqlite import INDEX_MATCHES, JOURNAL_SIZE_LIMIT, SCHEMA_VERSION

SESSION = "chat-search"


def _history(n: int, **changes: Any) -> HistoryRow:
    row = HistoryRow(
        session_id=SESSION,
        task_hash=f"{n:032x}",
        end_at=float(n),
        objective=f"objective {n}",
        model="builtin",
        reasoning="",
        status="finished",
        content=f"ran step {n}",
    )
    return attrs.evolve(row, **changes)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    opened = await SqliteStore.open(tmp_path / "agentrio.db")
    try:
        yield opened
    finally:
        await opened.aclose()


def _index(path: Path) -> list[tuple[int, str, str]]:
    """The index's rows, checked by FTS5's own integrity check first."""
    with sqlite3.connect(path) as raw:
        raw.execute("INSERT INTO history_search (history_search) VALUES ('integrity-check')")
        rows = raw.execute(
            "SELECT rowid, objective, content FROM history_search ORDER BY rowid"
        ).fetchall()
        history = raw.execute("SELECT rowid FROM history ORDER BY rowid").fetchall()
    raw.close()
    assert [r[0] for r in rows] == [r[0] for r in history]
    return rows


async def _found(store: SqliteStore, keyword: str, session_id: str = SESSION) -> list[str]:
    return [h.task_hash for h in await store.list_history(session_id, keyword=keyword)]


async def test_the_index_follows_every_write_of_history(store: SqliteStore) -> None:
    """Issue 23: a written row is indexed casefolded; a replaced row's old text is no
    longer found (a record replaced, ``end_run``); a row deleted by any connection
    leaves the index with it."""
    await store.add_history(_history(1, objective="Deploy the ÉCLAIR", content="Straße"))
    await store.end_run(SESSION, f"{2:032x}", history=_history(2), keep=None)
    assert _index(store.path) == [
        (1, "deploy the éclair", "strasse"),
        (2, "objective 2", "ran step 2"),
    ]
    await store.add_history(_history(1, objective="Build", content="done"))
    assert await _found(store, "éclair") == await _found(store, "STRASSE") == []
    assert await _found(store, "BUILD") == [f"{1:032x}"]
    assert _index(store.path) == [(2, "objective 2", "ran step 2"), (3, "build", "done")]
    with sqlite3.connect(store.path) as raw:  # no search_fold here: a delete needs none
        raw.execute("DELETE FROM history WHERE task_hash = ?", (f"{2:032x}",))
    raw.close()
    assert _index(store.path) == [(3, "build", "done")]
    assert await _found(store, "objective") == []


async def test_a_common_keyword_reads_newest_first(store: SqliteStore) -> None:
    """Issue 23: a keyword more than `INDEX_MATCHES` rows hold is found by reading the
    session newest first, with the same answer; common in another session only, it
    finds nothing here; the limit holds on both routes."""
    common = [_history(n) for n in range(INDEX_MATCHES + 1)]
    elsewhere = [attrs.evolve(_history(n), session_id="chat-other") for n in range(600, 1200)]
    async with trio.open_nursery() as nursery:
        for row in (*common, *elsewhere):
            nursery.start_soon(store.add_history, row)
    rows = await store.list_history(SESSION, keyword="OBJECTIVE", limit=3)
    assert [r.task_hash for r in rows] == [f"{n:032x}" for n in (500, 499, 498)]
    assert await _found(store, "step 1") == [f"{n:032x}" for n in range(199, 149, -1)]
    assert await _found(store, "step 7") == [f"{n:032x}" for n in range(79, 69, -1)] + [f"{7:032x}"]
    assert await _found(store, "objective 1000") == []
    assert await _found(store, "objective 1000", "chat-other") == [f"{1000:032x}"]
    lone = await store.list_history("chat-other", keyword="objective 1", limit=2)
    assert [r.task_hash for r in lone] == [f"{n:032x}" for n in (1199, 1198)]


async def test_a_version_2_file_gains_a_filled_index(tmp_path: Path) -> None:
    """Issue 23, R72: a store written by schema version 2 (no index) opens, indexes the
    history it holds in the same upgrade, and searches it; later writes are indexed."""
    path = tmp_path / "v2.db"
    async with open_store(path) as store:
        await store.add_history(_history(1, objective="Straße"))
        await store.add_history(_history(2, content="ÜBER alles"))
        await store.put_task(
            TaskRow(
                session_id=SESSION,
                task_hash=f"{3:032x}",
                state="parked",
                objective="o",
                origin="chat-",
                model="builtin",
                created_at=1.0,
                updated_at=1.0,
                snapshot=None,
                questions=[],
            )
        )
    with sqlite3.connect(path) as raw:
        for trigger in ("insert", "delete", "update"):
            raw.execute(f"DROP TRIGGER history_search_{trigger}")
        raw.execute("DROP TABLE history_search")
        raw.execute("DROP INDEX tasks_by_origin")
        raw.execute("PRAGMA user_version = 2")
    raw.close()
    async with open_store(path) as store:
        assert await _found(store, "strasse") == [f"{1:032x}"]
        assert await _found(store, "über") == [f"{2:032x}"]
        assert await _found(store, "ü") == [f"{2:032x}"]
        await store.add_history(_history(4, objective="later"))
        assert await _found(store, "LATER") == [f"{4:032x}"]
        assert [r.task_hash for r in await store.list_tasks(SESSION)] == [f"{3:032x}"]
        by_origin = await store.list_resumable_by_origin("chat-", now=2.0, limit=5)
        assert [r.task_hash for r in by_origin] == [f"{3:032x}"]
    assert len(_index(path)) == 3
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    raw.close()


async def test_the_wal_shrinks_back_under_its_limit_after_a_checkpoint(
    store: SqliteStore,
) -> None:
    """Issue 23: a burst of writes grows the ``-wal`` file past `JOURNAL_SIZE_LIMIT`;
    after a checkpoint of the whole log (``maintain``'s, on its own connection) the
    next commit cuts the file back under the limit, where it had kept its size."""
    wal = store.path.with_name(store.path.name + "-wal")
    big = {"blob": "x" * 2**20}
    for n in range(24):
        await store.put_secret(SESSION, f"k{n}", str(big))
    grown = wal.stat().st_size
    assert grown > JOURNAL_SIZE_LIMIT == 16 * 2**20
    await store.put_secret(SESSION, "after", "v")
    assert wal.stat().st_size >= grown  # no checkpoint yet: the file keeps its size
    checkpointer = await trio.to_thread.run_sync(schema.connect_checkpointer, store.path)
    try:
        assert await trio.to_thread.run_sync(schema.checkpoint, checkpointer) is True
    finally:
        checkpointer.close()
    assert wal.stat().st_size >= grown  # the checkpoint copies; the writer cuts
    await store.put_secret(SESSION, "next", "v")
    assert 0 < wal.stat().st_size <= JOURNAL_SIZE_LIMIT
    assert len(await store.secret_keys(SESSION)) == 26


async def test_task_start_end_and_listings_search_by_key(store: SqliteStore) -> None:
    """Issue 23: no statement of a task's start, resume or end, of the by-origin
    listing (a reopened REPL) or of a rare keyword's search scans a table, so their
    cost does not follow the number of stored tasks or history rows (each one's
    ``EXPLAIN QUERY PLAN`` searches by a key or reads the index)."""
    seen: list[str] = []
    await store._run("trace", lambda conn: conn.set_trace_callback(seen.append))
    row = TaskRow(
        session_id=SESSION,
        task_hash=f"{1:032x}",
        state="running",
        objective="o",
        origin="cli-",
        model="builtin",
        created_at=1.0,
        updated_at=1.0,
        snapshot=None,
        questions=[],
    )
    await store.put_task(row, marker_expires_at=60.0, latest=True)
    await store.end_run(
        SESSION, row.task_hash, history=None, keep=attrs.evolve(row, state="parked")
    )
    assert await store.latest_task(SESSION) == row.task_hash
    await store.claim(SESSION, row.task_hash, now=100.0, ttl=60.0, new_task_hash=f"{2:032x}")
    await store.end_run(SESSION, f"{2:032x}", history=_history(2), keep=None)
    assert await store.list_resumable_by_origin("cli-", now=200.0, limit=5) == []
    assert await _found(store, "OBJECTIVE 2") == [f"{2:032x}"]
    await store._run("trace", lambda conn: conn.set_trace_callback(None))
    statements = {s for s in seen if s.split()[0] in ("SELECT", "INSERT", "UPDATE", "DELETE")}
    assert len(statements) >= 12

    def plans(conn: sqlite3.Connection) -> dict[str, list[str]]:
        return {
            s: [r[3] for r in conn.execute(f"EXPLAIN QUERY PLAN {s}").fetchall()]
            for s in statements
        }

    # The two virtual tables read by a constraint: the index by MATCH (``M``), and
    # json_each, the list of the index's matches.
    allowed = ("SCAN history_search VIRTUAL TABLE INDEX 0:M", "SCAN json_each VIRTUAL TABLE")
    scans = {
        s: [line for line in lines if line.startswith("SCAN") and not line.startswith(allowed)]
        for s, lines in (await store._run("plans", plans)).items()
    }
    assert {s: lines for s, lines in scans.items() if lines} == {}
    assert any(
        "USING INDEX tasks_by_origin" in str(p) for p in (await store._run("p", plans)).values()
    )
