"""engine/store: the store's tasks, markers, claims, history and secrets.

Times passed as ``now`` are plain numbers: the store never reads a clock, so expiry is
exact and tests need no sleeping. One test drives expiry with the autojump clock.
"""

from __future__ import annotations

import sqlite3
import stat
from collections.abc import AsyncIterator
from functools import partial
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from agentrio.engine.errors import BadRequest, Conflict, NotFound
from agentrio.engine.messages import CONFLICT_RUNNING
from agentrio.engine.store import (
    HistoryRow,
    SqliteStore,
    Store,
    StoreError,
    StoreStatistics,
    TaskRow,
    marker_key,
    open_sqlite_store,
    open_store,
)
from agentrio.engine.store.redis_store import open_redis_store
from agentrio.engine.store.sqlite import AUTOCHECKPOINT_PAGES, SCHEMA_VERSION
from agentrio.protocol.events import Question

SESSION = "chat-alpha"
H1, H2, H3, H4 = ("1" * 32, "2" * 32, "3" * 32, "4" * 32)


def _task(task_hash: str, **changes: Any) -> TaskRow:
    row = TaskRow(
        session_id=SESSION,
        task_hash=task_hash,
        state="parked",
        objective=f"objective {task_hash[:4]}",
        origin="chat-",
        model="builtin",
        created_at=100.0,
        updated_at=100.0,
        snapshot={"objective": "o", "messages": [{"role": "user", "content": "héllo 😀"}]},
        questions=[Question(text="Which host?", options=["a", "b"], multi=True)],
    )
    return attrs.evolve(row, **changes)


def _history(task_hash: str, end_at: float, **changes: Any) -> HistoryRow:
    row = HistoryRow(
        session_id=SESSION,
        task_hash=task_hash,
        end_at=end_at,
        objective=f"objective {task_hash[:4]}",
        model="builtin",
        reasoning="",
        status="finished",
        content="ran ls",
    )
    return attrs.evolve(row, **changes)


@pytest.fixture(params=["sqlite", "redis", "redis-sentinel"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """Every conformance test runs on both backends (issue 21): the SQLite file and a
    real ``redis-server`` (`tests.conftest.redis_url`), reached directly and through a
    Redis Sentinel (`tests.conftest.redis_sentinel`)."""
    if request.param == "sqlite":
        opened = await SqliteStore.open(tmp_path / "agentrio.db")
        try:
            yield opened
        finally:
            await opened.aclose()
        return
    url = request.getfixturevalue("redis_url")
    if request.param == "redis-sentinel":
        url = request.getfixturevalue("redis_sentinel").url
    # No client timeouts: under the autojump clock they would fire in mock time.
    async with open_redis_store(
        url, prefix="test:", connect_timeout_s=None, reply_timeout_s=None
    ) as redis_store:
        yield redis_store


@pytest.fixture
async def sqlite_store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    """The tests of SQLite's own machinery (group commit, savepoints, the worker)."""
    opened = await SqliteStore.open(tmp_path / "agentrio.db")
    try:
        yield opened
    finally:
        await opened.aclose()


# -- tasks -------------------------------------------------------------------------------


async def test_task_crud_round_trip(store: Store) -> None:
    """R11, R72: a task row (snapshot JSON, questions, flags) comes back equal;
    put is an upsert; delete reports whether there was a row; sessions are apart."""
    row = _task(H1, has_jobs=True, ask_id="a" * 32, resumed_from=H4)
    await store.put_task(row)
    assert await store.get_task(SESSION, H1) == row
    assert await store.get_task("chat-other", H1) is None
    assert await store.get_task(SESSION, H2) is None

    changed = attrs.evolve(row, state="interrupted", updated_at=150.0, snapshot=None, questions=[])
    await store.put_task(changed)
    assert await store.get_task(SESSION, H1) == changed

    await store.put_task(_task(H2, created_at=50.0))
    await store.put_task(attrs.evolve(_task(H3), session_id="chat-other"))
    assert [t.task_hash for t in await store.list_tasks(SESSION)] == [H2, H1]

    assert await store.delete_task(SESSION, H1) is True
    assert await store.delete_task(SESSION, H1) is False
    assert [t.task_hash for t in await store.list_tasks(SESSION)] == [H2]
    assert [t.task_hash for t in await store.list_tasks("chat-other")] == [H3]


def test_task_row_rejects_unknown_state() -> None:
    """R45: only running / parked / interrupted rows exist; anything else is a bug."""
    with pytest.raises(ValueError, match="state"):
        _task(H1, state="finished")


async def test_a_listing_says_why_a_failed_task_was_kept(store: Store) -> None:
    """Issue 31 (6): a row whose snapshot has a ``failure`` (its model kept failing) is
    listed with it, by session and by origin, though listings leave the snapshot out;
    a row with none lists an empty one."""
    why = "model error: HTTP 503 (gave up after 4 tries)"
    snapshot = {"objective": "o", "messages": [], "failure": why}
    await store.put_task(_task(H1, state="interrupted", snapshot=snapshot, questions=[]))
    await store.put_task(_task(H2, updated_at=90.0))
    listed = await store.list_resumable(SESSION, now=200.0)
    assert [(t.task_hash, t.snapshot, t.failure) for t in listed] == [
        (H1, None, why),
        (H2, None, ""),
    ]
    by_origin = await store.list_resumable_by_origin("chat-", now=200.0, limit=10)
    assert [(t.task_hash, t.failure) for t in by_origin] == [(H1, why), (H2, "")]
    stored = await store.get_task(SESSION, H1)
    assert stored is not None
    assert (stored.failure, stored.info().failure) == (why, why)


async def test_list_resumable_follows_markers(store: Store) -> None:
    """R45, R51, R72: a live marker hides a task; an expired one shows it, including a
    row still marked running (its daemon died); newest updated first; rows come
    without their snapshot."""
    await store.put_task(_task(H1, updated_at=110.0))
    await store.put_task(_task(H2, state="running", updated_at=130.0))
    await store.put_task(_task(H3, state="running", updated_at=120.0))
    await store.put_task(_task(H4, state="interrupted", updated_at=140.0))
    await store.set_marker(marker_key(SESSION, H2), expires_at=200.0)
    await store.set_marker(marker_key(SESSION, H3), expires_at=160.0)

    at_150 = await store.list_resumable(SESSION, now=150.0)
    assert [t.task_hash for t in at_150] == [H4, H1]
    # expiry is exclusive: a marker expiring at `now` is no longer live
    at_160 = await store.list_resumable(SESSION, now=160.0)
    assert [t.task_hash for t in at_160] == [H4, H3, H1]
    at_200 = await store.list_resumable(SESSION, now=200.0)
    assert [t.task_hash for t in at_200] == [H4, H2, H3, H1]
    assert {t.state for t in at_200 if t.task_hash in (H2, H3)} == {"running"}
    assert await store.list_resumable("chat-other", now=200.0) == []
    # a listing carries everything but the snapshot, which get_task returns
    listed = at_200[-1]
    stored = await store.get_task(SESSION, H1)
    assert stored is not None
    assert stored.snapshot is not None
    assert listed == attrs.evolve(stored, snapshot=None)


async def test_marker_expiry_on_the_mock_clock(
    store: Store, autojump_clock: trio.testing.MockClock
) -> None:
    """R51: a 60 s marker of a task whose refresher is gone stops counting at expiry,
    and the task becomes resumable without any PID check."""
    await store.put_task(_task(H1, state="running"))
    key = marker_key(SESSION, H1)
    await store.set_marker(key, expires_at=trio.current_time() + 60)
    await trio.sleep(59.5)
    assert await store.marker_alive(key, now=trio.current_time()) is True
    assert await store.list_resumable(SESSION, now=trio.current_time()) == []
    await trio.sleep(1)
    assert await store.marker_alive(key, now=trio.current_time()) is False
    assert [t.task_hash for t in await store.list_resumable(SESSION, now=trio.current_time())] == [
        H1
    ]


async def test_marker_set_refresh_delete_purge(store: Store) -> None:
    """R51: refresh moves expiry forward; delete and purge remove markers."""
    assert marker_key("cli-x", H1) == f"action:cli-x:{H1}"
    await store.set_marker("action:a", expires_at=10.0)
    await store.set_marker("action:a", expires_at=70.0)  # refresh
    await store.set_marker("action:b", expires_at=20.0)
    await store.set_marker("action:c", expires_at=30.0)
    assert await store.marker_alive("action:a", now=65.0) is True
    assert await store.marker_alive("action:missing", now=0.0) is False
    await store.delete_marker("action:a")
    await store.delete_marker("action:a")  # deleting twice is fine
    assert await store.marker_alive("action:a", now=0.0) is False
    assert await store.purge_expired_markers(now=20.0) == 1
    assert await store.marker_alive("action:c", now=20.0) is True
    assert await store.purge_expired_markers(now=20.0) == 0


# -- claim (R36, R37) ------------------------------------------------------------------


async def test_claim_success_then_conflict_then_recovery(store: Store) -> None:
    """R37, R51: a claim sets running + marker; a second one while the marker lives
    fails with the exact conflict; once the marker expired (crashed run) it wins."""
    row = _task(H1, ask_id="q" * 32)
    await store.put_task(row)
    claimed = await store.claim(SESSION, H1, now=200.0, ttl=60.0)
    assert claimed == attrs.evolve(row, state="running", updated_at=200.0)
    assert await store.get_task(SESSION, H1) == claimed
    assert await store.marker_alive(marker_key(SESSION, H1), now=259.9) is True
    assert await store.marker_alive(marker_key(SESSION, H1), now=260.0) is False

    with pytest.raises(Conflict) as caught:
        await store.claim(SESSION, H1, now=259.0, ttl=60.0)
    assert str(caught.value) == CONFLICT_RUNNING == "[Conflict] pending task: running"
    assert (await store.get_task(SESSION, H1)) == claimed  # the loser changed nothing

    again = await store.claim(SESSION, H1, now=260.0, ttl=60.0)
    assert again.updated_at == 260.0
    assert await store.marker_alive(marker_key(SESSION, H1), now=319.0) is True


async def test_claim_unknown_task(store: Store) -> None:
    """R37: a claim of a task that does not exist is NotFound, naming the hash."""
    with pytest.raises(NotFound) as caught:
        await store.claim(SESSION, H1, now=0.0, ttl=60.0)
    assert str(caught.value) == f"unknown pending task {H1}"
    assert await store.marker_alive(marker_key(SESSION, H1), now=0.0) is False


async def test_claim_moves_to_a_new_hash(store: Store) -> None:
    """R36, R37: with a new hash the row moves (resumed_from = old hash) in the same
    transaction; a racing resume of the old hash sees the conflict, not "unknown";
    once that marker lapses, the old hash is simply unknown."""
    row = _task(H1, has_jobs=False, resumed_from=None)
    await store.put_task(row)
    moved = await store.claim(SESSION, H1, now=300.0, ttl=60.0, new_task_hash=H2)
    assert moved == attrs.evolve(
        row, task_hash=H2, state="running", updated_at=300.0, resumed_from=H1
    )
    assert await store.get_task(SESSION, H1) is None
    assert await store.get_task(SESSION, H2) == moved
    assert await store.marker_alive(marker_key(SESSION, H2), now=359.0) is True

    with pytest.raises(Conflict, match=r"^\[Conflict\] pending task: running$"):
        await store.claim(SESSION, H1, now=310.0, ttl=60.0, new_task_hash=H3)
    with pytest.raises(Conflict, match=r"^\[Conflict\] pending task: running$"):
        await store.claim(SESSION, H2, now=310.0, ttl=60.0)
    with pytest.raises(NotFound, match=H1):
        await store.claim(SESSION, H1, now=360.0, ttl=60.0)
    assert [t.task_hash for t in await store.list_tasks(SESSION)] == [H2]


async def test_claim_to_a_taken_hash_changes_nothing(store: Store) -> None:
    """R36, R72: a move onto a hash in use fails and rolls the whole claim back."""
    await store.put_task(_task(H1))
    await store.put_task(_task(H2))
    with pytest.raises(Conflict, match=f"task hash {H2} is already in use"):
        await store.claim(SESSION, H1, now=10.0, ttl=60.0, new_task_hash=H2)
    assert await store.get_task(SESSION, H1) == _task(H1)
    assert await store.marker_alive(marker_key(SESSION, H1), now=10.0) is False


async def test_concurrent_claims_in_one_process(store: Store) -> None:
    """R37: of 20 concurrent claims (half with moves), exactly one wins."""
    await store.put_task(_task(H1))
    wins: list[TaskRow] = []
    conflicts: list[str] = []

    async def one(index: int) -> None:
        new_hash = f"{index:032x}" if index % 2 else None
        try:
            wins.append(await store.claim(SESSION, H1, now=5.0, ttl=60.0, new_task_hash=new_hash))
        except Conflict as exc:
            conflicts.append(str(exc))

    async with trio.open_nursery() as nursery:
        for index in range(20):
            nursery.start_soon(one, index)
    assert len(wins) == 1
    assert conflicts == [CONFLICT_RUNNING] * 19
    assert [t.task_hash for t in await store.list_tasks(SESSION)] == [wins[0].task_hash]


# -- history -----------------------------------------------------------------------------


async def test_history_order_keyword_and_limit(store: Store) -> None:
    """R45: ended runs newest first; keyword matches objective or content ignoring
    case (Unicode too) and is literal (no wildcards); limit caps; sessions are apart."""
    await store.add_history(_history(H1, 10.0, objective="Deploy the ÉCLAIR site"))
    await store.add_history(_history(H2, 30.0, content="ran make; 100% done", status="failed"))
    await store.add_history(_history(H3, 20.0, status="canceled", reasoning="why"))
    await store.add_history(attrs.evolve(_history(H4, 40.0), session_id="chat-other"))

    assert [h.task_hash for h in await store.list_history(SESSION)] == [H2, H3, H1]
    assert [h.task_hash for h in await store.list_history(SESSION, limit=2)] == [H2, H3]
    assert await store.list_history(SESSION, limit=0) == []
    assert [h.task_hash for h in await store.list_history(SESSION, keyword="éclair")] == [H1]
    assert [h.task_hash for h in await store.list_history(SESSION, keyword="RAN MAKE")] == [H2]
    assert [h.task_hash for h in await store.list_history(SESSION, keyword="100%")] == [H2]
    assert await store.list_history(SESSION, keyword="%") == [await store.get_history(SESSION, H2)]
    assert await store.list_history(SESSION, keyword="_") == []
    by_objective = await store.list_history(SESSION, keyword="OBJECTIVE")
    assert [h.task_hash for h in by_objective] == [H2, H3]
    with pytest.raises(BadRequest, match="limit must be 0 or more"):
        await store.list_history(SESSION, limit=-1)


#: Rows of the keyword tests: objective, content (issue 23's edge cases).
_SEARCHED = [
    ("Straße bauen", "ran make"),
    ("ǅemal ΣΊΣΥΦΟΣ", 'said "quoted" and it\'s NEAR(a b) * 50% _x_ AND OR : ^'),
    ("nul", "before\0after \ufffd"),
    ("aaaa", "İstanbul ﬁle"),
]


async def test_history_keyword_is_a_casefolded_substring(store: Store) -> None:
    """Issue 23, R45: a keyword matches where ``keyword.casefold()`` is a substring of
    the casefolded objective or content, on every backend and whatever its length:
    'STRASSE' finds 'Straße', short keywords too, and a keyword is data (quotes,
    ``NEAR``, ``*``, ``%``, ``_``, operators, a NUL) never query syntax."""
    rows = [
        _history(h, float(n), objective=o, content=c)
        for n, (h, (o, c)) in enumerate(zip((H1, H2, H3, H4), _SEARCHED, strict=True))
    ]
    for row in rows:
        await store.add_history(row)

    async def found(keyword: str) -> list[str]:
        return [h.task_hash for h in await store.list_history(SESSION, keyword=keyword)]

    assert await found("STRASSE") == await found("straSSe bau") == [H1]
    assert await found("ß") == await found("ss") == await found("SS") == [H1]
    assert await found("σίσυφος") == await found("ǆ") == await found("ΣΊ") == [H2]
    assert await found('"quoted"') == await found('"') == await found("'s near(") == [H2]
    assert await found("* 50% _x_") == await found("and or : ^") == await found("*") == [H2]
    assert await found("%") == await found("_") == [H2]
    assert await found("e\0a") == await found("\0") == await found("\ufffd") == [H3]
    assert await found("after") == await found("fore\0after \ufffd") == [H3]
    assert await found("aaaa") == await found("aaa") == [H4]
    assert await found("aaaaa") == await found("NEAR(a c)") == await found("\0\0") == []
    assert await found("i̇stanbul") == await found("FILE") == [H4]
    assert await found("istanbul") == []  # 'İ' folds to 'i' and a combining dot
    for keyword in ("a", "an", "ra", "e", "(", "x", "é", " ", "ran", "nul", "obj"):
        assert await found(keyword) == [
            row.task_hash
            for row in reversed(rows)
            if keyword.casefold() in row.objective.casefold()
            or keyword.casefold() in row.content.casefold()
        ], keyword


async def test_history_get_and_replace(store: Store) -> None:
    """R40: one record per run; writing a run again replaces it (and re-sorts it)."""
    first = _history(H1, 10.0, status="failed", content="error: boom")
    await store.add_history(first)
    await store.add_history(_history(H2, 10.0))
    assert await store.get_history(SESSION, H1) == first
    assert await store.get_history(SESSION, H3) is None
    # equal end_at: the later written comes first
    assert [h.task_hash for h in await store.list_history(SESSION)] == [H2, H1]
    canceled = attrs.evolve(first, status="canceled", content="[Canceled]\nerror: boom")
    await store.add_history(canceled)
    assert await store.get_history(SESSION, H1) == canceled
    assert [h.task_hash for h in await store.list_history(SESSION)] == [H1, H2]


# -- secrets and the file --------------------------------------------------------------


async def test_secrets_round_trip(store: Store) -> None:
    """R60, R73: secrets are kept per session; keys list without values."""
    await store.put_secret(SESSION, "b_token", "s3cr3t-1")
    await store.put_secret(SESSION, "a_key", "s3cr3t-2")
    await store.put_secret(SESSION, "b_token", "s3cr3t-3")
    await store.put_secret("chat-other", "c", "s3cr3t-4")
    assert await store.get_secret(SESSION, "b_token") == "s3cr3t-3"
    assert await store.get_secret(SESSION, "c") is None
    assert await store.secret_keys(SESSION) == ["a_key", "b_token"]
    assert "s3cr3t" not in repr(store)
    assert "s3cr3t" not in repr(await store.statistics(now=0.0))


async def test_session_workdir_round_trip(store: Store) -> None:
    """R86: a session's working directory is kept per session and replaced by the next
    one; a session that never had one has none."""
    assert await store.session_workdir(SESSION) is None
    await store.put_session_workdir(SESSION, "/srv/a")
    await store.put_session_workdir("chat-other", "/srv/other")
    await store.put_session_workdir(SESSION, "/srv/a b/ü")
    assert await store.session_workdir(SESSION) == "/srv/a b/ü"
    assert await store.session_workdir("chat-other") == "/srv/other"


async def test_file_is_owner_only(tmp_path: Path) -> None:
    """R60, R70: the store holds secrets: the file and its WAL are 0600, also when a
    file with a looser mode was there before."""
    path = tmp_path / "home" / "agentrio.db"
    async with open_store(path) as store:
        await store.put_secret(SESSION, "k", "v")
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        wal = path.with_name(path.name + "-wal")
        assert stat.S_IMODE(wal.stat().st_mode) == 0o600
    path.chmod(0o644)
    store = await open_sqlite_store(path)
    await store.aclose()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


async def test_reopen_keeps_everything(tmp_path: Path) -> None:
    """R72: every committed write is there after closing and reopening the file."""
    path = tmp_path / "agentrio.db"
    async with open_store(path) as store:
        await store.put_task(_task(H1))
        await store.claim(SESSION, H1, now=1.0, ttl=60.0, new_task_hash=H2)
        await store.add_history(_history(H3, 5.0))
        await store.put_secret(SESSION, "k", "v")
    async with open_store(path) as store:
        assert await store.get_task(SESSION, H2) == attrs.evolve(
            _task(H1), task_hash=H2, state="running", updated_at=1.0, resumed_from=H1
        )
        assert await store.marker_alive(marker_key(SESSION, H2), now=60.0) is True
        assert await store.get_history(SESSION, H3) == _history(H3, 5.0)
        assert await store.get_secret(SESSION, "k") == "v"
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    raw.close()


async def test_latest_task_is_written_with_the_start_of_a_run(store: Store) -> None:
    """R36: ``put_task(latest=True)`` makes the task its session's latest in the same
    write; other writes leave it alone, and sessions do not see each other's."""
    assert await store.latest_task(SESSION) is None
    await store.put_task(_task(H1, state="running"), marker_expires_at=60.0, latest=True)
    assert await store.latest_task(SESSION) == H1
    await store.put_task(_task(H2))  # a pending row written, not a run started
    assert await store.latest_task(SESSION) == H1
    await store.put_task(_task(H3, state="running"), latest=True)
    assert await store.latest_task(SESSION) == H3
    assert await store.latest_task("chat-other") is None


async def test_a_version_1_file_gains_the_sessions_table(tmp_path: Path) -> None:
    """R72: a store written by an older schema opens, keeps its rows and moves to
    the current version (version 2 only added the sessions table)."""
    path = tmp_path / "old.db"
    async with open_store(path) as store:
        await store.put_task(_task(H1))
    with sqlite3.connect(path) as raw:
        raw.execute("DROP TABLE sessions")
        raw.execute("PRAGMA user_version = 1")
    raw.close()
    async with open_store(path) as store:
        assert await store.get_task(SESSION, H1) == _task(H1)
        assert await store.latest_task(SESSION) is None
        await store.put_task(_task(H1, state="running"), latest=True)
        assert await store.latest_task(SESSION) == H1
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 6
    raw.close()


async def test_open_refuses_a_newer_schema_and_a_non_database(tmp_path: Path) -> None:
    """R72: a file the store cannot read is a clear StoreError, not a crash later."""
    newer = tmp_path / "newer.db"
    with sqlite3.connect(newer) as raw:
        raw.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    raw.close()
    with pytest.raises(StoreError, match=f"schema version {SCHEMA_VERSION + 1}, newer than"):
        await SqliteStore.open(newer)
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreError, match=r"^cannot open store junk\.db: file is not a database$"):
        await SqliteStore.open(junk)


async def test_statistics_and_close(store: Store) -> None:
    """R53: counts for /v1/health; a closed store refuses calls; aclose is idempotent."""
    assert await store.statistics(now=0.0) == StoreStatistics(
        tasks=0, history=0, markers_live=0, secrets=0, writes_total=0, write_batches=0
    )
    await store.put_task(_task(H1))
    await store.put_task(_task(H2))
    await store.claim(SESSION, H1, now=10.0, ttl=60.0)
    await store.set_marker("action:old", expires_at=5.0)
    await store.add_history(_history(H3, 1.0))
    await store.put_secret(SESSION, "k", "v")
    with pytest.raises(Conflict):
        await store.claim(SESSION, H1, now=10.0, ttl=60.0)  # not a write
    assert await store.statistics(now=10.0) == StoreStatistics(
        tasks=2, history=1, markers_live=1, secrets=1, writes_total=6, write_batches=7
    )
    await store.aclose()
    await store.aclose()
    assert "closed" in repr(store)
    with pytest.raises(trio.ClosedResourceError):
        await store.get_task(SESSION, H1)


def _hash(n: int) -> str:
    return f"{n:032x}"


async def test_concurrent_writes_are_group_committed(sqlite_store: SqliteStore) -> None:
    """R72: writes that queue behind a running transaction are committed together in
    the next one (group commit): 50 concurrent writes take exactly two transactions,
    and every one of them is stored."""
    store = sqlite_store
    async with trio.open_nursery() as nursery:
        for n in range(50):
            nursery.start_soon(store.put_task, _task(_hash(n)))
    stats = await store.statistics(now=0.0)
    assert (stats.tasks, stats.writes_total, stats.write_batches) == (50, 50, 2)
    assert [row.task_hash for row in await store.list_tasks(SESSION)] == sorted(
        _hash(n) for n in range(50)
    )


async def test_a_failing_write_is_rolled_back_alone_in_its_batch(sqlite_store: SqliteStore) -> None:
    """R37, R72: in one group commit a claim that conflicts, a claim of an unknown task
    and a write that breaks a constraint each fail on their own (savepoint rollback);
    the writes beside them commit."""
    store = sqlite_store
    await store.put_task(_task(H1))
    await store.claim(SESSION, H1, now=10.0, ttl=60.0)
    before = await store.statistics(now=10.0)
    outcomes: dict[str, str] = {}

    async def attempt(name: str, write: Any) -> None:
        try:
            await write
        except Exception as exc:
            outcomes[name] = type(exc).__name__
        else:
            outcomes[name] = "ok"

    def break_constraint(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO markers (key, expires_at) VALUES ('x', 1.0)")
        conn.execute("INSERT INTO markers (key, expires_at) VALUES ('x', 2.0)")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(attempt, "leader", store.put_task(_task(H2)))
        await trio.lowlevel.checkpoint()  # the leader is in the worker: the rest queue
        nursery.start_soon(attempt, "conflict", store.claim(SESSION, H1, now=10.0, ttl=60.0))
        nursery.start_soon(attempt, "unknown", store.claim(SESSION, H4, now=10.0, ttl=60.0))
        nursery.start_soon(attempt, "constraint", store._write("bad", break_constraint))
        nursery.start_soon(attempt, "put", store.put_task(_task(H3)))
    assert outcomes == {
        "leader": "ok",
        "conflict": "Conflict",
        "unknown": "NotFound",
        "constraint": "StoreError",
        "put": "ok",
    }
    after = await store.statistics(now=10.0)
    assert after.writes_total - before.writes_total == 2
    assert after.write_batches - before.write_batches == 2
    assert sorted(row.task_hash for row in await store.list_tasks(SESSION)) == [H1, H2, H3]
    assert not await store.marker_alive("x", now=0.0)  # the constraint write left nothing


async def test_a_queued_write_commits_even_if_its_caller_is_cancelled(
    sqlite_store: SqliteStore,
) -> None:
    """R72: a write handed to the store is committed whatever happens to its caller
    (it may already be in a batch), so a cancelled caller never leaves it half known."""
    store = sqlite_store
    async with trio.open_nursery() as nursery:
        nursery.start_soon(store.put_task, _task(H1))
        await trio.lowlevel.checkpoint()
        with trio.CancelScope() as scope:
            scope.cancel()
            await store.put_task(_task(H2))
            await trio.lowlevel.checkpoint()
        assert scope.cancelled_caught
    assert sorted(row.task_hash for row in await store.list_tasks(SESSION)) == [H1, H2]


async def test_writes_after_close_fail_cleanly(store: Store) -> None:
    """R72: a write to a closed store raises ClosedResourceError, alone or queued."""
    await store.aclose()
    with pytest.raises(trio.ClosedResourceError):
        await store.put_task(_task(H1))
    with pytest.raises(trio.ClosedResourceError):
        await store.set_marker("k", expires_at=1.0)


async def test_a_run_starts_and_ends_in_one_write_each(store: Store) -> None:
    """R51, R72: ``put_task`` with ``marker_expires_at`` stores the running row and its
    marker together; ``end_run`` records history (dropping the row) or keeps a row,
    and deletes the marker, each in one transaction."""
    key1, key2 = marker_key(SESSION, H1), marker_key(SESSION, H2)
    await store.put_task(_task(H1, state="running"), marker_expires_at=70.0)
    await store.put_task(_task(H2, state="running"), marker_expires_at=70.0)
    assert await store.marker_alive(key1, now=69.0)
    before = await store.statistics(now=0.0)

    await store.end_run(SESSION, H1, history=_history(H1, 50.0), keep=None)
    await store.end_run(SESSION, H2, history=None, keep=_task(H2, state="interrupted"))
    after = await store.statistics(now=0.0)
    assert after.write_batches - before.write_batches == 2
    assert not await store.marker_alive(key1, now=0.0)
    assert not await store.marker_alive(key2, now=0.0)
    assert await store.get_task(SESSION, H1) is None
    assert [h.task_hash for h in await store.list_history(SESSION)] == [H1]
    kept = await store.get_task(SESSION, H2)
    assert kept is not None
    assert kept.state == "interrupted"
    assert [t.task_hash for t in await store.list_resumable(SESSION, now=0.0)] == [H2]


async def test_maintain_checkpoints_the_wal_off_the_write_path(tmp_path: Path) -> None:
    """R72: ``maintain`` moves committed pages from the WAL into the database file on
    its own connection (the writer's automatic checkpoint only at 20,000 pages), stops
    when cancelled, and an inline store returns at once."""
    path = tmp_path / "agentrio.db"
    store = await SqliteStore.open(path)
    try:
        pages = await store._run("t", lambda c: c.execute("PRAGMA wal_autocheckpoint").fetchone())
        assert pages[0] == AUTOCHECKPOINT_PAGES == 20_000
        for n in range(200):
            await store.put_task(_task(_hash(n)))
        before = path.stat().st_size
        async with trio.open_nursery() as nursery:
            nursery.start_soon(partial(store.maintain, interval_s=0.01))
            with trio.fail_after(10):
                while path.stat().st_size <= before:
                    await trio.sleep(0.01)
            nursery.cancel_scope.cancel()
        assert len(await store.list_tasks(SESSION)) == 200
    finally:
        await store.aclose()
    inline = await SqliteStore.open(tmp_path / "inline.db", inline=True)
    try:
        with trio.fail_after(1):
            await inline.maintain()
    finally:
        await inline.aclose()
