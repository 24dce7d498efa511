"""Background legs and jobs: start, limit, watch, report, settle (R20-R27, R30, R44, R48).

A **leg** is one background command (``cmd_…``) or sub-agent (``sub_…``); the legs one
task starts in one turn form a **job** (``job_…``). Legs outlive the task that started
them (R25): they run under the engine's nursery through this module's own `Supervisor`,
each with its own `TaskHandle`, so `BackgroundManager.cancel_leg` stops exactly one leg.

Where things live while a job is alive:

- ``<home>/sessions/<session>/background/job_<id>.json`` — the job record (objective,
  next, starting task, legs with state, result and reports), rewritten atomically on
  every change and kept after the job settles; the daemon clears the folder at start
  (R27, `engine.server.lifecycle.clear_background`).
- ``<home>/sessions/<session>/background/<leg id>.log`` — a command leg's output while it
  runs (R23), removed when the leg ends.
- ``<home>/sessions/<session>/reports/<leg id>.md`` — a sub-agent's saved report (R30).

All three are created 0600 in folders made 0700 (`engine.store.files`, issue 15 item 6).

A session runs at most ``MAX_BACKGROUND_TASKS`` legs at once (``Session.leg_limiter``,
R22): a leg that finds no free token is announced with ``leg_started`` ``queued: true``,
listed as ``queued``, can be cancelled while it waits, and is announced again with
``queued: false`` when it starts.

**Routing (R26).** A report (a leg's end, or a watcher update, R28) goes where the
starting task is *now*:

- running in this process: appended to its ``reports``, added at the start of its next
  turn (a report arriving as it would finish gives it one more turn, `engine.runs`);
- stopped but resumable (parked, paused, aborted, disconnected): written into the
  pending row's snapshot (``Snapshot.reports``), with ``has_jobs`` set, so the resume
  message carries it and a resume keeps the task's hash (R35, R36);
- ended (finished, failed, canceled, or its pending record is gone): *held*.

A report pushed into a run that then ends without reading it is taken back when the run
ends (`BackgroundManager.on_task_end`) and routed again, so none is lost in the gap
between the model's last reply and the run's exit.

A job **settles** once every leg has ended and its starting task is not running. If it
then holds reports the task never took, it runs **once** as a new task on the same
session whose input starts ``[Resumed Task — background group finished]`` and carries the
objective, next, every report of the job and the starting task's hash. ``job_settled``
names that follow-up task (or none).

**Cancel and pause (R44).** When the starting task ends with ``user_canceled`` or
``paused``, its jobs' legs are cancelled with the same cause. A leg cancelled by the user
(``background_cancel``, or its task's ``user_canceled``) or by shutdown drops its late
result: no report. A leg stopped by a pause leaves a short "stopped" report, kept for the
resume like any other. A job whose starting task was ``user_canceled`` settles without a
follow-up. `BackgroundManager.shutdown` cancels every leg with ``shutdown``; each command
leg's process group is ended (SIGTERM, then SIGKILL, R48) before its leg finishes.
"""

from __future__ import annotations

import json
import logging
import os
from collections import deque
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, BinaryIO, Final, Literal, Protocol

import attrs
import trio

from engine.causes import Cause
from engine.errors import NotFound
from engine.ids import new_job_id, new_leg_id
from engine.messages import (
    NEEDS_APPROVAL,
    followup_message,
    leg_description,
    leg_finished_report,
    leg_stopped_report,
    leg_update_report,
)
from engine.models.base import Model
from engine.nursery_tasks import Supervisor, SupervisorStatistics, TaskHandle, cancel_scope
from engine.processes.sandbox import SandboxError
from engine.runs import RunOrigin, TaskRun
from engine.sessions import Session
from engine.snapshot import RESULT_LIMIT, Snapshot, clamp, snapshot_from_json, snapshot_to_json
from engine.store.base import TaskRow
from engine.store.files import make_private_dirs, open_private, write_private_atomic
from engine.tools.background_tools import StartedJob
from engine.tools.base import Services, ToolContext
from engine.tools.run_command import CommandPlan, format_command_result, run_plan
from engine.watch import REPORT_KEEP_BYTES, DecisionCheck, Watcher, WatchReport
from protocol import events as ev
from protocol.frames import LegInfo

__all__ = [
    "LEG_REPORTS_LIMIT",
    "LOG_BUFFER_BYTES",
    "BackgroundManager",
    "BackgroundStatistics",
    "Job",
    "Leg",
    "LogWriter",
    "TaskStarter",
]

log = logging.getLogger("agentrio.background")

#: All watch reports one leg keeps, in bytes (R24).
LEG_REPORTS_LIMIT: Final = 32 * 1024
#: How long a cancelled sub-agent leg waits for its child task to record its end.
_CHILD_EXIT_WAIT_S: Final = 5.0
#: Settled jobs remembered in memory for `BackgroundManager.job`.
_SETTLED_KEPT: Final = 256
#: A leg's output waiting for its log file, at most (`LogWriter`).
LOG_BUFFER_BYTES: Final = 4 * 1024 * 1024

LegKind = Literal["cmd", "sub"]
LegState = Literal["queued", "running", "finished", "failed", "canceled"]
_ENDED: Final = frozenset({"finished", "failed", "canceled"})
#: Run outcomes after which the task is pending (resumable), not ended.
_PENDING_STATUSES: Final = frozenset({"parked", "paused", "aborted"})


@attrs.define(eq=False)
class Leg:
    """One piece of background work; ``label`` is its command or objective."""

    id: str
    kind: LegKind
    label: str
    job: Job
    handle: TaskHandle
    cwd: str | None = None
    #: How a command leg runs: sandboxed when nobody was asked (R75), else as approved.
    plan: CommandPlan | None = None
    allow_all: bool = False
    state: LegState = "queued"
    created_at: float = 0.0
    started_at: float | None = None
    ended_at: float | None = None
    #: The clamped result (R24), set when the leg ends.
    result: str = ""
    #: Watch reports kept (R24): each at most 8 KiB, all at most 32 KiB.
    reports: list[str] = attrs.field(factory=list)
    #: How many of the oldest reports were dropped to keep within the limit.
    elided_reports: int = 0
    holds_token: bool = False
    #: The child task of a sub-agent leg, once started.
    child: TaskRun | None = None
    #: Set once the leg's end is fully recorded (its report routed, the job file
    #: saved): only then may the job settle. ``ended`` turns true earlier, before those
    #: awaits, and a sibling leg ending meanwhile would settle the job without this
    #: leg's report (no follow-up, the report lost).
    recorded: bool = False

    @property
    def ended(self) -> bool:
        return self.state in _ENDED

    def add_report(self, text: str) -> str:
        """Keep one watch report the R24 way; returns the text kept for it."""
        kept = clamp(text, REPORT_KEEP_BYTES)
        self.reports.append(kept)
        while len(self.reports) > 1 and _size(self.reports) > LEG_REPORTS_LIMIT:
            self.reports.pop(0)
            self.elided_reports += 1
        return kept

    def kept_reports(self) -> list[str]:
        """The watch reports, led by ``...[N reports elided]...`` when some were dropped."""
        marker = [f"...[{self.elided_reports} reports elided]..."] if self.elided_reports else []
        return marker + self.reports

    def describe(self) -> str:
        return leg_description(self.id, self.kind, self.label)

    def info(self) -> LegInfo:
        return LegInfo(
            leg_id=self.id,
            job_id=self.job.id,
            task_hash=self.job.task_hash,
            label=self.label,
            state="running" if self.state == "running" else "queued",
            started_at=self.started_at if self.started_at is not None else self.created_at,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "leg_id": self.id,
            "kind": self.kind,
            "label": self.label,
            "state": self.state,
            "result": self.result,
            "reports": self.kept_reports(),
            "created_at": self.created_at,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
        }


def _size(reports: Sequence[str]) -> int:
    return sum(len(r.encode("utf-8", "surrogatepass")) for r in reports)


@attrs.define(eq=False)
class Job:
    """The legs one task started in one turn, and where their reports went."""

    id: str
    session_id: str
    task_hash: str
    objective: str
    next: str
    window_hash: str
    path: Path
    created_at: float
    updated_at: float
    legs: list[Leg] = attrs.field(factory=list)
    #: Reports pushed into a live run's ``reports`` and not yet known to be read.
    in_flight: list[tuple[TaskRun, str]] = attrs.field(factory=list)
    #: Reports the starting task never took (it had ended): they make a follow-up run.
    held: int = 0
    #: The starting task was cancelled by the user: settle without a follow-up.
    cancelled: bool = False
    settled: bool = False
    followup_task: str | None = None
    write_lock: trio.Lock = attrs.field(factory=trio.Lock)

    def to_json(self) -> dict[str, Any]:
        return {
            "job_id": self.id,
            "session_id": self.session_id,
            "task_hash": self.task_hash,
            "objective": self.objective,
            "next": self.next,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "settled": self.settled,
            "cancelled": self.cancelled,
            "followup_task": self.followup_task,
            "legs": [leg.to_json() for leg in self.legs],
        }


@attrs.frozen
class BackgroundStatistics:
    jobs: int
    legs_running: int
    legs_queued: int
    followups_started: int
    supervisor: SupervisorStatistics


def _write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    """Blocking: write ``data`` to ``path`` through a temporary file (0600 from its
    creation) and `os.replace`; a missing folder is made 0700."""
    make_private_dirs(path.parent)
    write_private_atomic(path, json.dumps(data, ensure_ascii=False, indent=1).encode("utf-8"))


def _write_text(path: Path, text: str) -> None:
    """Blocking: write a report file (made once, read by people and tasks; 0600)."""
    make_private_dirs(path.parent)
    write_private_atomic(path, text.encode("utf-8"))


def _open_log(path: Path) -> BinaryIO:
    """Blocking: open a leg's log for appending, created 0600 (command output)."""
    fd = open_private(path, os.O_WRONLY | os.O_APPEND)
    try:
        return os.fdopen(fd, "ab")
    except BaseException:
        os.close(fd)
        raise


class _Appendable(Protocol):
    def writelines(self, lines: Iterable[bytes], /) -> object: ...

    def flush(self) -> object: ...


def _append(file: _Appendable, chunks: list[bytes]) -> None:
    """Blocking: write ``chunks`` in order and push them to the file."""
    file.writelines(chunks)
    file.flush()


class LogWriter:
    """Appends a leg's output to its log file without one thread hop per chunk.

    `append` queues a chunk; `run` writes everything queued while its previous write was
    in its thread (one hop, one flush), so a quiet leg's lines reach the file at once and
    a chatty leg's many reads become a few large writes. Chunks are written as they
    came, never copied into one buffer.

    Back-pressure: while ``limit`` bytes are queued, `append` waits for `run` to take
    them, so a disk slower than the command holds up the output reading (and, once the
    pipe is full, the command) instead of memory growing: at most about twice ``limit``
    plus a chunk is held. What is queued when `run` is cancelled is dropped with the log
    (the file is removed when the leg ends, R23).
    """

    def __init__(self, file: _Appendable, *, limit: int = LOG_BUFFER_BYTES) -> None:
        self._file = file
        self._limit = limit
        self._chunks: list[bytes] = []
        self._queued = 0
        self._ready = trio.Event()
        self._taken = trio.Event()

    @property
    def queued_bytes(self) -> int:
        return self._queued

    async def append(self, chunk: bytes) -> None:
        while self._queued >= self._limit:
            await self._taken.wait()
        self._chunks.append(chunk)
        self._queued += len(chunk)
        self._ready.set()

    async def run(self) -> None:
        while True:
            await self._ready.wait()
            self._ready = trio.Event()
            chunks, self._chunks, self._queued = self._chunks, [], 0
            taken, self._taken = self._taken, trio.Event()
            taken.set()
            await trio.to_thread.run_sync(_append, self._file, chunks)


class TaskStarter(Protocol):
    """What background work needs of the engine: a session's live state (its hub,
    leg limiter, runs and remembered commands) and a way to start a task (a
    sub-agent's child task, a job's follow-up). `engine.core.Engine` is one."""

    def session(self, session_id: str) -> Session[TaskRun]: ...

    async def start_task(
        self,
        session_id: str,
        text: str,
        *,
        origin: RunOrigin | None = None,
        allow_all: bool = False,
        objective: str | None = None,
        subagent_of: str | None = None,
    ) -> TaskRun: ...


class BackgroundManager:
    """Every job and leg of one engine; see the module docstring.

    ``nursery`` is the engine's: legs are started in it (through a `Supervisor` of their
    own), never in the nursery of the task that asked for them.
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
        self._jobs: dict[str, Job] = {}
        #: Recently settled jobs, for `job` (their files stay on disk until restart).
        self._settled: deque[Job] = deque(maxlen=_SETTLED_KEPT)
        self._legs: dict[str, Leg] = {}
        #: The open job of a running task's current turn, by (session, task hash):
        #: (the turn, job). Dropped when the run ends.
        self._turn_job: dict[tuple[str, str], tuple[int, Job]] = {}
        #: Serialises read-modify-write of pending rows (reports into a snapshot).
        self._row_lock = trio.Lock()
        self._closing = False
        self._followups = 0

    # ------------------------------------------------------------------ paths

    def session_dir(self, session_id: str) -> Path:
        return self._services.config.home_path / "sessions" / session_id

    def log_path(self, leg: Leg) -> Path:
        return self.session_dir(leg.job.session_id) / "background" / f"{leg.id}.log"

    def report_path(self, leg: Leg) -> Path:
        return self.session_dir(leg.job.session_id) / "reports" / f"{leg.id}.md"

    # ------------------------------------------------------------------ queries

    def available(self, ctx: ToolContext) -> bool:
        """R20: background tools exist for ``cli-`` tasks that run for themselves."""
        return ctx.origin == "cli-" and ctx.subagent_of is None and not self._closing

    def sessions_in_use(self) -> set[str]:
        """Sessions with a live job, until its settling is fully recorded (its
        follow-up started, ``job_settled`` said): reports and follow-ups go there
        (`engine.sessions.SessionHolder`)."""
        return {job.session_id for job in self._jobs.values()}

    def job(self, job_id: str) -> Job | None:
        """A live or recently settled job."""
        job = self._jobs.get(job_id)
        if job is None:
            job = next((j for j in self._settled if j.id == job_id), None)
        return job

    def leg(self, leg_id: str) -> Leg | None:
        return self._legs.get(leg_id)

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
            followups_started=self._followups,
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
        job = await self._job_for(ctx, objective, next_step)
        session = self._tasks.session(ctx.session_id)
        legs: list[Leg] = []
        if kind == "cmd" and (plans is None or len(plans) != len(labels)):
            raise ValueError("command legs need one plan per command")
        for index, label in enumerate(labels):
            leg_id = new_leg_id(kind)
            leg = Leg(
                id=leg_id,
                kind=kind,
                label=label,
                job=job,
                handle=TaskHandle(name=f"leg {session.id}/{leg_id}"),
                cwd=cwd,
                plan=plans[index] if plans is not None else None,
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
            legs.append(leg)
        # Shielded: a cancel of the task now must neither leave registered legs
        # unstarted (holding limiter tokens) nor keep a leg inside the task's scope
        # (`nursery.start` leaves a child in place when the caller is cancelled).
        with trio.CancelScope(shield=True):
            for leg in legs:
                await self._supervisor.start(self._leg_main, leg, handle=leg.handle)
            await self._save(job)
        return StartedJob(
            job_id=job.id, legs=[(leg.id, leg.label, leg.state == "queued") for leg in legs]
        )

    async def _job_for(self, ctx: ToolContext, objective: str, next_step: str) -> Job:
        turn = ctx.turn
        task = (ctx.session_id, ctx.task_hash)
        open_job = self._turn_job.get(task)
        if open_job is not None and open_job[0] == turn and not open_job[1].settled:
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
            path=self.session_dir(ctx.session_id) / "background" / f"{job_id}.json",
            created_at=now,
            updated_at=now,
        )
        self._jobs[job_id] = job
        self._turn_job[task] = (turn, job)
        await trio.to_thread.run_sync(make_private_dirs, job.path.parent)
        return job

    # ------------------------------------------------------------------ cancel

    def cancel_leg(self, session_id: str, leg_id: str) -> int:
        """Cancel one leg, or with ``"all"`` every queued or running leg of the session,
        cause ``user_canceled`` (R44); returns how many were cancelled. An unknown leg
        (or one of another session) raises `engine.errors.NotFound`."""
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
        self._closing = True
        return self._supervisor.cancel_all(Cause.SHUTDOWN)

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
                await self._save(leg.job)
            if leg.kind == "cmd":
                return await self._run_command(leg)
            return await self._run_subagent(leg)
        finally:
            if leg.holds_token:
                leg.holds_token = False
                limiter.release_on_behalf_of(leg)

    async def _run_command(self, leg: Leg) -> tuple[LegState, str]:
        config = self._services.config
        background = config.background
        path = self.log_path(leg)

        async def on_report(report: WatchReport) -> None:
            await self._watch_report(leg, report)

        watcher = Watcher(
            background.keywords,
            on_report,
            settle_s=background.settle_s,
            max_settle_s=background.max_settle_s,
            report_interval_s=background.report_interval_s,
            check=self._check,
        )
        try:
            async with trio.wrap_file(await trio.to_thread.run_sync(_open_log, path)) as log_file:
                log = LogWriter(log_file.wrapped)

                async def on_output(chunk: bytes) -> None:
                    await log.append(chunk)
                    watcher.feed(chunk)

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(watcher.run)
                    nursery.start_soon(log.run)
                    assert leg.plan is not None
                    try:
                        result = await run_plan(
                            self._services,
                            leg.plan,
                            cwd=leg.cwd,
                            timeout_s=None,
                            on_output=on_output,
                            keep_bytes=RESULT_LIMIT,
                        )
                    except SandboxError as exc:
                        return "failed", f"not run: {exc}"
                    finally:
                        # The watcher may be waiting on a decision check: stop it now.
                        watcher.close()
                        cancel_scope(nursery.cancel_scope, Cause.SUPERSEDED)
        finally:
            with trio.CancelScope(shield=True):
                await trio.Path(path).unlink(missing_ok=True)
        state: LegState = "finished" if result.exit_code == 0 else "failed"
        return state, format_command_result(result)

    async def _run_subagent(self, leg: Leg) -> tuple[LegState, str]:
        """R30: a child task on ``<session>-<leg id>`` with the same model, flagged as a
        sub-agent (no background tools, no questions, no confirmations)."""
        job = leg.job
        child_session = f"{job.session_id[:115]}-{leg.id}"
        allowed = self._tasks.session(job.session_id).allowed
        self._tasks.session(child_session).allowed.copy_from(allowed)
        child = await self._tasks.start_task(
            child_session, leg.label, allow_all=leg.allow_all, subagent_of=leg.id
        )
        leg.child = child
        try:
            outcome = await child.wait_done()
        finally:
            if child.outcome is None:
                cause = leg.handle.cause or Cause.SHUTDOWN
                # A sub-agent is never resumed on its own: only shutdown keeps it.
                child.handle.cancel(
                    Cause.SHUTDOWN if cause is Cause.SHUTDOWN else Cause.USER_CANCELED
                )
                with trio.CancelScope(shield=True), trio.move_on_after(_CHILD_EXIT_WAIT_S):
                    await child.handle.wait_finished()
        needs = [
            f"- {call.tool_name} {json.dumps(call.args, ensure_ascii=False)}: "
            f"{call.output.removeprefix('not run: ')}"
            for call in child.completed
            if call.output.startswith(f"not run: {NEEDS_APPROVAL}")
        ]
        path = self.report_path(leg)
        final = outcome.text or (f"(no final text; {outcome.error})" if outcome.error else "")
        content = "\n\n".join(
            part
            for part in (
                f"# Sub-agent report {leg.id}",
                f"Objective: {leg.label}\nChild session: {child_session}\n"
                f"Child task: {child.task_hash}\nStatus: {outcome.status}",
                f"## Final answer\n{final or '(none)'}",
                "## Still needs approval\n" + "\n".join(needs) if needs else "",
                "## Action record\n" + "\n".join(child.record),
            )
            if part
        )
        await trio.to_thread.run_sync(_write_text, path, content)
        lines = [f"report saved to {path}", f"sub-agent {outcome.status}"]
        if outcome.error:
            lines.append(f"error: {outcome.error}")
        if final:
            lines.append(f"final answer:\n{final}")
        if needs:
            lines.append(
                "still needs approval (not run: background legs never ask for "
                "confirmation):\n" + "\n".join(needs)
            )
        state: LegState = "finished" if outcome.status == "finished" else "failed"
        return state, "\n".join(lines)

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
                await self._deliver(job, leg_finished_report(job.id, job.objective, leg))
            elif cause is Cause.PAUSED:
                await self._deliver(job, leg_stopped_report(job.id, job.objective, leg))
            await self._save(job)
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
        )
        try:
            await self._maybe_settle(job)
        except Exception:
            log.exception("could not settle job %s", job.id)

    async def _watch_report(self, leg: Leg, report: WatchReport) -> None:
        """A watcher update (R28): kept on the leg (R24), announced and routed (R26).

        A failure to route it is logged, never fatal to the leg's command."""
        try:
            await self._route_update(leg, report)
        except Exception:
            log.exception("could not route an update of leg %s", leg.id)

    async def _route_update(self, leg: Leg, report: WatchReport) -> None:
        job = leg.job
        output = leg.add_report(report.output)
        text = leg_update_report(
            job.id, job.objective, leg, hit_line=report.hit_line, note=report.note, output=output
        )
        self._tasks.session(job.session_id).hub.emit(
            job.task_hash, ev.LegReport, job_id=job.id, leg_id=leg.id, text=text
        )
        await self._deliver(job, text)
        await self._save(job)

    # ------------------------------------------------------------------ routing

    async def _deliver(self, job: Job, text: str) -> None:
        """Route one report by where the starting task is now (R26)."""
        session = self._tasks.session(job.session_id)
        async with self._row_lock:
            run = session.runs.get(job.task_hash)
            if run is None:
                row = await self._services.store.get_task(job.session_id, job.task_hash)
                run = session.runs.get(job.task_hash)
                if run is None:
                    if row is not None and row.state != "running":
                        await self._add_to_row(row, [text])
                    else:
                        job.held += 1
                    return
        run.reports.append(text)
        job.in_flight.append((run, text))

    async def _add_to_row(self, row: TaskRow, texts: Sequence[str]) -> None:
        """Carry reports into a pending task's snapshot and mark it as having jobs (R26,
        R35). Call with ``_row_lock`` held."""
        snapshot = (
            snapshot_from_json(row.snapshot)
            if row.snapshot
            else Snapshot(objective=row.objective, messages=[])
        )
        fresh = [text for text in texts if text not in snapshot.reports]
        if not fresh and row.has_jobs:
            return
        snapshot = attrs.evolve(snapshot, reports=[*snapshot.reports, *fresh])
        await self._services.store.put_task(
            attrs.evolve(
                row,
                snapshot=snapshot_to_json(snapshot),
                has_jobs=True,
                updated_at=self._services.clock(),
            )
        )

    async def on_task_end(self, run: TaskRun) -> None:
        """The end hook of every run (`engine.runs.TaskRun.on_end`).

        Takes back reports the run did not read and routes them again, marks a pending
        task as having jobs, stops the jobs of a cancelled or paused task (R44), and
        settles jobs whose legs are all done.
        """
        self._turn_job.pop((run.session_id, run.task_hash), None)
        jobs = [
            job
            for job in self._jobs.values()
            if not job.settled
            and job.session_id == run.session_id
            and job.task_hash == run.task_hash
        ]
        if not jobs:
            return
        outcome = run.outcome
        pending = outcome is not None and outcome.status in _PENDING_STATUSES
        cause = run.handle.cause
        for job in jobs:
            unread = [
                text
                for owner, text in job.in_flight
                if owner is run and any(item is text for item in run.reports)
            ]
            job.in_flight = [(owner, text) for owner, text in job.in_flight if owner is not run]
            for text in unread:
                run.reports.remove(text)
                await self._deliver(job, text)
        if pending:
            async with self._row_lock:
                row = await self._services.store.get_task(run.session_id, run.task_hash)
                if row is not None and row.state != "running":
                    await self._add_to_row(row, [])
        if cause in (Cause.USER_CANCELED, Cause.PAUSED):
            for job in jobs:
                job.cancelled = job.cancelled or cause is Cause.USER_CANCELED
                for leg in job.legs:
                    if not leg.ended:
                        leg.handle.cancel(cause)
        for job in jobs:
            await self._maybe_settle(job)

    async def _maybe_settle(self, job: Job) -> None:
        """Settle ``job`` once all its legs' ends are recorded and its task does not run
        (R26)."""
        if job.settled or not all(leg.recorded for leg in job.legs):
            return
        session = self._tasks.session(job.session_id)
        if job.task_hash in session.runs:
            return  # the run's end hook settles it
        job.settled = True
        if job.held and not job.cancelled and not self._closing:
            try:
                followup = await self._tasks.start_task(
                    job.session_id,
                    followup_message(
                        objective=job.objective,
                        next_step=job.next,
                        task_hash=job.task_hash,
                        legs=job.legs,
                    ),
                    origin=RunOrigin(window_hash=job.window_hash),
                    objective=job.objective or "background group finished",
                )
            except Exception:
                log.exception("could not start the follow-up task of job %s", job.id)
            else:
                job.followup_task = followup.task_hash
                self._followups += 1
        try:
            await self._save(job)
        finally:  # said once the job file is final
            session.hub.emit(
                job.task_hash, ev.JobSettled, job_id=job.id, followup_task=job.followup_task
            )
        for leg in job.legs:
            self._legs.pop(leg.id, None)
        self._jobs.pop(job.id, None)
        self._settled.append(job)

    # ------------------------------------------------------------------ job file

    async def _save(self, job: Job) -> None:
        """Rewrite the job file atomically (R21); writes of one job keep their order."""
        async with job.write_lock:
            job.updated_at = self._services.clock()
            await trio.to_thread.run_sync(_write_json_atomic, job.path, job.to_json())
