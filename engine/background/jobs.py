"""Legs and jobs: what one piece of background work is, and the job file (R21-R24).

A **leg** is one background command (``cmd_…``) or sub-agent (``sub_…``); the legs one
task starts in one turn form a **job** (``job_…``). While a job is alive its record is
``<home>/sessions/<session>/background/job_<id>.json`` (objective, next, starting task,
legs with state, result and reports), rewritten atomically on every change (`save_job`)
and kept after the job settles; the daemon clears the folder at start (R27). A
sub-agent's report is ``<home>/sessions/<session>/reports/<leg id>.md`` (R30). Both
are written 0600 in folders made 0700 (`agentrio.engine.store.files`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final, Literal

import attrs
import trio

from agentrio.engine.messages import leg_description
from agentrio.engine.nursery_tasks import TaskHandle
from agentrio.engine.processes.tracking import GroupLog
from agentrio.engine.runs import TaskRun
from agentrio.engine.snapshot import clamp
from agentrio.engine.store.files import make_private_dirs, write_private_atomic
from agentrio.engine.tools.run_command import CommandPlan
from agentrio.engine.tools.run_commands import Proposal
from agentrio.engine.watch import REPORT_KEEP_BYTES
from agentrio.protocol.events import SubagentLegEnd
from agentrio.protocol.frames import LegInfo

__all__ = [
    "ENDED",
    "LEG_REPORTS_LIMIT",
    "Job",
    "Leg",
    "LegKind",
    "LegState",
    "job_path",
    "log_path",
    "report_path",
    "save_job",
    "write_report",
]

#: All watch reports one leg keeps, in bytes (R24).
LEG_REPORTS_LIMIT: Final = 32 * 1024

LegKind = Literal["cmd", "sub"]
LegState = Literal["queued", "running", "finished", "failed", "canceled"]
ENDED: Final = frozenset({"finished", "failed", "canceled"})


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
    #: A sub-agent leg's ending, typed for the front-ends (``leg_finished``'s
    #: ``report``, ``error``, ``needs``, ``answer``): what ``result`` says in prose.
    ending: SubagentLegEnd | None = None
    #: Watch reports kept (R24): each at most 8 KiB, all at most 32 KiB.
    reports: list[str] = attrs.field(factory=list)
    #: How many of the oldest reports were dropped to keep within the limit.
    elided_reports: int = 0
    holds_token: bool = False
    #: The child task of a sub-agent leg, once started.
    child: TaskRun | None = None
    #: The process groups a command leg ran in (R48), for a stop's receipt.
    groups: GroupLog = attrs.field(factory=GroupLog)
    #: The commands a sub-agent leg's child could not run for want of approval (R30),
    #: offered to the user in the job's follow-up (R84).
    proposals: list[Proposal] = attrs.field(factory=list)
    #: Set once the leg's end is fully recorded (its report routed, the job file
    #: saved): only then may the job settle. ``ended`` turns true earlier, before those
    #: awaits, and a sibling leg ending meanwhile would settle the job without this
    #: leg's report (no follow-up, the report lost).
    recorded: bool = False

    @property
    def ended(self) -> bool:
        return self.state in ENDED

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
    #: The starting task's asks were the session's (R99, ``agentrio exec``): so are its
    #: follow-up's, whose starting window may long be closed.
    share_asks: bool = False
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


def _session_dir(home: Path, session_id: str) -> Path:
    return home / "sessions" / session_id


def job_path(home: Path, session_id: str, job_id: str) -> Path:
    """``<home>/sessions/<session>/background/<job id>.json`` (R21)."""
    return _session_dir(home, session_id) / "background" / f"{job_id}.json"


def log_path(home: Path, leg: Leg) -> Path:
    """``<home>/sessions/<session>/background/<leg id>.log``: a command leg's output
    while it runs (R23)."""
    return _session_dir(home, leg.job.session_id) / "background" / f"{leg.id}.log"


def report_path(home: Path, leg: Leg) -> Path:
    """``<home>/sessions/<session>/reports/<leg id>.md``: a sub-agent's report (R30)."""
    return _session_dir(home, leg.job.session_id) / "reports" / f"{leg.id}.md"


def _write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    """Blocking: write ``data`` to ``path`` through a temporary file (0600 from its
    creation) and `os.replace`; a missing folder is made 0700."""
    make_private_dirs(path.parent)
    write_private_atomic(path, json.dumps(data, ensure_ascii=False, indent=1).encode("utf-8"))


def _write_text(path: Path, text: str) -> None:
    """Blocking: write a report file (made once, read by people and tasks; 0600)."""
    make_private_dirs(path.parent)
    write_private_atomic(path, text.encode("utf-8"))


async def save_job(job: Job, clock: Callable[[], float]) -> None:
    """Rewrite the job file atomically (R21); writes of one job keep their order."""
    async with job.write_lock:
        job.updated_at = clock()
        await trio.to_thread.run_sync(_write_json_atomic, job.path, job.to_json())


async def write_report(path: Path, text: str) -> None:
    """Write a sub-agent's report file (R30), off the Trio thread."""
    await trio.to_thread.run_sync(_write_text, path, text)
