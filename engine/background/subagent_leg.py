"""The runner of a sub-agent leg (``background_subagents``, R30).

A sub-agent is a child task on the session ``<session>-<leg id>``, with the same model
and the parent session's remembered commands, flagged as working for the leg: it gets
no background tools, asks no questions and raises no confirmations (a call that would
need one is not run, `agentrio.engine.messages.subagent_needs_approval`). When it ends, its
report -- final answer, the calls still needing approval, its whole action record -- is
saved to ``<home>/sessions/<session>/reports/<leg id>.md`` and the leg's result names
that file. The commands among those calls are kept on the leg (``Leg.proposals``,
exactly as the child wrote them): the job's follow-up offers them to the user (R84).

A sub-agent is never resumed on its own: when its leg is cancelled, its child task is
cancelled with ``user_canceled`` (or ``shutdown`` when the daemon stops, which keeps
the child resumable like any task).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Final

import trio

from agentrio.engine.background.jobs import Leg, LegState, write_report
from agentrio.engine.background.starter import TaskStarter
from agentrio.engine.messages import NEEDS_APPROVAL, subagent_report, subagent_result
from agentrio.engine.tools.run_command import RunCommandTool
from agentrio.engine.tools.run_commands import proposal_from_call
from agentrio.protocol.causes import Cause
from agentrio.protocol.events import SubagentLegEnd

__all__ = ["run_subagent_leg"]

#: How long a cancelled sub-agent leg waits for its child task to record its end.
CHILD_EXIT_WAIT_S: Final = 5.0


async def run_subagent_leg(
    tasks: TaskStarter, leg: Leg, *, report_path: Path
) -> tuple[LegState, str]:
    """Run ``leg``'s sub-agent to its end; returns its state and its result."""
    job = leg.job
    child_session = f"{job.session_id[:115]}-{leg.id}"
    child = await tasks.start_task(  # in the directory of the task that started it (R86)
        child_session, leg.label, allow_all=leg.allow_all, subagent_of=leg.id, cwd=leg.cwd
    )
    leg.child = child
    try:
        outcome = await child.wait_done()
    finally:
        if child.outcome is None:
            cause = leg.handle.cause or Cause.SHUTDOWN
            child.handle.cancel(Cause.SHUTDOWN if cause is Cause.SHUTDOWN else Cause.USER_CANCELED)
            with trio.CancelScope(shield=True), trio.move_on_after(CHILD_EXIT_WAIT_S):
                await child.handle.wait_finished()
    unapproved = [
        call for call in child.completed if call.output.startswith(f"not run: {NEEDS_APPROVAL}")
    ]
    needs = [
        f"- {call.tool_name} {json.dumps(call.args, ensure_ascii=False)}: "
        f"{call.output.removeprefix('not run: ')}"
        for call in unapproved
    ]
    for call in unapproved:
        proposal = proposal_from_call(call.args) if call.tool_name == RunCommandTool.name else None
        if proposal is not None:
            leg.proposals.append(proposal)
    final = outcome.text or (f"(no final text; {outcome.error})" if outcome.error else "")
    report = subagent_report(
        leg_id=leg.id,
        objective=leg.label,
        child_session=child_session,
        child_task=child.task_hash,
        status=outcome.status,
        final=final,
        needs=needs,
        record=child.record,
    )
    await write_report(report_path, report)
    leg.ending = SubagentLegEnd(
        report=str(report_path), error=outcome.error, needs=needs, answer=final
    )
    state: LegState = "finished" if outcome.status == "finished" else "failed"
    return state, subagent_result(
        path=str(report_path), status=outcome.status, error=outcome.error, final=final, needs=needs
    )
