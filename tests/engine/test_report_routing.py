"""A report taken back from a run that ended unread is never lost to a settling
decided while it is being routed again (R26)."""

from __future__ import annotations

from collections import deque
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
import trio
import trio.testing

from agentrio.engine.background.jobs import Job, Leg
from agentrio.engine.background.routing import ReportRouter
from agentrio.engine.background.starter import TaskStarter
from agentrio.engine.nursery_tasks import TaskHandle
from agentrio.engine.runs import TaskOutcome, TaskRun
from agentrio.engine.tools.base import Services


class _GatedStore:
    """The store's task lookup waits for ``opened``: a slow read, the gap in which the
    leg's own end used to settle the job (the fault a real SQLite file gives only now
    and then under load)."""

    def __init__(self) -> None:
        self.opened = trio.Event()

    async def get_task(self, session_id: str, task_hash: str) -> None:
        await self.opened.wait()


class _Tasks:
    def __init__(self) -> None:
        self.runs: dict[str, Any] = {}
        self.hub = SimpleNamespace(emit=lambda *args, **kwargs: None)
        self.started: list[str] = []
        self.origins: list[Any] = []

    def session(self, session_id: str) -> Any:
        return SimpleNamespace(runs=self.runs, hub=self.hub)

    async def start_task(self, session_id: str, text: str, **kwargs: Any) -> Any:
        self.started.append(text)
        self.origins.append(kwargs.get("origin"))
        return SimpleNamespace(task_hash="f" * 32)


@pytest.mark.parametrize("share_asks", [False, True])
async def test_a_report_routed_again_as_its_run_ends_makes_the_followup(
    tmp_path: Path, share_asks: bool
) -> None:
    """R26: a leg's report reached its task as the task finished (pushed into the run,
    never read). The run's end takes it back and routes it again; while that routing
    waits on the store, the leg's end (recorded) tries to settle the job. The settling
    waits for the routing, so the job settles holding the report and its follow-up
    runs once with it, instead of settling with nothing held and dropping the report.

    R99: the follow-up of a task whose asks were the session's (``agentrio exec``)
    shares its asks too: its starting window may be long closed."""
    store = _GatedStore()
    tasks = _Tasks()
    services = cast(Services, SimpleNamespace(store=store, clock=lambda: 0.0))
    router = ReportRouter(services, cast(TaskStarter, tasks), on_settled=lambda job: None)
    job = Job(
        id="job_1",
        session_id="cli-x",
        task_hash="a" * 32,
        objective="echo in the background",
        next="say it finished",
        window_hash="w",
        share_asks=share_asks,
        path=tmp_path / "job_1.json",
        created_at=0.0,
        updated_at=0.0,
    )
    leg = Leg(id="cmd_1", kind="cmd", label="echo hi", job=job, handle=TaskHandle("cmd_1"))
    leg.state, leg.result = "finished", "exit 0\nhi\n"
    job.legs.append(leg)
    run = SimpleNamespace(
        session_id=job.session_id,
        task_hash=job.task_hash,
        reports=deque(),
        outcome=TaskOutcome(status="finished"),
        handle=SimpleNamespace(cause=None),
    )
    tasks.runs[job.task_hash] = run
    await router.deliver(job, "[Background Report — background task finished] hi")
    assert list(run.reports) == ["[Background Report — background task finished] hi"]
    del tasks.runs[job.task_hash]  # the run ended without another turn

    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(router.task_ended, cast(TaskRun, run), [job])
            await trio.testing.wait_all_tasks_blocked()  # routing again, in the store
            leg.recorded = True
            nursery.start_soon(router.maybe_settle, job)  # the leg's own end
            await trio.testing.wait_all_tasks_blocked()
            assert not job.settled  # it waits for the routing under way
            store.opened.set()
    assert job.settled
    assert job.held == 1
    assert len(tasks.started) == 1
    assert tasks.started[0].startswith("[Resumed Task — background group finished]")
    assert "hi" in tasks.started[0]
    assert job.followup_task == "f" * 32
    assert (tasks.origins[0].window_hash, tasks.origins[0].share_asks) == ("w", share_asks)
