"""B14: assembling a task's input from a long session (issue 31, item 3).

A fresh SQLite store gets a session of 100, 10,000 and 100,000 earlier exchanges
(each: an input, an assistant turn with a ``run_command`` call, its ~600-byte result
and a reply), written straight into its ``exchanges`` table. Each sample is what a run
does when it starts (`agentrio.engine.compaction.load_context`): read the session's
summary and tail from the store (`Store.conversation`, at most
`agentrio.engine.conversation.WINDOW` exchanges) and fit it in ``[model]
context_tokens`` less the reply's reserve (the default 128,000 tokens). The peak of
the memory one assembly allocates (``tracemalloc``) is measured too.

Targets: p50 ≤ 5 ms at every size, and the peak memory of an assembly at 100,000
exchanges at most 1.2× the one at 10,000 (it must not grow with the session's length
once the session is longer than the window; at 100 it is shorter).
``python -m bench.b14_conversation`` (``--quick``: fewer probes).
"""

from __future__ import annotations

import sqlite3
import tempfile
import time
import tracemalloc
from pathlib import Path

import trio

from agentrio.engine.compaction import budget
from agentrio.engine.config import ModelConfig
from agentrio.engine.conversation import WINDOW, Calibration, exchange_json, fit
from agentrio.engine.models import Message, ToolCallRequest
from agentrio.engine.store import SqliteStore
from bench.common import BenchArgs, BenchResult, Stats, machine_line, main

__all__ = ["run"]

SESSION = "cli-b14"
SIZES = (100, 10_000, 100_000)


def _exchange(i: int) -> str:
    call = ToolCallRequest(id=f"call_{i}", name="run_command", args={"command": f"ls -la /tmp/{i}"})
    return exchange_json(
        [
            Message(role="user", content=f"task {i}: list what is in /tmp/{i} and tell me " * 2),
            Message(role="assistant", content="Let me look.", tool_calls=[call]),
            Message(
                role="tool",
                content=("exit 0\n" + f"-rw-r--r-- 1 ada ada 4096 file-{i}.txt\n" * 12),
                tool_call_id=call.id,
                name="run_command",
            ),
            Message(role="assistant", content=f"There are twelve files in /tmp/{i}. " * 4),
        ]
    )


async def _fill(path: Path, size: int) -> None:
    store = await SqliteStore.open(path)  # creates the schema
    await store.aclose()
    conn = sqlite3.connect(path)
    rows = ((SESSION, f"t{i:07d}", 1_800_000_000.0 + i, _exchange(i)) for i in range(size))
    with conn:
        conn.executemany(
            "INSERT INTO exchanges (session_id, task_hash, end_at, messages) VALUES (?, ?, ?, ?)",
            rows,
        )
    conn.close()


async def _measure(path: Path, probes: int) -> tuple[Stats, int, int]:
    room = budget(ModelConfig())
    store = await SqliteStore.open(path)
    try:
        samples: list[int] = []
        kept = 0
        for _ in range(probes):
            started = time.perf_counter_ns()
            stored = await store.conversation(SESSION, limit=WINDOW)
            fitted = fit(stored, budget=room, calibration=Calibration())
            samples.append(time.perf_counter_ns() - started)
            kept = len(fitted.messages)
        tracemalloc.start()
        stored = await store.conversation(SESSION, limit=WINDOW)
        fit(stored, budget=room, calibration=Calibration())
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    finally:
        await store.aclose()
    return Stats.of_ns(samples), peak, kept


def run(args: BenchArgs) -> BenchResult:
    result = BenchResult("B14", "Assembling a task's input from a long session")
    probes = 30 if args.quick else 200
    peaks: dict[int, int] = {}
    with tempfile.TemporaryDirectory(prefix="agentrio-b14-") as tmp:
        for size in SIZES:
            path = Path(tmp) / f"store-{size}.db"
            trio.run(_fill, path, size)
            stats, peak, kept = trio.run(_measure, path, probes)
            peaks[size] = peak
            result.add(
                f"assemble, {size:,} earlier exchanges",
                f"{stats.short()}; {kept} messages sent",
                target="p50 ≤ 5 ms",
                met=stats.p50 <= 5.0,
            )
    growth = peaks[SIZES[-1]] / peaks[SIZES[1]]
    result.add(
        "peak memory of one assembly",
        ", ".join(f"{s:,}: {peaks[s] / 1024:.0f} KiB" for s in SIZES),
        ratio=f"{growth:.2f}×",
        target="≤ 1.2× from 10,000 to 100,000",
        met=growth <= 1.2,
    )
    result.notes.append(machine_line())
    return result


if __name__ == "__main__":
    main(run)
