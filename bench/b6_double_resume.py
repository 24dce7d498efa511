"""B6: the double-resume race: 32 concurrent resumes of one parked task × 100 trials.

* **agentrio**: an in-process engine parks a ``chat-`` ``ask_user`` task, then 32 Trio
  tasks call ``engine.resume(answers=["yes"])`` at once (each goes through the store's
  atomic claim, R37, in its own worker thread). An execution is a resume call that
  returned a run which then ran its turn to ``finished``.
* **LangGraph**: the B2 graph on ``SqliteSaver``; after the first ``invoke`` stops at
  the interrupt, 32 threads released by one barrier each call
  ``invoke(Command(resume="yes"))`` on the same ``thread_id``. An execution is one run
  of the code after ``interrupt()`` in the node.

Duplicates per trial are executions beyond the first; the table shows their sum.
"""

from __future__ import annotations

import tempfile
import threading
from pathlib import Path
from typing import Any

import trio

from agentrio.engine import Config, TaskRun, open_engine
from agentrio.engine.errors import Conflict
from bench.b2_park_resume import langgraph_app
from bench.common import BenchArgs, BenchResult, main

__all__ = ["run"]

RESUMERS = 32


async def _agentrio(home: Path, trials: int) -> tuple[int, int, int]:
    """(duplicates, trials with no winner, conflicts)."""
    duplicates = no_winner = conflicts = 0
    async with open_engine(Config(home=str(home))) as engine:
        for trial in range(trials):
            session_id = f"chat-b6-{trial}"
            parked = await engine.start_task(session_id, "ask: Continue? | yes, no")
            assert (await parked.wait_done()).status == "parked"
            runs: list[TaskRun] = []
            lost = 0

            async def resume(session_id: str, task_hash: str, runs: list[TaskRun]) -> None:
                nonlocal lost
                try:
                    runs.append(await engine.resume(session_id, task_hash, answers=["yes"]))
                except Conflict:
                    lost += 1

            async with trio.open_nursery() as nursery:
                for _ in range(RESUMERS):
                    nursery.start_soon(resume, session_id, parked.task_hash, runs)
            executed = 0
            for resumed in runs:
                if (await resumed.wait_done()).status == "finished":
                    executed += 1
            duplicates += max(0, executed - 1)
            no_winner += executed == 0
            conflicts += lost
    return duplicates, no_winner, conflicts


def _langgraph(db: Path, trials: int) -> tuple[int, int, int]:
    """(duplicates, trials with no execution, resume calls that raised)."""
    from langgraph.types import Command

    lock = threading.Lock()
    executions: list[int] = [0]

    def after(_answer: Any) -> None:
        with lock:
            executions[0] += 1

    builder, saver_cm = langgraph_app(db, after=after)
    duplicates = none = errors = 0
    with saver_cm as saver:
        graph = builder.compile(checkpointer=saver)
        for trial in range(trials):
            config = {"configurable": {"thread_id": f"race-{trial}"}}
            assert "__interrupt__" in graph.invoke({"question": "Continue?"}, config)
            executions[0] = 0
            barrier = threading.Barrier(RESUMERS)
            failed: list[BaseException] = []

            def resume(
                config: dict[str, Any], barrier: threading.Barrier, failed: list[BaseException]
            ) -> None:
                barrier.wait()
                try:
                    graph.invoke(Command(resume="yes"), config)
                except Exception as exc:
                    with lock:
                        failed.append(exc)

            threads = [
                threading.Thread(target=resume, args=(config, barrier, failed))
                for _ in range(RESUMERS)
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            duplicates += max(0, executions[0] - 1)
            none += executions[0] == 0
            errors += len(failed)
    return duplicates, none, errors


def run(args: BenchArgs) -> BenchResult:
    trials = 10 if args.quick else 100
    with tempfile.TemporaryDirectory(prefix="agentrio-b6-") as tmp:
        ours, no_winner, conflicts = trio.run(_agentrio, Path(tmp) / "home", trials)
        theirs, none, errors = _langgraph(Path(tmp) / "langgraph.db", trials)
    result = BenchResult("B6", f"Double-resume race: {RESUMERS} concurrent resumes × {trials}")
    result.add(
        "duplicate executions",
        str(ours),
        f"LangGraph {theirs}",
        "",
        "0",
        ours == 0 and no_winner == 0,
    )
    result.notes.append(
        f"agentrio: {conflicts} of {RESUMERS * trials} resumes got [Conflict] pending task: "
        f"running; trials with no winner: {no_winner}. LangGraph: trials with no execution: "
        f"{none}; resume calls that raised: {errors}"
    )
    return result


if __name__ == "__main__":
    main(run)
