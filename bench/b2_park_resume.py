"""B2: park → snapshot → resume of a non-cli ``ask_user``, against LangGraph's
``interrupt()`` / ``Command(resume=…)`` with its SQLite checkpointer.

* **agentrio**: an in-process engine (`open_engine`, SQLite store on a file, builtin
  model). One cycle: ``start_task("chat-…", "ask: Continue? | yes, no")`` runs to the
  ``ask_user`` call, which parks (R11: snapshot written, run ended); then
  ``resume(answers=["yes"])`` claims it (R37), runs the new turn and finishes.
* **agentrio on Redis**: the same cycles with ``[store] backend = "redis"`` against a
  ``redis-server`` this bench starts on a free loopback port (no persistence, as
  tests/redis_server.py starts it), so the table shows the Redis store's cost beside
  SQLite's and LangGraph's in one run. Skipped, with a note, without ``redis-server``.
* **LangGraph**: a one-node ``StateGraph`` whose node calls ``interrupt()``, compiled
  with ``SqliteSaver`` on a file. One cycle: ``invoke`` until the interrupt, then
  ``invoke(Command(resume="yes"))`` to the end, on a fresh ``thread_id``.

Each sample is one whole cycle, start to finish; SQLite and LangGraph write to a file on
the same disk. The phases alternate (SQLite, Redis, LangGraph, twice).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any, TypedDict

import trio

from agentrio.engine import Config, Engine, open_engine
from agentrio.engine.config import StoreConfig
from bench.common import BenchArgs, BenchResult, Stats, main, profiling, redis_server

__all__ = ["langgraph_app", "run"]

TARGET_RATIO = 0.4


class _State(TypedDict, total=False):
    question: str
    answer: str


def langgraph_app(db: Path, after: Any = None) -> tuple[Any, Any]:
    """A compiled one-node graph that interrupts once, and its saver's context manager
    (the caller enters it first). ``after(answer)`` runs after the interrupt (B6 counts
    its executions)."""
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import interrupt

    def ask(state: _State) -> _State:
        answer = interrupt({"question": state.get("question", "Continue?")})
        if after is not None:
            after(answer)
        return {"answer": str(answer)}

    builder = StateGraph(_State)
    builder.add_node("ask", ask)
    builder.add_edge(START, "ask")
    builder.add_edge("ask", END)
    saver_cm = SqliteSaver.from_conn_string(str(db))
    return builder, saver_cm


def _langgraph_cycles(db: Path, warmup: int, count: int, batches: int) -> list[list[int]]:
    from langgraph.types import Command

    builder, saver_cm = langgraph_app(db)
    out: list[list[int]] = []
    with saver_cm as saver:
        graph = builder.compile(checkpointer=saver)
        serial = 0

        def cycle() -> int:
            nonlocal serial
            serial += 1
            config = {"configurable": {"thread_id": f"t{serial}"}}
            t0 = time.perf_counter_ns()
            first = graph.invoke({"question": "Continue?"}, config)
            assert "__interrupt__" in first, first
            final = graph.invoke(Command(resume="yes"), config)
            elapsed = time.perf_counter_ns() - t0
            assert final["answer"] == "yes", final
            return elapsed

        for _ in range(warmup):
            cycle()
        for _ in range(batches):
            out.append([cycle() for _ in range(count)])
    return out


async def _agentrio_cycle(engine: Engine, session_id: str) -> int:
    t0 = time.perf_counter_ns()
    run = await engine.start_task(session_id, "ask: Continue? | yes, no")
    parked = await run.wait_done()
    resumed = await engine.resume(session_id, run.task_hash, answers=["yes"])
    finished = await resumed.wait_done()
    elapsed = time.perf_counter_ns() - t0
    assert parked.status == "parked", parked
    assert finished.status == "finished", finished
    return elapsed


async def _agentrio_cycles(
    config: Config, warmup: int, count: int, batches: int, profile: Path | None
) -> list[list[int]]:
    out: list[list[int]] = []
    async with open_engine(config) as engine:
        for i in range(warmup):
            await _agentrio_cycle(engine, f"chat-b2w{i % 8}")
        with profiling(profile):
            for b in range(batches):
                out.append(
                    [await _agentrio_cycle(engine, f"chat-b2-{b}-{i % 8}") for i in range(count)]
                )
    return out


def run(args: BenchArgs) -> BenchResult:
    warmup, count, batches = (10, 20, 2) if args.quick else (30, 100, 4)
    agentrio: list[int] = []
    on_redis: list[int] = []
    langgraph: list[int] = []
    with (
        tempfile.TemporaryDirectory(prefix="agentrio-b2-") as tmp,
        redis_server(Path(tmp) / "redis") as redis_url,
    ):
        home = Path(tmp)
        sqlite_config = Config(home=str(home / "agentrio"))
        # Alternate whole phases: each phase keeps its store open across its batches.
        for phase in range(2):
            for batch in trio.run(
                _agentrio_cycles,
                sqlite_config,
                warmup,
                count,
                batches // 2,
                args.profile if phase == 0 else None,
            ):
                agentrio.extend(batch)
            if redis_url is not None:
                redis_config = Config(
                    home=str(home / "agentrio-redis"),
                    store=StoreConfig(backend="redis", url=redis_url, prefix="b2:"),
                )
                for batch in trio.run(
                    _agentrio_cycles, redis_config, warmup, count, batches // 2, None
                ):
                    on_redis.extend(batch)
            for batch in _langgraph_cycles(
                home / f"langgraph-{phase}.db", warmup, count, batches // 2
            ):
                langgraph.extend(batch)
    ours, theirs = Stats.of_ns(agentrio), Stats.of_ns(langgraph)
    ratio50, ratio99 = ours.p50 / theirs.p50, ours.p99 / theirs.p99
    result = BenchResult("B2", "Park → snapshot → resume (ask_user) vs LangGraph interrupt")
    result.add(
        "cycle p50",
        f"{ours.p50:.3f} ms",
        f"LangGraph {theirs.p50:.3f} ms",
        f"{ratio50:.2f}×",
        f"≤ {TARGET_RATIO}×",
        ratio50 <= TARGET_RATIO,
    )
    result.add(
        "cycle p99",
        f"{ours.p99:.3f} ms",
        f"LangGraph {theirs.p99:.3f} ms",
        f"{ratio99:.2f}×",
        f"≤ {TARGET_RATIO}×",
        ratio99 <= TARGET_RATIO,
    )
    if on_redis:
        redis = Stats.of_ns(on_redis)
        for name in ("p50", "p99"):
            value, base, sqlite = (getattr(s, name) for s in (redis, theirs, ours))
            result.add(
                f"cycle {name}, Redis store",
                f"{value:.3f} ms",
                f"LangGraph {base:.3f} ms; SQLite store {sqlite:.3f} ms",
                f"{value / base:.2f}× LangGraph, {value / sqlite:.2f}× SQLite",
            )
    else:
        result.notes.append("redis-server is not installed: the Redis store was not measured")
    result.notes.append(
        f"{ours.n} cycles each; agentrio: start_task → parked (snapshot in SQLite, WAL, "
        "synchronous=NORMAL) → resume(answers) → finished, builtin model; LangGraph: "
        "invoke → interrupt → invoke(Command(resume)) with SqliteSaver on a file; Redis rows: "
        "the same agentrio cycles on a local redis-server (no persistence), no target"
    )
    return result


if __name__ == "__main__":
    main(run)
