"""The ``background_command`` and ``background_subagents`` tools (R20-R22, R30).

Both exist only for ``cli-`` tasks that run for themselves (not for sub-agent child
runs, R20) and return at once with the ids of the legs they started (R25); the legs'
reports come later, routed by `agentrio.engine.background`. Legs one task starts in one turn,
through either tool, form one job; its ``objective`` and ``next`` are the first
non-empty values given in that turn (R21).

A background command is confirmed in the starting task, exactly like ``run_command``
(read-only simple commands go straight through, as their judged argv in the read-only
sandbox and bounded by ``readonly_timeout_s``; everything else asks the task's window,
and is denied when nobody can answer, R8): the leg itself never asks (R30). Each command
is confirmed on its own, so one denial does not stop the others. Sub-agent objectives
need no confirmation: the sub-agent's own calls that would need one are not run (R30).

The tools know the background machinery only through `BackgroundLegs`, the two calls
they make; `agentrio.engine.background.BackgroundManager` provides them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, Protocol

import attrs

from agentrio.engine.messages import legs_started
from agentrio.engine.models.base import ToolCallRequest, ToolSpec
from agentrio.engine.tools.base import Reach, Services, ToolContext, ToolOutcome
from agentrio.engine.tools.run_command import CommandPlan, RunCommandTool
from agentrio.engine.tools.workdir import WorkdirError, real_workdir
from agentrio.protocol.events import StartedLeg, ToolDetails

__all__ = [
    "BackgroundCommandTool",
    "BackgroundLegs",
    "BackgroundSubagentsTool",
    "LegKind",
    "StartedJob",
]

LegKind = Literal["cmd", "sub"]


@attrs.frozen
class StartedJob:
    """The legs one call started: ``(leg id, label, queued)`` each, in job ``job_id``."""

    job_id: str
    legs: list[tuple[str, str, bool]]

    def details(self) -> ToolDetails:
        """The job and its legs, typed, for the front-ends (``tool_result.details``)."""
        legs = [
            StartedLeg(leg_id=leg, label=label, queued=queued) for leg, label, queued in self.legs
        ]
        return ToolDetails(job_id=self.job_id, legs=legs)


class BackgroundLegs(Protocol):
    """What the background tools need of the background machinery."""

    def available(self, ctx: ToolContext) -> bool:
        """Whether this task may start legs (R20)."""
        ...

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
        """Start one leg per label in the job of the task's current turn (R21);
        command legs come with one approved plan each."""
        ...


_GROUP_PROPERTIES: dict[str, Any] = {
    "objective": {
        "type": "string",
        "description": "What this group of background work is for, understandable alone.",
    },
    "next": {
        "type": "string",
        "description": "What to do with the reports once the work finishes.",
    },
}


def _strings(args: dict[str, Any], plural: str, singular: str) -> list[str]:
    raw = args.get(plural, args.get(singular))
    if isinstance(raw, str):
        raw = [raw]
    if not isinstance(raw, list) or not raw or not all(isinstance(v, str) for v in raw):
        raise ValueError(f"argument {plural!r} must be a non-empty list of strings")
    values = [value.strip() for value in raw]
    if not all(values):
        raise ValueError(f"argument {plural!r} must not hold empty strings")
    return values


def _text(args: dict[str, Any], name: str) -> str:
    value = args.get(name, "")
    if not isinstance(value, str):
        raise ValueError(f"argument {name!r} must be a string")
    return value


class _Confirmer(RunCommandTool):
    """``run_command``'s confirmation, asked under the ``background_command`` name."""

    name = "background_command"


class BackgroundCommandTool:
    name = "background_command"
    #: Read-only commands start unasked (in the sandbox); legs start no legs (R20).
    reach = Reach(unasked=True, in_subagents=False, in_legs=False)

    def __init__(self, services: Services, legs: BackgroundLegs) -> None:
        self._services = services
        self._legs = legs
        self._confirmer = _Confirmer(services)

    def spec(self) -> ToolSpec:
        return ToolSpec(
            name=self.name,
            description=(
                "Run shell commands in the background, one leg each, and return at once. "
                "Output is watched for errors; reports arrive later as messages."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "commands": {"type": "array", "items": {"type": "string"}},
                    "cwd": {"type": "string"},
                    **_GROUP_PROPERTIES,
                },
                "required": ["commands"],
            },
        )

    def available(self, ctx: ToolContext) -> bool:
        return self._legs.available(ctx)

    async def execute(self, ctx: ToolContext, call: ToolCallRequest) -> ToolOutcome:
        commands = _strings(call.args, "commands", "command")
        objective, next_step = _text(call.args, "objective"), _text(call.args, "next")
        cwd = call.args.get("cwd")
        if cwd is not None and not isinstance(cwd, str):
            raise ValueError("argument 'cwd' must be a string")
        try:
            where = await real_workdir(cwd, ctx.workdir.path)
        except WorkdirError as exc:
            return ToolOutcome(ok=False, output=f"not run: {exc}; no command was started")
        approved: list[CommandPlan] = []
        refused: list[str] = []
        again = ctx.calls.met_again(call) is not None  # issue 34: each command asks
        for command in commands:
            args: dict[str, Any] = {"command": command}
            if cwd is not None:
                args["cwd"] = cwd
            one = ToolCallRequest(id=call.id, name=self.name, args=args)
            plan = await self._confirmer.plan(ctx, one, command, where, again=again)
            if isinstance(plan, CommandPlan):
                approved.append(plan)
            else:
                refused.append(f"- {command}: {plan.skipped}")
        if not approved:
            return ToolOutcome(
                ok=False, output="", skipped="no command was started:\n" + "\n".join(refused)
            )
        await ctx.calls.effect()
        started = await self._legs.start_legs(
            ctx,
            "cmd",
            [str(plan.command) for plan in approved],
            objective=objective,
            next_step=next_step,
            cwd=where,
            plans=approved,
        )
        output = legs_started(started.job_id, started.legs)
        if refused:
            output += "\nNot started:\n" + "\n".join(refused)
        return ToolOutcome(ok=not refused, output=output, details=started.details())


class BackgroundSubagentsTool:
    name = "background_subagents"
    reach = Reach(unasked=True, in_subagents=False, in_legs=False)

    def __init__(self, services: Services, legs: BackgroundLegs) -> None:
        self._services = services
        self._legs = legs

    def spec(self) -> ToolSpec:
        return ToolSpec(
            name=self.name,
            description=(
                "Start background sub-agents, one per objective, and return at once. Each "
                "works alone (it cannot ask questions or get confirmations) and saves a "
                "report file; reports arrive later as messages."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "objectives": {"type": "array", "items": {"type": "string"}},
                    **_GROUP_PROPERTIES,
                },
                "required": ["objectives"],
            },
        )

    def available(self, ctx: ToolContext) -> bool:
        return self._legs.available(ctx)

    async def execute(self, ctx: ToolContext, call: ToolCallRequest) -> ToolOutcome:
        objectives = _strings(call.args, "objectives", "objective_list")
        objective, next_step = _text(call.args, "objective"), _text(call.args, "next")
        started = await self._legs.start_legs(
            ctx, "sub", objectives, objective=objective, next_step=next_step
        )
        return ToolOutcome(
            output=legs_started(started.job_id, started.legs), details=started.details()
        )
