"""Where a job's reports go, and when the job settles (R25, R26, R35, R36, R44).

**Routing (R26).** A report (a leg's end, or a watcher update, R28) goes where the
starting task is *now*:

- running in this process: appended to its ``reports``, added at the start of its next
  turn (a report arriving as it would finish gives it one more turn, `agentrio.engine.runs`);
- stopped but resumable (parked, paused, aborted, disconnected): written into the
  pending row's snapshot (``Snapshot.reports``), with ``has_jobs`` set, so the resume
  message carries it and a resume keeps the task's hash (R35, R36);
- ended (finished, failed, canceled, or its pending record is gone): *held*.

A report pushed into a run that then ends without reading it is taken back when the run
ends (`ReportRouter.task_ended`) and routed again, so none is lost in the gap between
the model's last reply and the run's exit.

**Settling.** A job settles once every leg's end is recorded and its starting task is
not running. If it then holds reports the task never took, it runs **once** as a new
task on the same session whose input starts ``[Resumed Task — background group
finished]`` (`agentrio.engine.messages.followup_message`) and carries the objective, next,
every report of the job and the starting task's hash. ``job_settled`` names that
follow-up task (or none). A job whose starting task was ``user_canceled`` settles
without a follow-up, and so does every job once the engine is closing.

**Commands the sub-agents could not run (R84).** A job whose sub-agent legs kept
commands that needed approval (``Leg.proposals``) also gets a follow-up, even when its
reports all reached the starting task: before its model's first turn, the follow-up
offers them to the user in one confirmation (`agentrio.engine.tools.run_commands`, at most
`MAX_PROPOSALS`, in leg order), and its first message gains a section with the result
(`agentrio.engine.messages.proposals_section`). A follow-up stopped and kept while offering
makes the offer again when it is resumed (`reoffers`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Final

import attrs
import trio

from agentrio.engine.background.jobs import Job, save_job
from agentrio.engine.background.starter import TaskStarter
from agentrio.engine.messages import (
    followup_message,
    proposals_label,
    proposals_section,
    reoffer_label,
)
from agentrio.engine.models.base import ToolCallRequest
from agentrio.engine.runs import PreludeCall, RunOrigin, TaskRun
from agentrio.engine.snapshot import Snapshot, has_elided, snapshot_from_json, snapshot_to_json
from agentrio.engine.store.base import TaskRow
from agentrio.engine.tools.base import Services
from agentrio.engine.tools.run_commands import (
    MAX_PROPOSALS,
    Proposal,
    RunCommandsTool,
    proposal_args,
    proposals_from_args,
)
from agentrio.protocol import events as ev
from agentrio.protocol.causes import Cause
from agentrio.protocol.frames import KEPT_STATUSES

__all__ = ["ReportRouter", "reoffers"]

log = logging.getLogger("agentrio.background")

#: How the id of a follow-up's ``run_commands`` call starts (then the job id).
_OFFER_PREFIX: Final = "offer_"


class ReportRouter:
    """Routes reports and settles jobs (see the module docstring).

    ``on_settled(job)`` is called once a job's settling is fully recorded, so that its
    owner can forget it.
    """

    def __init__(
        self, services: Services, tasks: TaskStarter, *, on_settled: Callable[[Job], None]
    ) -> None:
        self._services = services
        self._tasks = tasks
        self._on_settled = on_settled
        #: Serialises read-modify-write of pending rows (reports into a snapshot), and
        #: routing a report against settling its job (`maybe_settle`).
        self._row_lock = trio.Lock()
        #: Set by the engine's shutdown: no follow-up starts any more.
        self.closing = False
        self.followups_started = 0

    async def deliver(self, job: Job, text: str) -> None:
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

    async def task_ended(self, run: TaskRun, jobs: Sequence[Job]) -> None:
        """The starting task of ``jobs`` ended: take back the reports it did not read
        and route them again, mark a pending task as having jobs, stop the jobs of a
        cancelled or paused task (R44), and settle jobs whose legs are all done."""
        outcome = run.outcome
        pending = outcome is not None and (outcome.status in KEPT_STATUSES or outcome.kept)
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
                await self.deliver(job, text)
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
            await self.maybe_settle(job)

    async def maybe_settle(self, job: Job) -> None:
        """Settle ``job`` once all its legs' ends are recorded and its task does not run
        (R26)."""
        # Under the routing lock: a report being routed again as its run ends
        # (`task_ended`) is counted in ``held`` only once ``deliver`` has read the store,
        # and a settling decided in that gap ran no follow-up (the report lost, R26).
        async with self._row_lock:
            if job.settled or not all(leg.recorded for leg in job.legs):
                return
            if job.task_hash in self._tasks.session(job.session_id).runs:
                return  # the run's end hook settles it
            job.settled = True
        proposed = any(leg.proposals for leg in job.legs)
        if (job.held or proposed) and not job.cancelled and not self.closing:
            await self._start_followup(job)
        try:
            await save_job(job, self._services.clock)
        finally:  # said once the job file is final
            self._tasks.session(job.session_id).hub.emit(
                job.task_hash, ev.JobSettled, job_id=job.id, followup_task=job.followup_task
            )
        self._on_settled(job)

    async def _start_followup(self, job: Job) -> None:
        """Run the job once more as a new task with every report (R26)."""
        text = followup_message(
            objective=job.objective, next_step=job.next, task_hash=job.task_hash, legs=job.legs
        )
        try:
            followup = await self._tasks.start_task(
                job.session_id,
                text,
                origin=RunOrigin(window_hash=job.window_hash, share_asks=job.share_asks),
                objective=job.objective or "background group finished",
                prelude=self._offer(job),
            )
        except Exception:
            log.exception("could not start the follow-up task of job %s", job.id)
        else:
            job.followup_task = followup.task_hash
            self.followups_started += 1

    def _offer(self, job: Job) -> list[PreludeCall]:
        """The follow-up's one ``run_commands`` call offering the commands the job's
        sub-agents could not run (R84), or nothing when there are none."""
        proposals = [proposal for leg in job.legs for proposal in leg.proposals]
        if not proposals:
            return []
        offered = proposals[:MAX_PROPOSALS]
        legs = [(leg.id, leg.label) for leg in job.legs if leg.proposals]
        label = proposals_label(job.id, legs)
        call_id = f"{_OFFER_PREFIX}{job.id}"
        left_out = len(proposals) - len(offered)
        return [_offer_call(self._services, call_id, offered, label, left_out=left_out)]


def reoffers(services: Services, snapshot: Snapshot) -> list[PreludeCall]:
    """The offers (R84) a stopped follow-up had not finished, made again when it is
    resumed: each interrupted ``run_commands`` call whose arguments were kept whole (an
    elided command, R11, is never offered: the model reads it as interrupted).

    Only a run stopped before its model's first turn has any: an offer is made before
    it, so a snapshot with messages holds none, and a model's own call named
    ``run_commands`` is never offered under the sub-agents' name."""
    preludes: list[PreludeCall] = []
    if snapshot.messages:
        return preludes
    for call in snapshot.interrupted:
        if call.tool_name != RunCommandsTool.name or not call.call_id.startswith(_OFFER_PREFIX):
            continue
        if has_elided(Snapshot(objective="", messages=[], interrupted=[call])):
            continue
        try:
            proposals = proposals_from_args(call.args)
        except ValueError:
            continue
        label = reoffer_label(call.call_id.removeprefix(_OFFER_PREFIX))
        preludes.append(_offer_call(services, call.call_id, proposals, label, left_out=0))
    return preludes


def _offer_call(
    services: Services, call_id: str, proposals: list[Proposal], label: str, *, left_out: int
) -> PreludeCall:
    tool = RunCommandsTool(services, proposed_by=label)
    call = ToolCallRequest(id=call_id, name=tool.name, args=proposal_args(proposals))

    def section(result: str) -> str:
        return proposals_section(result, offered=len(proposals), left_out=left_out)

    return PreludeCall(tool=tool, call=call, section=section)
