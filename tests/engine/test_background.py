"""Background legs and jobs through the in-process engine (R20-R27, R30, R44).

Routing and limiter tests use sub-agent legs driven by `Puppet`, a model whose child
runs wait on gates the test opens: no subprocess runs, so the mock clock may autojump.
Command legs run real subprocesses and therefore use real time (and short commands).
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import attrs
import pytest
import trio
import trio.testing

from agentrio.engine.assembly import open_engine
from agentrio.engine.background import Job, Leg
from agentrio.engine.config import BackgroundConfig, Config
from agentrio.engine.core import Engine
from agentrio.engine.errors import NotFound
from agentrio.engine.messages import FOLLOWUP_HEADER, REPORT_FINISHED_HEADER, REPORT_UPDATE_HEADER
from agentrio.engine.models.base import (
    Message,
    ModelReply,
    RetrySink,
    TextSink,
    ToolCallRequest,
    ToolSpec,
)
from agentrio.engine.nursery_tasks import TaskHandle
from agentrio.engine.processes.groups import group_alive
from agentrio.engine.snapshot import snapshot_from_json
from agentrio.engine.store import SqliteStore, TaskRow
from agentrio.protocol import events as ev
from agentrio.protocol.causes import Cause
from tests.engine.conftest import first_input

SESSION = "cli-bg"
_E = TypeVar("_E", bound=ev.Event)
TurnFn = Callable[[Sequence[Message], Sequence[ToolSpec]], Awaitable[ModelReply]]
Turn = ModelReply | TurnFn


class Puppet:
    """Parent turns come from a list; a child (objective starting with ``child``) runs
    its own list, then waits for its gate and answers ``<objective>: done``."""

    name = "puppet"

    def __init__(self, parent: Sequence[Turn], children: dict[str, list[Turn]] | None = None):
        self.parent = list(parent)
        self.children = dict(children or {})
        self.gates: defaultdict[str, trio.Event] = defaultdict(trio.Event)
        self.tools: list[tuple[str, set[str]]] = []

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        *,
        on_text: TextSink | None = None,
        on_retry: RetrySink | None = None,
    ) -> ModelReply:
        await trio.lowlevel.checkpoint()
        first = first_input(messages)
        self.tools.append((first, {tool.name for tool in tools}))
        if first.startswith("child"):
            queue = self.children.get(first)
            if queue:
                turn = queue.pop(0)
            else:
                await self.gates[first].wait()
                return ModelReply(text=f"{first}: done")
        else:
            turn = self.parent.pop(0)
        return turn if isinstance(turn, ModelReply) else await turn(messages, tools)


def followup_into(follow: list[str]) -> TurnFn:
    """A follow-up turn: records the follow-up task's own input (the last message; the
    session's earlier exchanges come before it), answers ``summary``."""

    async def followup(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelReply:
        follow.append(messages[-1].content)
        return ModelReply(text="summary")

    return followup


def call(name: str, call_id: str = "c1", **args: Any) -> ToolCallRequest:
    return ToolCallRequest(id=call_id, name=name, args=args)


def subagents(*objectives: str, call_id: str = "c1") -> ToolCallRequest:
    return call(
        "background_subagents",
        call_id,
        objectives=list(objectives),
        objective="Count things",
        next="Tell the user",
    )


async def hang(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelReply:
    await trio.sleep_forever()
    raise AssertionError("unreachable")


async def wait_event(
    engine: Engine,
    kind: type[_E],
    pred: Callable[[_E], bool] = lambda e: True,
    session_id: str = SESSION,
) -> _E:
    """The first event of ``kind`` (replayed or live) that ``pred`` accepts."""
    with engine.session(session_id).hub.subscribe() as subscription:
        async for _, event in subscription:
            if isinstance(event, kind) and pred(event):
                return event
    raise AssertionError("subscription closed")


def events(engine: Engine, kind: type[_E], session_id: str = SESSION) -> list[_E]:
    hub = engine.session(session_id).hub
    with hub.subscribe() as subscription:
        found: list[_E] = []
        while True:
            try:
                _, event = subscription.receive_nowait()
            except trio.WouldBlock:
                return found
            if isinstance(event, kind):
                found.append(event)


def only_job(engine: Engine) -> Job:
    jobs = engine.background.jobs()
    assert len(jobs) == 1
    return jobs[0]


async def test_report_reaches_the_running_task(
    config: Config, autojump_clock: trio.testing.MockClock, wall_clock: Callable[[], float]
) -> None:
    """R26 running, R25: a report arriving while the task runs is added at the start of
    its next turn (it would have finished: it gets one more turn); the job settles with
    no follow-up because the task took every report."""
    seen: list[str] = []

    async def wait_for_report(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelReply:
        model.gates["child A"].set()
        await wait_event(engine, ev.LegFinished)  # said once the report is routed
        assert run.reports
        return ModelReply(text="waiting")

    async def read_report(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelReply:
        seen.append(messages[-1].content)
        return ModelReply(text="got it")

    model = Puppet([ModelReply(tool_calls=[subagents("child A")]), wait_for_report, read_report])
    async with open_engine(config, model=model, clock=wall_clock) as engine:
        run = await engine.start_task(SESSION, "start the work")
        outcome = await run.wait_done()
        assert (outcome.status, outcome.text) == ("finished", "got it")
        job = only_job(engine)
        assert len(seen) == 1
        report = seen[0]
        assert report.startswith(f"{REPORT_FINISHED_HEADER}\nJob {job.id}: Count things\n")
        assert f"Leg {job.legs[0].id} (sub-agent: child A) finished." in report
        settled = await wait_event(engine, ev.JobSettled)
        assert (settled.job_id, settled.followup_task) == (job.id, None)
        assert len(events(engine, ev.TaskStarted)) == 1
        data = json.loads(job.path.read_text())
        assert data["settled"] is True
        assert data["task_hash"] == run.task_hash
        assert [leg["state"] for leg in data["legs"]] == ["finished"]


async def test_report_is_carried_into_a_parked_task_resume(
    config: Config, autojump_clock: trio.testing.MockClock, wall_clock: Callable[[], float]
) -> None:
    """R26 parked, R35: a report for a parked task goes into its snapshot (has_jobs set,
    the hash kept on resume) and its resume message; no follow-up runs."""
    resumed: list[str] = []

    async def after_resume(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelReply:
        resumed.append(first_input(messages))
        return ModelReply(text="resumed")

    ask = call("ask_user", "c2", questions=[{"text": "Colour?"}])
    model = Puppet([ModelReply(tool_calls=[subagents("child B"), ask]), after_resume])
    async with open_engine(config, model=model, clock=wall_clock) as engine:
        run = await engine.start_task(SESSION, "start and ask")
        assert (await run.wait_done()).status == "parked"
        model.gates["child B"].set()
        settled = await wait_event(engine, ev.JobSettled)
        assert settled.followup_task is None
        row = await engine.store.get_task(SESSION, run.task_hash)
        assert row is not None
        assert row.has_jobs
        assert row.snapshot is not None
        reports = snapshot_from_json(row.snapshot).reports
        assert len(reports) == 1
        assert reports[0].startswith(REPORT_FINISHED_HEADER)
        engine.session(SESSION).latest_task = "0" * 32  # has_jobs alone keeps the hash
        again = await engine.resume(SESSION, run.task_hash, answers=["blue"])
        assert again.task_hash == run.task_hash
        assert (await again.wait_done()).text == "resumed"
        assert resumed[0].startswith("[Resumed Task — ask_user response received]")
        assert f"## Background reports\n{reports[0]}" in resumed[0]
        assert len(events(engine, ev.TaskStarted)) == 2  # the task and its resume only


async def test_pause_stops_legs_and_keeps_reports_for_the_resume(
    config: Config, autojump_clock: trio.testing.MockClock, wall_clock: Callable[[], float]
) -> None:
    """R44, R26 paused: pausing the task cancels its legs (and their child tasks); the
    stopped leg's note is kept in the pending snapshot; no follow-up runs."""
    model = Puppet([ModelReply(tool_calls=[subagents("child C")]), hang])
    async with open_engine(config, model=model, clock=wall_clock) as engine:
        run = await engine.start_task(SESSION, "start then pause")
        started = await wait_event(engine, ev.LegStarted)
        await trio.testing.wait_all_tasks_blocked()
        assert engine.cancel(run.task_hash, Cause.PAUSED)
        assert (await run.wait_done()).status == "paused"
        finished = await wait_event(engine, ev.LegFinished)
        assert (finished.leg_id, finished.status) == (started.leg_id, "canceled")
        settled = await wait_event(engine, ev.JobSettled)
        assert settled.followup_task is None
        leg = only_job(engine).legs[0]
        assert leg.child is not None
        assert leg.child.outcome is not None
        assert leg.child.outcome.status == "canceled"
        row = await engine.store.get_task(SESSION, run.task_hash)
        assert row is not None
        assert row.has_jobs
        assert row.snapshot is not None
        [note] = snapshot_from_json(row.snapshot).reports
        assert note.startswith(REPORT_FINISHED_HEADER)
        assert "was stopped when the task was paused" in note


async def test_ended_task_gets_one_follow_up_after_every_leg(
    config: Config, autojump_clock: trio.testing.MockClock, wall_clock: Callable[[], float]
) -> None:
    """R26 ended: reports are held until every leg finished, then the job runs exactly
    once as a new task carrying objective, next, every report and the starting hash."""
    follow: list[str] = []
    model = Puppet(
        [
            ModelReply(tool_calls=[subagents("child D", "child E")]),
            ModelReply(text="bye"),
            followup_into(follow),
        ]
    )
    async with open_engine(config, model=model, clock=wall_clock) as engine:
        run = await engine.start_task(SESSION, "start and leave")
        assert (await run.wait_done()).status == "finished"
        model.gates["child D"].set()
        await wait_event(engine, ev.LegFinished)
        await trio.sleep(60)
        assert events(engine, ev.JobSettled) == []
        assert only_job(engine).held == 1
        model.gates["child E"].set()
        settled = await wait_event(engine, ev.JobSettled)
        assert settled.followup_task is not None
        done = await wait_event(
            engine, ev.Done, session_id=SESSION, pred=lambda e: e.text == "summary"
        )
        assert done.text == "summary"
        await trio.sleep(120)
        assert len(follow) == 1
        assert len(events(engine, ev.TaskStarted)) == 2
        text = follow[0]
        job = only_job(engine)
        assert text.startswith(f"{FOLLOWUP_HEADER}\n\n## Objective\nCount things\n\n")
        assert "## Next\nTell the user\n\n" in text
        assert f"## Starting task\n{run.task_hash} " in text
        for leg, name in zip(job.legs, ("child D", "child E"), strict=True):
            assert f"Leg {leg.id} (sub-agent: {name}): finished\nresult:\n" in text
            assert f"final answer:\n{name}: done" in text
        history = await engine.history(SESSION)
        assert {h.task_hash for h in history} == {run.task_hash, settled.followup_task}


async def test_user_cancel_stops_legs_without_follow_up(
    config: Config, autojump_clock: trio.testing.MockClock, wall_clock: Callable[[], float]
) -> None:
    """R44: user_canceled on the starting task cancels its legs; their results are
    dropped and the job settles with no follow-up."""
    model = Puppet([ModelReply(tool_calls=[subagents("child F")]), hang])
    async with open_engine(config, model=model, clock=wall_clock) as engine:
        run = await engine.start_task(SESSION, "start then cancel")
        await wait_event(engine, ev.LegStarted)
        await trio.testing.wait_all_tasks_blocked()
        engine.cancel(run.task_hash, Cause.USER_CANCELED)
        await run.wait_done()
        finished = await wait_event(engine, ev.LegFinished)
        assert (finished.status, finished.result) == ("canceled", "canceled (user_canceled)")
        settled = await wait_event(engine, ev.JobSettled)
        assert settled.followup_task is None
        assert only_job(engine).cancelled
        assert await engine.pending_tasks(SESSION) == []


async def test_background_cancel_drops_one_legs_result(
    config: Config, autojump_clock: trio.testing.MockClock, wall_clock: Callable[[], float]
) -> None:
    """R44: cancelling one leg drops its late result; the job still settles and its
    follow-up carries the other leg's report."""
    follow: list[str] = []
    model = Puppet(
        [
            ModelReply(tool_calls=[subagents("child G", "child H")]),
            ModelReply(text="bye"),
            followup_into(follow),
        ]
    )
    async with open_engine(config, model=model, clock=wall_clock) as engine:
        run = await engine.start_task(SESSION, "two legs")
        await run.wait_done()
        g, _h = only_job(engine).legs
        with pytest.raises(NotFound):
            engine.cancel_leg(SESSION, "cmd_00000000")
        with pytest.raises(NotFound):
            engine.cancel_leg("cli-other", g.id)
        assert engine.cancel_leg(SESSION, g.id) == 1
        assert engine.cancel_leg(SESSION, g.id) == 0
        model.gates["child G"].set()  # too late: the leg is gone
        model.gates["child H"].set()
        settled = await wait_event(engine, ev.JobSettled)
        await wait_event(engine, ev.Done, pred=lambda e: e.text == "summary")
        assert settled.followup_task is not None
        assert (
            f"Leg {g.id} (sub-agent: child G): canceled\nresult:\ncanceled (user_canceled)"
            in (follow[0])
        )
        assert "child G: done" not in follow[0]
        assert "child H: done" in follow[0]
        assert engine.cancel_leg(SESSION, "all") == 0


async def test_limiter_queues_visible_cancellable_legs(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, wall_clock: Callable[[], float]
) -> None:
    """R22: with the limit at 3, five legs: three run, two queue visibly (leg_started
    queued, list_legs), a queued leg can be cancelled, and a freed token starts the next."""
    config = Config(home=str(tmp_path / "home"), background=BackgroundConfig(max_tasks=3))
    names = [f"child {i}" for i in range(5)]
    model = Puppet([ModelReply(tool_calls=[subagents(*names)]), ModelReply(text="bye")])
    async with open_engine(config, model=model, clock=wall_clock) as engine:
        run = await engine.start_task(SESSION, "five legs")
        await run.wait_done()
        legs = only_job(engine).legs
        started = events(engine, ev.LegStarted)
        assert [(e.leg_id, e.queued) for e in started] == [
            (leg.id, i >= 3) for i, leg in enumerate(legs)
        ]
        listed = engine.list_legs(SESSION)
        assert [(info.leg_id, info.state) for info in listed] == [
            (leg.id, "running" if i < 3 else "queued") for i, leg in enumerate(legs)
        ]
        assert engine.session(SESSION).statistics().legs_running == 3
        assert engine.cancel_leg(SESSION, legs[4].id) == 1
        finished = await wait_event(engine, ev.LegFinished)
        assert (finished.leg_id, finished.status) == (legs[4].id, "canceled")
        assert [info.leg_id for info in engine.list_legs(SESSION)] == [leg.id for leg in legs[:4]]
        model.gates["child 0"].set()
        restarted = await wait_event(
            engine, ev.LegStarted, lambda e: not e.queued and e.leg_id == legs[3].id
        )
        assert restarted.label == "child 3"
        assert [info.state for info in engine.list_legs(SESSION)] == ["running"] * 3
        assert engine.cancel_leg(SESSION, "all") == 3


async def test_subagent_runs_alone_and_names_calls_needing_approval(
    config: Config, autojump_clock: trio.testing.MockClock, wall_clock: Callable[[], float]
) -> None:
    """R30, R20: a sub-agent runs on ``<session>-<leg id>`` with no background tools and
    no questions; a call needing confirmation is not run and named in its result; its
    report file holds the final text and the action record."""
    parent_done = trio.Event()

    async def after_the_parent(
        messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> ModelReply:
        # The child ends only once the parent has: a report arriving during the
        # parent's last turn would rightly give the parent one more turn (R26), and
        # that turn would take the follow-up's `hang`.
        await parent_done.wait()
        return ModelReply(text="I could not touch it")

    child_turns: list[Turn] = [
        ModelReply(tool_calls=[call("run_command", "k1", command="touch important-file")]),
        after_the_parent,
    ]
    model = Puppet(
        [ModelReply(tool_calls=[subagents("child R")]), ModelReply(text="bye"), hang],
        children={"child R": child_turns},
    )
    async with open_engine(config, model=model, clock=wall_clock) as engine:
        run = await engine.start_task(SESSION, "delegate")
        await run.wait_done()
        parent_done.set()
        finished = await wait_event(engine, ev.LegFinished)
        leg = only_job(engine).legs[0]
        assert leg.child is not None
        assert leg.child.session_id == f"{SESSION}-{leg.id}"
        assert leg.child.subagent_of == leg.id
        report = config.home_path / "sessions" / SESSION / "reports" / f"{leg.id}.md"
        assert finished.status == "finished"
        assert finished.result.startswith(f"report saved to {report}\nsub-agent finished\n")
        assert "final answer:\nI could not touch it" in finished.result
        assert "still needs approval" in finished.result
        assert "'touch important-file'" in finished.result
        content = report.read_text()
        assert "## Final answer\nI could not touch it" in content
        assert "## Action record\nuser: child R\n" in content
        assert not Path("important-file").exists()
        child_tools = [tools for first, tools in model.tools if first == "child R"]
        assert child_tools[0] == {"run_command", "read_file", "chat_history"}
        parent_tools = next(tools for first, tools in model.tools if first == "delegate")
        assert {"background_command", "background_subagents", "ask_user"} <= parent_tools


async def test_background_tools_only_for_cli_sessions(
    config: Config, autojump_clock: trio.testing.MockClock, wall_clock: Callable[[], float]
) -> None:
    """R20: a chat- task is not offered the background tools, and a call is refused."""
    model = Puppet([ModelReply(tool_calls=[subagents("child X")]), ModelReply(text="ok")])
    async with open_engine(config, model=model, clock=wall_clock) as engine:
        run = await engine.start_task("chat-bg", "try it")
        await run.wait_done()
        assert "background_subagents" not in model.tools[0][1]
        skipped = events(engine, ev.ToolSkipped, session_id="chat-bg")
        assert [s.reason for s in skipped] == [
            "tool 'background_subagents' is not available in this task"
        ]
        assert engine.list_legs("chat-bg") == []


def test_leg_reports_are_bounded_with_an_elided_marker() -> None:
    """R24: each report keeps at most 8 KiB, all of a leg's at most 32 KiB; the oldest
    are dropped and replaced by ``...[N reports elided]...``."""
    job = Job(
        id="job_00000000",
        session_id=SESSION,
        task_hash="0" * 32,
        objective="",
        next="",
        window_hash="",
        path=Path("/nonexistent/job.json"),
        created_at=0.0,
        updated_at=0.0,
    )
    leg = Leg(id="cmd_00000000", kind="cmd", label="x", job=job, handle=TaskHandle(name="x"))
    kept = leg.add_report("a" * 20_000)
    assert len(kept.encode()) < 8 * 1024 + 40
    assert "bytes elided" in kept
    for i in range(5):
        leg.add_report(f"{i}" * 8000)
    assert leg.elided_reports == 2
    assert leg.kept_reports()[0] == "...[2 reports elided]..."
    assert [r[0] for r in leg.kept_reports()[1:]] == ["1", "2", "3", "4"]


# ---------------------------------------------------------------- command legs (real time)


async def test_command_leg_log_job_file_and_watch_report(tmp_path: Path) -> None:
    """R21, R23, R24, R28, R26 ended: a command leg logs while it runs (log removed at
    its end), its watch update and clamped result are kept in the job file, and the
    held reports make one follow-up. Real time: real subprocesses run."""
    config = Config(
        home=str(tmp_path / "home"),
        # Settle windows wide enough for the rest of the output to follow the keyword
        # line even on a loaded machine: the update then carries all of it.
        background=BackgroundConfig(settle_s=0.5, max_settle_s=1.5),
    )
    command = "echo 'Error: first'; head -c 100000 /dev/zero | tr '\\0' a; echo; sleep 3"
    bg = call("background_command", commands=[command], objective="Make noise", next="Report")
    model = Puppet([ModelReply(tool_calls=[bg]), ModelReply(text="bye"), hang])
    async with open_engine(config, model=model) as engine:
        run = await engine.start_task(SESSION, "noise", allow_all=True)
        await run.wait_done()
        leg = only_job(engine).legs[0]
        log = config.home_path / "sessions" / SESSION / "background" / f"{leg.id}.log"
        update = await wait_event(engine, ev.LegReport)
        # The watch update may come before the rest of the output reached the log (the
        # keyword is on the first line): wait for it, while the leg still sleeps.
        with trio.fail_after(10):
            while not log.read_bytes().startswith(b"Error: first\naaaa"):
                await trio.sleep(0.01)
        assert update.text.startswith(f"{REPORT_UPDATE_HEADER}\nJob {leg.job.id}: Make noise\n")
        assert "a line matched an error keyword: Error: first" in update.text
        finished = await wait_event(engine, ev.LegFinished)
        assert not log.exists()
        assert finished.status == "finished"
        assert finished.result.startswith("exit 0\nError: first\naaa")
        assert "bytes elided]..." in finished.result
        assert len(finished.result.encode()) < 32 * 1024 + 40
        settled = await wait_event(engine, ev.JobSettled)
        assert settled.followup_task is not None
        data = json.loads(leg.job.path.read_text())
        assert data["objective"] == "Make noise"
        assert data["next"] == "Report"
        assert data["legs"][0]["result"] == finished.result
        [kept] = data["legs"][0]["reports"]
        assert kept == "a" * (8 * 1024 - 1) + "\n"  # the latest 8 KiB of output
        assert update.text.endswith(f"Latest output:\n{kept}")


async def test_shutdown_kills_command_legs(tmp_path: Path) -> None:
    """R27, R53, R48: closing the engine cancels every leg with ``shutdown`` and no
    process of the leg's group is left running. Real time: a real subprocess runs."""
    config = Config(home=str(tmp_path / "home"))
    pidfile = tmp_path / "pid"
    bg = call("background_command", commands=[f"sh -c 'echo $$ > {pidfile}; exec sleep 60'"])
    model = Puppet([ModelReply(tool_calls=[bg]), ModelReply(text="bye")])
    with trio.fail_after(15):
        async with open_engine(config, model=model) as engine:
            run = await engine.start_task(SESSION, "sleep long", allow_all=True)
            await run.wait_done()
            while not pidfile.exists() or not pidfile.read_text().strip():
                await trio.sleep(0.02)
            pid = int(pidfile.read_text())
            pgid = os.getpgid(pid)
            leg = only_job(engine).legs[0]
        assert leg.state == "canceled"
        assert leg.result == "canceled (shutdown)"
        assert not group_alive(pgid)
        assert attrs.asdict(only_job(engine).legs[0].handle.statistics())["cause"] == Cause.SHUTDOWN


class _GatedStore(SqliteStore):
    """A store whose ``get_task`` waits for ``gate`` while one is set: holds a leg's
    report routing (`BackgroundManager._deliver`) open at a chosen moment."""

    gate: trio.Event | None = None

    async def get_task(self, session_id: str, task_hash: str) -> TaskRow | None:
        if self.gate is not None:
            await self.gate.wait()
        return await super().get_task(session_id, task_hash)


async def test_a_job_settles_only_after_every_legs_report_is_routed(
    config: Config, autojump_clock: trio.testing.MockClock, wall_clock: Callable[[], float]
) -> None:
    """R26, R44: a leg that ended but whose report is still being routed keeps its job
    open; a sibling leg cancelled meanwhile does not settle the job without that report
    (which lost it: no follow-up). Once routed, the job settles and the follow-up
    carries it."""
    follow: list[str] = []
    model = Puppet(
        [
            ModelReply(tool_calls=[subagents("child G", "child H")]),
            ModelReply(text="bye"),
            followup_into(follow),
        ]
    )
    store = await _GatedStore.open(config.home_path / "agentrio.db")
    try:
        async with open_engine(config, model=model, store=store, clock=wall_clock) as engine:
            run = await engine.start_task(SESSION, "two legs")
            await run.wait_done()
            job = only_job(engine)
            g, h = job.legs
            store.gate = trio.Event()
            model.gates["child H"].set()
            while not h.ended:
                await trio.sleep(0.01)
            await trio.sleep(1)
            assert not h.recorded  # its report waits on the store
            assert engine.cancel_leg(SESSION, g.id) == 1
            while not g.recorded:
                await trio.sleep(0.01)
            assert not job.settled
            store.gate.set()
            store.gate = None
            settled = await wait_event(engine, ev.JobSettled)
            await wait_event(engine, ev.Done, pred=lambda e: e.text == "summary")
            assert settled.followup_task is not None
            assert "child H: done" in follow[0]
            assert f"Leg {g.id} (sub-agent: child G): canceled" in follow[0]
    finally:
        await store.aclose()
