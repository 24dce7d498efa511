"""The store across OS processes: the R37 claim race and the R72 kill -9 test.

Each trial starts real Python processes (``tests/engine/race_worker.py``) on one
SQLite file. Both claimers open the store and say ``ready``; only then does the test
send the start line to both, so their claims really overlap. Nothing here waits on
time: every step waits for a line from a worker.
"""

from __future__ import annotations

import json
import subprocess
import sys
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio

from agentrio.engine.messages import CONFLICT_RUNNING
from agentrio.engine.store import SqliteStore, TaskRow, marker_key
from tests.engine.race_worker import CLAIM_NOW, WRITE_NOW, open_any_store, write_snapshot
from tests.redis_server import RedisServer

ROOT = Path(__file__).resolve().parents[2]
SESSION = "chat-race"
TASK = "ab" * 16
CLAIMS_PER_PROCESS = 16
#: Generous bound for the whole of one test; a hang must fail, never block CI.
TEST_DEADLINE = 60


class _Lines:
    """Read a process's stdout line by line."""

    def __init__(self, process: trio.Process) -> None:
        assert process.stdout is not None
        self._stream = process.stdout
        self._buffer = b""

    async def next(self) -> str:
        while b"\n" not in self._buffer:
            chunk = await self._stream.receive_some(65536)
            if not chunk:
                raise AssertionError(f"worker closed stdout; got {self._buffer!r}")
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode()


async def _start_worker(nursery: trio.Nursery, *args: str) -> trio.Process:
    """Start a worker under ``trio.run_process`` in ``nursery``: when the test fails or
    times out, cancelling the nursery kills the worker and reaps it."""
    process: trio.Process = await nursery.start(
        partial(
            trio.run_process,
            [sys.executable, "-m", "tests.engine.race_worker", *args],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            check=False,
        )
    )
    return process


def _parked_task() -> TaskRow:
    return TaskRow(
        session_id=SESSION,
        task_hash=TASK,
        state="parked",
        objective="race me",
        origin="chat-",
        model="builtin",
        created_at=1.0,
        updated_at=1.0,
        snapshot={"objective": "race me"},
        questions=[],
    )


@pytest.fixture(params=["sqlite", "redis"])
def backend(request: pytest.FixtureRequest) -> str:
    """Each cross-process test runs on a SQLite file and on a real Redis (issue 21)."""
    return str(request.param)


def _location(backend: str, tmp_path: Path, name: str, request: pytest.FixtureRequest) -> str:
    """A fresh, empty store for one trial: a new SQLite file, or the flushed Redis."""
    if backend == "sqlite":
        return str(tmp_path / f"{name}.db")
    server: RedisServer = request.getfixturevalue("redis_server")
    server.flush()
    return server.url


async def _race(db: str, *, move: bool) -> list[dict[str, str]]:
    """One trial: two processes, 16 claims each, released by one start line."""
    async with open_any_store(db) as store:
        await store.put_task(_parked_task())
    flags = ["--move"] if move else []
    args = ("claim", str(db), SESSION, TASK, str(CLAIMS_PER_PROCESS), *flags)
    outcomes: list[dict[str, str]] = []
    async with trio.open_nursery() as nursery:
        workers = [await _start_worker(nursery, *args) for _ in range(2)]
        readers = [_Lines(w) for w in workers]
        for reader in readers:
            assert await reader.next() == "ready"
        for worker in workers:
            assert worker.stdin is not None
            await worker.stdin.send_all(b"go\n")
        for reader in readers:
            outcomes += json.loads(await reader.next())
        for worker in workers:
            assert await worker.wait() == 0
    return outcomes


@pytest.mark.parametrize(("trials", "move"), [(5, False), (2, True)])
async def test_two_processes_race_32_claims(
    tmp_path: Path, trials: int, move: bool, backend: str, request: pytest.FixtureRequest
) -> None:
    """R37 acceptance: two OS processes racing 32 resume claims on one SQLite file (or
    one Redis, where the processes stand for two daemons):
    exactly one wins, every other gets the conflict error carrying
    ``[Conflict] pending task: running``. Repeated to make a lost race visible; the
    ``move`` variant has every claim ask for its own new hash (R36)."""
    with trio.fail_after(TEST_DEADLINE):
        for trial in range(trials):
            db = _location(backend, tmp_path, f"trial{trial}", request)
            outcomes = await _race(db, move=move)
            assert len(outcomes) == 2 * CLAIMS_PER_PROCESS
            wins = [o["won"] for o in outcomes if "won" in o]
            losses = [o for o in outcomes if "won" not in o]
            assert len(wins) == 1, outcomes
            assert losses == [{"error": "Conflict", "message": CONFLICT_RUNNING}] * 31
            assert "[Conflict] pending task: running" in losses[0]["message"]

            async with open_any_store(db) as store:
                (row,) = await store.list_tasks(SESSION)
                assert row.task_hash == wins[0]
                assert row.state == "running"
                assert row.updated_at == CLAIM_NOW
                assert row.resumed_from == (TASK if move else None)
                if move:
                    assert wins[0] != TASK
                else:
                    assert wins[0] == TASK
                key = marker_key(SESSION, wins[0])
                assert await store.marker_alive(key, now=CLAIM_NOW + 59.9) is True
                assert await store.marker_alive(key, now=CLAIM_NOW + 60) is False


async def test_kill_9_mid_write_leaves_a_store_that_loads(
    tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    """R72: a writer killed with SIGKILL in the middle of its writes leaves a store that
    opens; every write it reported is there whole (a row and its marker), nothing is
    torn; and once the marker TTL has passed every running task is resumable."""
    db = _location(backend, tmp_path, "crash", request)
    if backend == "sqlite":
        await (await SqliteStore.open(Path(db))).aclose()
    with trio.fail_after(TEST_DEADLINE):
        async with trio.open_nursery() as nursery:
            writer = await _start_worker(nursery, "write", db, SESSION)
            reader = _Lines(writer)
            reported = [await reader.next() for _ in range(12)]
            writer.kill()  # SIGKILL: no cleanup runs in the writer
            await writer.wait()
    assert reported == [f"wrote {i}" for i in range(12)]
    assert writer.returncode == -9

    async with open_any_store(db) as store:
        rows = await store.list_tasks(SESSION)
        # the writer may have committed a few more before the kill landed, never fewer
        assert len(rows) >= 12
        indexes = sorted(int(row.task_hash, 16) for row in rows)
        assert indexes == list(range(len(rows)))
        for row in rows:
            index = int(row.task_hash, 16)
            expected: dict[str, Any] = write_snapshot(index)
            assert row.snapshot == expected
            assert row.state == "running"
        for index in range(12):
            key = marker_key(SESSION, f"{index:032x}")
            assert await store.marker_alive(key, now=WRITE_NOW) is True
        # only the last row can miss its marker (killed between the two writes)
        live_now = await store.list_resumable(SESSION, now=WRITE_NOW)
        assert [row.task_hash for row in live_now] in ([], [f"{len(rows) - 1:032x}"])
        resumable = await store.list_resumable(SESSION, now=WRITE_NOW + 60)
        assert {row.task_hash for row in resumable} == {row.task_hash for row in rows}
