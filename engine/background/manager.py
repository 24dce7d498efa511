"""The background manager: every job and leg of one engine, and each leg's life
(R20-R25, R44, R48).

Legs outlive the task that started them (R25): they run under the engine's nursery
through the manager's own `Supervisor`, each with its own `TaskHandle`, so
`BackgroundManager.cancel_leg` stops exactly one leg. A session runs at most
``MAX_BACKGROUND_TASKS`` legs at once (``Session.leg_limiter``, R22): a leg that finds
no free token is announced with ``leg_started`` ``queued: true``, listed as
``queued``, can be cancelled while it waits, and is announced again with
``queued: false`` when it starts.

A leg's life (`BackgroundManager._leg_main`): wait for a token, run (a command,
`agentrio.engine.background.command_leg`, or a sub-agent,
`agentrio.engine.background.subagent_leg`), then record its end -- result clamped
(R24), report routed (`agentrio.engine.background.routing`),
job file saved -- and only then say ``leg_finished`` and settle the job if it was the
last leg.

**Cancel and pause (R44).** A leg cancelled by the user (``background_cancel``, or its
task's ``user_canceled``) or by shutdown drops its late result: no report. A leg
stopped by a pause leaves a short "stopped" report, kept for the resume like any other.
`BackgroundManager.shutdown` cancels every leg with ``shutdown``; each command leg's
process group is ended (SIGTERM, then SIGKILL, R48) before its leg finishes.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Sequence
from typing import Final

import attrs
import trio

from agentrio.engine.background.command_leg import run_command_leg
from agentrio.engine.background.jobs import (
    Job,
    Leg,
    LegKind,
    LegState,
    job_path,
    log_path,
    report_path,
    save_job,
)
from agentrio.engine.background.routing import ReportRouter
from agentrio.engine.background.starter import TaskStarter
from agentrio.engine.background.subagent_leg import run_subagent_leg
from agentrio.engine.errors import NotFound
from agentrio.engine.ids import new_job_id, new_leg_id
from agentrio.engine.messages import leg_finished_report, leg_stopped_report, leg_update_report
from agentrio.engine.models.base import Model
from agentrio.engine.nursery_tasks import Supervisor, SupervisorStatistics, TaskHandle
from agentrio.engine.runs import TaskRun
from agentrio.engine.snapshot import RESULT_LIMIT, clamp
from agentrio.engine.store.files import make_private_dirs
from agentrio.engine.tools.background_tools import StartedJob
from agentrio.engine.tools.base import Services, ToolContext
from agentrio.engine.tools.run_command import CommandPlan
from agentrio.engine.watch import DecisionCheck, WatchReport
from agentrio.protocol import events as ev
from agentrio.protocol.causes import Cause
from agentrio.protocol.frames import LegInfo

__all__ = ["BackgroundManager", "BackgroundStatistics"]

log = logging.getLogger("agentrio.background")

#: Settled jobs remembered in memory for `BackgroundManager.job`.
_SETTLED_KEPT: Final = 256


@attrs.frozen
class BackgroundStatistics:
    jobs: int
    legs_running: int
    legs_queued: int
    followups_started: int
    supervisor: SupervisorStatistics


class BackgroundManager:
    """Every job and leg of one engine; see the module docstring.

    ``nursery`` is the engine's: legs are started in it (through a `Supervisor` of their
    own), never in the nursery of the task that asked for them. ``tasks`` is what the
    legs need of the engine (`TaskStarter`).
    """

    def __init__(
        self,
        services: Services,
        nursery: trio.Nursery,
        tasks: TaskStarter,
        *,
        decision_model: Model | None = None,
    ) -> None:
        self._tasks = tasks
        self._services = services
        self._supervisor = Supervisor(nursery)
        self._check = DecisionCheck(decision_model) if decision_model is not None else None
        self._router = ReportRouter(services, tasks, on_settled=self._forget)
        self._jobs: dict[str, Job] = {}
        #: Recently settled jobs, for `job` (their files stay on disk until restart).
        self._settled: deque[Job] = deque(maxlen=_SETTLED_KEPT)
        self._legs: dict[str, Leg] = {}
        #: The open job of a running task's current turn, by (session, task hash):
        #: (the turn, job). Dropped when the run ends.
        self._turn_job: dict[tuple[str, str], tuple[int, Job]] = {}

    # ------------------------------------------------------------------ queries

    def available(self, ctx: ToolContext) -> bool:
        """R20: background tools exist for ``cli-`` requests without a deliver target
        (`agentrio.engine.tools.base.ToolContext.deliver_to`): not for background or in-process
        sub-agents, whose results go to a leg or a parent task, not to a window that
        could receive later reports."""
        return ctx.origin == "cli-" and ctx.deliver_to is None and not self._router.closing

    def sessions_in_use(self) -> set[str]:
        """Sessions with a live job, until its settling is fully recorded (its
        follow-up started, ``job_settled`` said): reports and follow-ups go there
        (`agentrio.engine.sessions.SessionHolder`)."""
        return {job.session_id for job in self._jobs.values()}

    def job(self, job_id: str) -> Job | None:
        """A live or recently settled job."""
        job = self._jobs.get(job_id)
        if job is None:
            job = next((j for j in self._settled if j.id == job_id), None)
        return job

    def jobs(self) -> list[Job]:
        """The recently settled jobs, then the live ones."""
        return [*self._settled, *self._jobs.values()]

    def leg(self, leg_id: str) -> Leg | None:
        return self._legs.get(leg_id)

    def adopt(self, session_id: str, window_hash: str, is_open: Callable[[str], bool]) -> list[str]:
        """Move the session's unsettled jobs whose window is open nowhere (its REPL
        closed) to window ``window_hash``: their follow-up runs for it. The starting
        tasks' hashes of the jobs moved (issue 33: a reopened REPL sees its legs end)."""
        moved: list[str] = []
        for job in self._jobs.values():
            if job.session_id == session_id and not job.settled:
                if job.window_hash != window_hash and not is_open(job.window_hash):
                    job.window_hash = window_hash
                    moved.append(job.task_hash)
        return moved

    def list_legs(self, session_id: str) -> list[LegInfo]:
        """The session's legs that are queued or running, oldest first."""
        return [
            leg.info()
            for leg in self._legs.values()
            if leg.job.session_id == session_id and not leg.ended
        ]

    def statistics(self) -> BackgroundStatistics:
        legs = [leg for leg in self._legs.values() if not leg.ended]
        return BackgroundStatistics(
            jobs=sum(1 for job in self._jobs.values() if not job.settled),
            legs_running=sum(1 for leg in legs if leg.state == "running"),
            legs_queued=sum(1 for leg in legs if leg.state == "queued"),
            followups_started=self._router.followups_started,
            supervisor=self._supervisor.statistics(),
        )

    # ------------------------------------------------------------------ starting

    async def start_legs(
        self,
        ctx: ToolContext,
        kind: LegKind,
        labels: Sequence[str],
        *,
        objective: str,
        next_step: str,
        cwd: str | None = None,
        plans: Sequence[CommandPlan] | None = None,
    ) -> StartedJob:
        """Start one leg per label for the task of ``ctx``, in the job of its current
        turn (R21).

        Command legs come with ``plans`` (one per label): how `run_command`'s
        confirmation said each may run (R74, R75).

        Returns once every leg is registered, announced (``leg_started``) and started
        in the engine's nursery; the legs then run on their own (R25).
        """
        if not self.available(ctx):
            raise RuntimeError("background legs are not available to this task")
        if kind == "cmd" and (plans is None or len(plans) != len(labels)):
            raise ValueError("command legs need one plan per command")
        job = await self._job_for(ctx, objective, next_step)
        legs = [
            self._new_leg(
                ctx, job, kind, label, cwd or ctx.workdir.path, plans[index] if plans else None
            )
            for index, label in enumerate(labels)
        ]
        # Shielded: a cancel of the task now must neither leave registered legs
        # unstarted (holding limiter tokens) nor keep a leg inside the task's scope
        # (`nursery.start` leaves a child in place when the caller is cancelled).
        with trio.CancelScope(shield=True):
            for leg in legs:
                await self._supervisor.start(self._leg_main, leg, handle=leg.handle)
            await save_job(job, self._services.clock)
        return StartedJob(
            job_id=job.id, legs=[(leg.id, leg.label, leg.state == "queued") for leg in legs]
        )

    def _new_leg(
        self,
        ctx: ToolContext,
        job: Job,
        kind: LegKind,
        label: str,
        cwd: str | None,
        plan: CommandPlan | None,
    ) -> Leg:
        """Register one leg, take a limiter token if one is free, announce it."""
        session = self._tasks.session(ctx.session_id)
        leg_id = new_leg_id(kind)
        leg = Leg(
            id=leg_id,
            kind=kind,
            label=label,
            job=job,
            handle=TaskHandle(name=f"leg {session.id}/{leg_id}"),
            cwd=cwd,
            plan=plan,
            allow_all=ctx.allow_all,
            created_at=self._services.clock(),
        )
        job.legs.append(leg)
        self._legs[leg_id] = leg
        try:
            session.leg_limiter.acquire_on_behalf_of_nowait(leg)
        except trio.WouldBlock:
            queued = True
        else:
            queued = False
            leg.holds_token = True
            leg.state = "running"
            leg.started_at = leg.created_at
        ctx.emit(ev.LegStarted, job_id=job.id, leg_id=leg_id, label=label, queued=queued)
        return leg

    async def _job_for(self, ctx: ToolContext, objective: str, next_step: str) -> Job:
        """The job of the task's current turn: the open one, or a new one (R21)."""
        task = (ctx.session_id, ctx.task_hash)
        open_job = self._turn_job.get(task)
        if open_job is not None and open_job[0] == ctx.turn and not open_job[1].settled:
            job = open_job[1]
            job.objective = job.objective or objective.strip()
            job.next = job.next or next_step.strip()
            return job
        now = self._services.clock()
        job_id = new_job_id()
        job = Job(
            id=job_id,
            session_id=ctx.session_id,
            task_hash=ctx.task_hash,
            objective=objective.strip(),
            next=next_step.strip(),
            window_hash=ctx.window_hash,
            share_asks=ctx.share_asks,
            path=job_path(self._services.config.home_path, ctx.session_id, job_id),
            created_at=now,
            updated_at=now,
        )
        self._jobs[job_id] = job
        self._turn_job[task] = (ctx.turn, job)
        await trio.to_thread.run_sync(make_private_dirs, job.path.parent)
        return job

    # ------------------------------------------------------------------ cancel, end

    def cancel_leg(self, session_id: str, leg_id: str) -> int:
        """Cancel one leg, or with ``"all"`` every queued or running leg of the session,
        cause ``user_canceled`` (R44); returns how many were cancelled. An unknown leg
        (or one of another session) raises `agentrio.engine.errors.NotFound`."""
        if leg_id == "all":
            legs = [
                leg
                for leg in self._legs.values()
                if leg.job.session_id == session_id and not leg.ended
            ]
            return sum(leg.handle.cancel(Cause.USER_CANCELED) for leg in legs)
        leg = self._legs.get(leg_id)
        if leg is None or leg.job.session_id != session_id:
            raise NotFound(f"no such leg {leg_id[:64]!r} in session {session_id}")
        return int(leg.handle.cancel(Cause.USER_CANCELED))

    def shutdown(self) -> int:
        """Cancel every leg with cause ``shutdown`` (R27, R53); no follow-up starts after."""
        self._router.closing = True
        return self._supervisor.cancel_all(Cause.SHUTDOWN)

    async def on_task_end(self, run: TaskRun) -> None:
        """The end hook of every run (`agentrio.engine.runs.TaskRun.on_end`): what becomes of the
        jobs it started (`agentrio.engine.background.routing.ReportRouter.task_ended`)."""
        self._turn_job.pop((run.session_id, run.task_hash), None)
        jobs = [
            job
            for job in self._jobs.values()
            if not job.settled
            and job.session_id == run.session_id
            and job.task_hash == run.task_hash
        ]
        if jobs:
            await self._router.task_ended(run, jobs)

    def _forget(self, job: Job) -> None:
        """A job settled: keep it only among the recently settled."""
        for leg in job.legs:
            self._legs.pop(leg.id, None)
        self._jobs.pop(job.id, None)
        self._settled.append(job)

    # ------------------------------------------------------------------ one leg

    async def _leg_main(self, leg: Leg, *, task_status: trio.TaskStatus[None]) -> None:
        """A leg's whole life, inside its handle's scope; its end is recorded shielded."""
        task_status.started()
        ending: tuple[LegState, str] | None = None
        try:
            ending = await self._leg_body(leg)
        except Exception as exc:
            log.exception("leg %s failed", leg.id)
            ending = ("failed", f"internal error: {type(exc).__name__}: {exc}")
        finally:
            with trio.CancelScope(shield=True):
                await self._leg_ended(leg, ending)

    async def _leg_body(self, leg: Leg) -> tuple[LegState, str]:
        session = self._tasks.session(leg.job.session_id)
        limiter = session.leg_limiter
        home = self._services.config.home_path
        try:
            if not leg.holds_token:
                await limiter.acquire_on_behalf_of(leg)
                leg.holds_token = True
                leg.state = "running"
                leg.started_at = self._services.clock()
                session.hub.emit(
                    leg.job.task_hash,
                    ev.LegStarted,
                    job_id=leg.job.id,
                    leg_id=leg.id,
                    label=leg.label,
                    queued=False,
                )
                await save_job(leg.job, self._services.clock)
            if leg.kind == "cmd":

                async def on_report(report: WatchReport) -> None:
                    await self._watch_report(leg, report)

                return await run_command_leg(
                    self._services,
                    leg,
                    log_path=log_path(home, leg),
                    check=self._check,
                    on_report=on_report,
                )
            return await run_subagent_leg(self._tasks, leg, report_path=report_path(home, leg))
        finally:
            if leg.holds_token:
                leg.holds_token = False
                limiter.release_on_behalf_of(leg)

    async def _leg_ended(self, leg: Leg, ending: tuple[LegState, str] | None) -> None:
        """Record a leg's end, route its report, then say ``leg_finished`` (so a client
        that sees it knows the report is where it goes) and settle the job if this was
        its last leg."""
        job = leg.job
        leg.ended_at = self._services.clock()
        cause = leg.handle.cause or Cause.SHUTDOWN
        if ending is None:  # cancelled
            leg.state = "canceled"
            leg.result = f"canceled ({cause})"
        else:
            leg.state, leg.result = ending[0], clamp(ending[1], RESULT_LIMIT)
        try:
            if ending is not None:
                await self._router.deliver(job, leg_finished_report(job.id, job.objective, leg))
            elif cause is Cause.PAUSED:
                await self._router.deliver(job, leg_stopped_report(job.id, job.objective, leg))
            await save_job(job, self._services.clock)
        except Exception:
            log.exception("could not record the end of leg %s", leg.id)
        leg.recorded = True
        self._tasks.session(job.session_id).hub.emit(
            job.task_hash,
            ev.LegFinished,
            job_id=job.id,
            leg_id=leg.id,
            status=leg.state,
            result=leg.result,
            subagent=leg.ending,
        )
        try:
            await self._router.maybe_settle(job)
        except Exception:
            log.exception("could not settle job %s", job.id)

    async def _watch_report(self, leg: Leg, report: WatchReport) -> None:
        """A watcher update (R28): kept on the leg (R24), announced and routed (R26).

        A failure to route it is logged, never fatal to the leg's command."""
        job = leg.job
        try:
            output = leg.add_report(report.output)
            text = leg_update_report(
                job.id,
                job.objective,
                leg,
                hit_line=report.hit_line,
                note=report.note,
                output=output,
            )
            self._tasks.session(job.session_id).hub.emit(
                job.task_hash, ev.LegReport, job_id=job.id, leg_id=leg.id, text=text
            )
            await self._router.deliver(job, text)
            await save_job(job, self._services.clock)
        except Exception:
            log.exception("could not route an update of leg %s", leg.id)
