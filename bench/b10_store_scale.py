"""B10: the SQLite store at scale (issue 23): what one call costs as the file grows.

At each size given on the command line, a fresh store file gets that many history
rows in one session (plus a few in others) and that many stored task rows, written
through the store's own API. Then, each as a p50 over ``--probes`` calls:

* **search, no match**: ``list_history(keyword=…)`` with a keyword no row holds
  (the worst case of a scan: every row of the session is looked at).
* **search, oldest**: a keyword only the oldest row holds.
* **search, words**: two words of the text, next to each other in a few rows: their
  trigrams are in most rows, so the index reads long lists (the index's worst case).
* **search, short**: a two-character keyword no row holds (below the index's three
  characters: the documented fallback, docs/deployment.md).
* **search, common**: a keyword every row holds (the page of 20 newest).
* **task start**: the write a run starts with (``put_task`` with its marker and as
  the session's latest, runs.py), then its end (``end_run`` keeping the row), so the
  number of stored tasks stays the same.
* **by origin**: ``list_resumable_by_origin("cli-")`` (a reopened REPL's listing) on
  a store whose tasks are all ``chat-`` ones.
* **history write**: ``add_history`` of one new row (~500 characters of text).
* **WAL**: the size of the ``-wal`` file after the writes and one checkpoint pass.

Not part of ``make bench`` (no daemon, no target): a measurement to compare sizes in
one run, as ratios. ``python -m bench.b10_store_scale`` runs 1,000 and 10,000;
``--sizes 1000,100000`` chooses.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from functools import partial
from pathlib import Path

import trio

from agentrio.engine.store import HistoryRow, SqliteStore, TaskRow
from bench.common import Stats, machine_line

__all__ = ["main", "measure"]

SESSION = "chat-b9"
WORDS = (
    "deploy build test lint format release branch merge commit push docker image "
    "service config nginx postgres redis queue worker cache token secret backup "
    "restore migrate schema index table column query latency error warning retry "
    "timeout socket thread process memory disk network cluster node replica shard"
).split()
#: Concurrent writers while filling: the store group-commits them, up to its batch size.
WRITERS = 256


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) + str(rng.randrange(100)) for _ in range(words))


def _history(i: int, rng: random.Random, session_id: str = SESSION) -> HistoryRow:
    objective = "first zyxwvu task" if i == 0 else _text(rng, 6)
    return HistoryRow(
        session_id=session_id,
        task_hash=f"{i:032x}",
        end_at=1_000.0 + i,
        objective=objective,
        model="builtin",
        reasoning="",
        status="finished",
        content=f"user: {objective}\nassistant: ran `{_text(rng, 10)}`\n{_text(rng, 50)}",
    )


def _task(i: int, session_id: str, state: str = "parked") -> TaskRow:
    return TaskRow(
        session_id=session_id,
        task_hash=f"{i:032x}",
        state=state,  # type: ignore[arg-type]
        objective=f"objective {i}",
        origin="chat-",
        model="builtin",
        created_at=1_000.0 + i,
        updated_at=1_000.0 + i,
        snapshot={
            "objective": f"objective {i}",
            "messages": [{"role": "user", "content": "x" * 400}],
        },
        questions=[],
    )


async def _fill(store: SqliteStore, size: int) -> None:
    rng = random.Random(size)
    rows = [_history(i, rng) for i in range(size)]
    rows += [_history(size + i, rng, f"chat-b9-other-{i}") for i in range(100)]
    tasks = [_task(i, f"chat-b9-{i % 1000}") for i in range(size)]

    async def write(part: int) -> None:
        for row in rows[part::WRITERS]:
            await store.add_history(row)
        for task in tasks[part::WRITERS]:
            await store.put_task(task)

    async with trio.open_nursery() as nursery:
        for part in range(WRITERS):
            nursery.start_soon(write, part)


async def _p50(probes: int, call: object) -> Stats:
    samples = []
    for _ in range(probes):
        t0 = time.perf_counter_ns()
        await call()  # type: ignore[operator]
        samples.append(time.perf_counter_ns() - t0)
    return Stats.of_ns(samples)


async def measure(size: int, probes: int, folder: Path) -> dict[str, Stats | float]:
    """The p50s at ``size`` rows (and the WAL size in MiB after one checkpoint)."""
    store = await SqliteStore.open(folder / f"b9-{size}.db")
    try:
        started = time.perf_counter()
        await _fill(store, size)
        fill_s = time.perf_counter() - started
        out: dict[str, Stats | float] = {"fill_s": fill_s}
        for name, keyword in (
            ("search_none", "qqqxjz"),
            ("search_oldest", "ZYXWVU"),
            ("search_words", "NGINX7 redis"),
            ("search_short", "qj"),
            ("search_common", "user:"),
        ):

            async def search(keyword: str = keyword) -> None:
                await store.list_history(SESSION, keyword=keyword, limit=20)

            out[name] = await _p50(probes, search)
        found = await store.list_history(SESSION, keyword="ZYXWVU", limit=20)
        assert [row.task_hash for row in found] == [f"{0:032x}"], found
        start = _task(size + 1, SESSION, "running")

        async def task_start() -> None:
            await store.put_task(start, marker_expires_at=9e9, latest=True)
            await store.end_run(SESSION, start.task_hash, history=None, keep=start)

        out["task_start"] = await _p50(probes, task_start)

        async def by_origin() -> None:
            await store.list_resumable_by_origin("cli-", now=0.0, limit=50)

        out["by_origin"] = await _p50(probes, by_origin)
        rng = random.Random(-size)
        written = iter(range(size + 1_000, size + 1_000 + probes))

        async def history_write() -> None:
            await store.add_history(_history(next(written), rng))

        out["history_write"] = await _p50(probes, history_write)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(partial(store.maintain, interval_s=0.05))
            await trio.sleep(0.3)
            await store.put_secret(SESSION, "k", "v")  # the first write after it
            await trio.sleep(0.3)
            nursery.cancel_scope.cancel()
        wal = store.path.with_name(store.path.name + "-wal")
        out["wal_mib"] = wal.stat().st_size / 2**20
        return out
    finally:
        await store.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000", help="comma-separated row counts")
    parser.add_argument("--probes", type=int, default=50)
    ns = parser.parse_args()
    sizes = [int(s) for s in ns.sizes.split(",")]
    print(f"== B10: the store at scale; {machine_line()}")
    with tempfile.TemporaryDirectory(prefix="agentrio-b9-") as folder:
        for size in sizes:
            result = trio.run(measure, size, ns.probes, Path(folder))
            parts = [f"filled in {result.pop('fill_s'):.1f} s"]
            parts.append(f"WAL {result.pop('wal_mib'):.1f} MiB")
            print(f"  {size:>9,} rows: " + ", ".join(parts))
            for name, stats in result.items():
                assert isinstance(stats, Stats)
                print(f"    {name:<14} {stats.short()}")


if __name__ == "__main__":
    main()
