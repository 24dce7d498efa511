"""A stop that says what it stopped (issue 34 item 4, R44, R48).

Every run the engine launches goes through `run_accounted`: around `execute_task` it
notes the process groups the run's calls start (`agentrio.engine.processes.tracking`)
and hooks the run's cancel (`TaskHandle.on_cancel`). At the cancel -- before the scope
is cancelled, so nothing has unwound yet -- it writes down what the run holds: the
asks it has open (the cancel withdraws them at once), its background legs still going,
its calls in flight and their live process groups.

Once the run has recorded its end (its end hooks cancelled the legs a cancel or pause
stops, R44), the receipt waits, shielded and bounded, for those legs to end -- a
command leg's group killed (R48), a sub-agent leg's child task ended -- and then looks
whether any group it names still has a running member. Only then does the run count as
ended (`TaskRun.wait_done`): the ``done`` frame, the HTTP cancel reply and so the REPL's
end line carry the receipt (`agentrio.protocol.stops.StopReceipt`), and ``/v1/health``
and ``agentrio status`` asked after it count none of that work as running.

A shutdown makes no receipt: nobody is there to read it, and shutdown ends every leg
itself (R53).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import attrs
import trio

from agentrio.engine.background.jobs import Leg
from agentrio.engine.background.manager import BackgroundManager
from agentrio.engine.messages import SUBAGENTS_TOOL, subagent_label
from agentrio.engine.models.base import ToolCallRequest
from agentrio.engine.pending import Entry
from agentrio.engine.processes.groups import group_alive, group_exists
from agentrio.engine.processes.tracking import GroupLog, logging_groups
from agentrio.engine.runs import TaskRun, execute_task
from agentrio.engine.tools.registry import Toolbox
from agentrio.protocol.causes import Cause
from agentrio.protocol.stops import StoppedLeg, StopReceipt

__all__ = ["STOP_WAIT_S", "run_accounted"]

#: How long a receipt waits for the legs its stop cancelled to end: a command leg's
#: group gets ``[tools] kill_grace_s`` (2 s) before SIGKILL, a sub-agent leg's child 5 s.
STOP_WAIT_S: Final = 10.0
#: How the names of MCP servers' tools start (`agentrio.engine.mcp.servers`).
_MCP_PREFIX: Final = "mcp__"


@attrs.define(eq=False)
class _Watch:
    """What one run held when it was cancelled (see the module docstring)."""

    run: TaskRun
    background: BackgroundManager
    groups: GroupLog = attrs.field(factory=GroupLog)
    cause: Cause | None = None
    asks: list[Entry] = attrs.field(factory=list)
    legs: list[Leg] = attrs.field(factory=list)
    calls: list[ToolCallRequest] = attrs.field(factory=list)
    live_groups: list[int] = attrs.field(factory=list)
    started_before: int = 0

    def arm(self, cause: Cause) -> None:
        """At the cancel, before anything unwinds: note what the run holds."""
        run = self.run
        self.cause = cause
        self.asks = [
            entry
            for entry in run.services.registry.entries(run.session_id)
            if entry.request.task_hash == run.task_hash and not entry.parked
        ]
        self.legs = [
            leg
            for job in self.background.jobs()
            if job.session_id == run.session_id and job.task_hash == run.task_hash
            for leg in job.legs
            if not leg.ended
        ]
        self.calls = list(run.open_calls)
        self.live_groups = sorted(self.groups.live)
        self.started_before = len(self.groups.started)

    async def receipt(self, cause: Cause) -> StopReceipt:
        """Wait for the legs this stop ended, then say what it ended (shield it)."""
        stopped = [leg for leg in self.legs if leg.handle.cause is not None]
        left = [leg for leg in self.legs if leg.handle.cause is None and not leg.ended]
        with trio.move_on_after(STOP_WAIT_S):
            for leg in stopped:
                await leg.handle.wait_finished()
        legs = [_stopped_leg(leg) for leg in stopped]
        groups = list(
            dict.fromkeys(
                [
                    *self.live_groups,
                    *self.groups.started[self.started_before :],
                    *(group for leg in legs for group in leg.process_groups),
                ]
            )
        )
        existing = [group for group in groups if group_exists(group)]  # no /proc read
        alive = await trio.to_thread.run_sync(_alive, existing) if existing else []
        children = [leg.child.outcome.stopped for leg in stopped if leg.child and leg.child.outcome]
        alive += [group for child in children if child for group in child.still_alive]
        return StopReceipt(
            cause=str(cause),
            legs=legs,
            left_running=[_stopped_leg(leg, status="running") for leg in left],
            calls=[call.name for call in self.calls],
            subagents=_subagents(self.calls),
            mcp_calls=[call.name for call in self.calls if call.name.startswith(_MCP_PREFIX)],
            process_groups=groups,
            asks_withdrawn=[entry.id for entry in self.asks if entry.reply is None],
            still_alive=sorted(set(alive)),
        )


def _alive(groups: Sequence[int]) -> list[int]:
    """Those of ``groups`` with a member still running (blocking: reads ``/proc``)."""
    return [group for group in groups if group_alive(group)]


def _stopped_leg(leg: Leg, *, status: str | None = None) -> StoppedLeg:
    """One leg for the receipt: a command leg's groups, a sub-agent leg's child's."""
    groups = list(leg.groups.started)
    child = leg.child.outcome if leg.child is not None else None
    if child is not None and child.stopped is not None:
        groups += child.stopped.process_groups
    return StoppedLeg(
        leg_id=leg.id,
        kind=leg.kind,
        label=leg.label,
        status=status or leg.state,
        process_groups=groups,
    )


def _subagents(calls: Sequence[ToolCallRequest]) -> list[str]:
    """The labels of the in-process sub-agents of the ``subagents`` calls in flight
    (R80), as their asks named them."""
    labels: list[str] = []
    for call in calls:
        objectives = call.args.get("objectives") if call.name == SUBAGENTS_TOOL else None
        if isinstance(objectives, list):
            texts = [str(objective) for objective in objectives]
            labels += [subagent_label(i, len(texts), text) for i, text in enumerate(texts)]
    return labels


async def run_accounted(
    run: TaskRun,
    toolbox: Toolbox,
    background: BackgroundManager,
    *,
    task_status: trio.TaskStatus[None],
) -> None:
    """`execute_task`, and the receipt of its stop on ``run.outcome.stopped``."""
    watch = _Watch(run, background)
    run.handle.on_cancel.append(watch.arm)
    try:
        with logging_groups(watch.groups):
            await execute_task(run, toolbox, task_status=task_status)
    finally:
        outcome, cause = run.outcome, watch.cause
        if cause not in (None, Cause.SHUTDOWN) and outcome is not None and outcome.cause:
            assert cause is not None
            with trio.CancelScope(shield=True):
                stopped = await watch.receipt(cause)
            run.outcome = attrs.evolve(outcome, stopped=stopped)
