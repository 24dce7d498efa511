"""``run_commands``: the commands background sub-agents could not run, offered to the
person in one confirmation (R84).

A background sub-agent never asks (R30): a ``run_command`` call that needs a
confirmation is not run, and its leg keeps it as a `Proposal`. When the job's follow-up
task starts in the starting ``cli-`` session (R26), its first act -- before its model's
first turn -- is one call of this tool (an `agentrio.engine.runs.PreludeCall`, made by
`agentrio.engine.background.routing`). The model is never offered it (`available` is false).

**What the person sees is what runs.** The call's arguments (`proposal_args`) are
``command 1``, ``cwd 1`` (only when the sub-agent gave one), ``command 2``, … -- each
command exactly as the sub-agent wrote it, a string or an argv list, in order. The
call reads them back into the list it will run (`proposals_from_args`, strict: nothing
else is a command), resolves each working directory to its real path
(`agentrio.engine.tools.workdir`; one that does not exist runs none and says so), and asks with
that list's arguments written afresh -- every ``cwd N`` the real directory -- so every
front-end draws exactly what will run with its faithful renderer (R77). The list is
never judged again into anything else. Approved, each runs in order, in the
starting session, the way `run_command` runs an approved command (`run_plan`): a
simple command as the argv it was judged to be, anything else through ``/bin/sh -c``
as shown, outside the sandbox, bounded by ``[tools] command_timeout_s``. A command that
fails does not stop the later ones; the result lists each command with how it ended.

**The choices.** Approve runs them all. "Always allow this exact command" runs them
all and remembers each command exactly, in its real directory, as `run_command`
remembers one (R76): never a program, never a pattern, never another directory.
"Allow this turn" runs them all and allows nothing more:
this call is the whole of its turn. Deny with reason runs none, and the model reads
the reason. Stop and discard / Stop, keep to resume end the follow-up; none ran (a
kept follow-up makes the offer again when it is resumed,
`agentrio.engine.background.routing.reoffers`). A command touching a restricted path marks the
ask ``restricted`` and asks for the system password (R7) unless sudo's credentials are
cached; a wrong password runs none. Nobody listening, a closed connection or any other
failure of the ask runs none (R6, R8).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

import attrs

from agentrio.engine.models.base import ToolCallRequest, ToolSpec
from agentrio.engine.rules import command_rule
from agentrio.engine.tools.base import (
    Reach,
    Refused,
    Services,
    ServiceTool,
    ToolContext,
    ToolOutcome,
)
from agentrio.engine.tools.in_flight import again_details
from agentrio.engine.tools.run_command import (
    CommandPlan,
    format_command_result,
    judge,
    run_plan,
    start_failure,
)
from agentrio.engine.tools.workdir import WorkdirError, real_workdir

__all__ = [
    "MAX_PROPOSALS",
    "Proposal",
    "RunCommandsTool",
    "proposal_args",
    "proposal_from_call",
    "proposals_from_args",
]

#: The most commands one confirmation offers; the model is told of any left out.
MAX_PROPOSALS: Final = 32
#: The least output kept of one command, however many share the result.
_MIN_KEEP_BYTES: Final = 2048


@attrs.frozen
class Proposal:
    """A command a background sub-agent wanted to run: exactly its ``run_command``
    arguments ``command`` (a string, or an argv list) and ``cwd``."""

    command: str | list[str]
    cwd: str | None = None


def proposal_from_call(args: Mapping[str, Any]) -> Proposal | None:
    """The `Proposal` of a ``run_command`` call's arguments, or None when they do not
    name a command the way `run_command` accepts one."""
    command, cwd = args.get("command"), args.get("cwd")
    if cwd is not None and not isinstance(cwd, str):
        return None
    if isinstance(command, str) and command.strip():
        return Proposal(command, cwd)
    if isinstance(command, list) and command and all(isinstance(w, str) for w in command):
        return Proposal(list(command), cwd)
    return None


def proposal_args(proposals: Sequence[Proposal]) -> dict[str, Any]:
    """The ``run_commands`` arguments offering ``proposals``, in order (see the module
    docstring); `proposals_from_args` reads them back."""
    args: dict[str, Any] = {}
    for number, proposal in enumerate(proposals, 1):
        command = proposal.command
        args[f"command {number}"] = command if isinstance(command, str) else list(command)
        if proposal.cwd is not None:
            args[f"cwd {number}"] = proposal.cwd
    return args


def proposals_from_args(args: Mapping[str, Any]) -> list[Proposal]:
    """The commands ``args`` offer, in their order; raises `ValueError` unless ``args``
    are exactly what `proposal_args` writes: ``command 1``, an optional ``cwd 1``,
    ``command 2``, … with nothing else, nothing out of order, and at most
    `MAX_PROPOSALS`."""
    proposals: list[Proposal] = []
    names = list(args)
    index = 0
    while index < len(names):
        number = len(proposals) + 1
        if names[index] != f"command {number}":
            raise ValueError(f"argument {names[index][:64]!r} is not 'command {number}'")
        cwd_name = f"cwd {number}"
        has_cwd = index + 1 < len(names) and names[index + 1] == cwd_name
        proposal = proposal_from_call(
            {"command": args[names[index]], "cwd": args[cwd_name] if has_cwd else None}
        )
        if proposal is None:
            raise ValueError(f"argument 'command {number}' or {cwd_name!r} is not a command")
        proposals.append(proposal)
        index += 2 if has_cwd else 1
    if not proposals or len(proposals) > MAX_PROPOSALS:
        raise ValueError(f"run_commands takes 1 to {MAX_PROPOSALS} commands")
    return proposals


def _named(proposal: Proposal) -> str:
    """One command as the result names it: its JSON, so a newline in it can never pass
    for the line saying how it ended."""
    return json.dumps(proposal.command, ensure_ascii=False)


def _none_run(why: str) -> ToolOutcome:
    return ToolOutcome(ok=False, output="", skipped=f"{why}; none of the commands was run")


class RunCommandsTool(ServiceTool):
    """Offer proposals (`Proposal`) in one confirmation and run them as shown once approved
    (see the module docstring). ``proposed_by`` labels the ask and its ``confirm``
    event, so the person sees whose commands these are."""

    name = "run_commands"
    reach = Reach(unasked=False, in_subagents=False, in_legs=False)  # a prelude only

    def __init__(self, services: Services, *, proposed_by: str) -> None:
        super().__init__(services)
        self._proposed_by = proposed_by

    def available(self, ctx: ToolContext) -> bool:
        return False  # never offered to a model: only a follow-up's prelude makes it

    def spec(self) -> ToolSpec:
        return ToolSpec(
            name=self.name,
            description=(
                "Run the listed commands, in order, once the user approved them all in "
                "one confirmation."
            ),
            parameters={"type": "object", "additionalProperties": True},
        )

    async def execute(self, ctx: ToolContext, call: ToolCallRequest) -> ToolOutcome:
        asked = proposals_from_args(call.args)
        proposals: list[Proposal] = []
        verdicts = []
        for number, proposal in enumerate(asked, 1):
            try:
                where = await real_workdir(proposal.cwd, ctx.workdir.path)
            except WorkdirError as exc:
                return ToolOutcome(
                    ok=False, output=f"not run: command {number}: {exc}; none of the commands ran"
                )
            proposals.append(Proposal(proposal.command, where))
            verdicts.append(await judge(self._services, proposal.command, where))
        restricted = any(verdict.restricted for verdict in verdicts)
        again = ctx.calls.met_again(call) is not None  # issue 34: it may have partly run
        denial = await self._confirm(ctx, proposals, restricted=restricted, again=again)
        if denial is not None:
            return denial
        await ctx.calls.effect()
        plans = [
            CommandPlan(command=proposal.command, argv=verdict.argv, sandboxed=False)
            for proposal, verdict in zip(proposals, verdicts, strict=True)
        ]
        return await self._run_all(proposals, plans)

    async def _confirm(
        self, ctx: ToolContext, proposals: Sequence[Proposal], *, restricted: bool, again: bool
    ) -> ToolOutcome | None:
        """Ask once (saying the list may have partly run when it was met ``again``);
        None when the person approved, else the outcome that says why nothing ran."""
        # Shown: the arguments written afresh from the very list that will run (the
        # call's own arguments read back to it, so the two are equal).
        try:
            reply = await ctx.ask(
                "tool_confirm",
                tool_name=self.name,
                tool_args=proposal_args(proposals),
                restricted=restricted,
                subagent=self._proposed_by,
                details=again_details() if again else None,
            )
        except Refused as refused:
            return _none_run(refused.reason)
        if reply.remember:  # each command exactly (R76); allow_turn adds nothing here
            for proposal in proposals:
                assert proposal.cwd is not None  # resolved in `execute`
                rule = command_rule(proposal.command, proposal.cwd, at=self._services.clock())
                await ctx.rules.add(rule)
        return None

    async def _run_all(
        self, proposals: Sequence[Proposal], plans: Sequence[CommandPlan]
    ) -> ToolOutcome:
        """Run every plan in order, each to its end; the result names each command."""
        tools = self._services.config.tools
        keep = max(_MIN_KEEP_BYTES, tools.max_result_bytes // len(plans))
        parts: list[str] = []
        ok = True
        for number, (proposal, plan) in enumerate(zip(proposals, plans, strict=True), 1):
            try:
                result = await run_plan(
                    self._services,
                    plan,
                    cwd=proposal.cwd,
                    timeout_s=tools.command_timeout_s,
                    keep_bytes=keep,
                )
            except OSError as exc:  # the program or the cwd is not there
                ok = False
                why = start_failure(plan, exc, proposal.cwd)
                parts.append(f"command {number}: {_named(proposal)}\n{why}")
                continue
            ok = ok and result.exit_code == 0 and not result.timed_out
            parts.append(f"command {number}: {_named(proposal)}\n{format_command_result(result)}")
        return ToolOutcome(ok=ok, output="\n\n".join(parts))
