"""The ``run_command`` tool: run unasked only what was judged, in the sandbox; ask the rest.

How a command may run (R7, R8, R60, R74-R76), decided once per call by
`RunCommandTool.plan` from one parse of the command (`agentrio.engine.tools.policy.classify`):

- **Unasked**: a simple command (plain words, no shell syntax) of a read-only program
  runs as the exact argv judged (``execve``, no shell) inside the read-only sandbox
  (`agentrio.engine.processes.sandbox`), bounded by ``[tools] readonly_timeout_s``. With no sandbox,
  nothing runs unasked.
- **Approved**: everything else needs a person -- through a confirmation, a remembered
  rule of the home (`agentrio.engine.rules`: exactly this command, or this simple
  command's argv prefix, in exactly this real directory; the confirmation offers the
  prefix as a choice of its own when the command may have one), "Allow this turn"
  (which covers only what its label says: plain programs,
  `agentrio.engine.tools.turn_scope`), or a session started with ``allow_all``. It
  runs as the person saw it: a simple command as its argv, anything else through ``/bin/sh -c``,
  outside the sandbox.
- **Where**: the working directory (the call's ``cwd``, relative to the task's
  directory, or that directory: `ToolContext.workdir`) is resolved once to its real
  path (`agentrio.engine.tools.workdir`); that path is what the checks judge, what the confirmation
  shows as its ``cwd`` argument (added when the model gave none), what a remembered
  rule holds, and where the command runs. A directory that does not exist, and an
  approved program that cannot be started, are tool errors the model reads. A ``cd DIR``
  alone moves the task's directory instead of running (`agentrio.engine.tools.cd`).
- **Met again**: a call the resumed task repeats after its task stopped while that call
  ran (`agentrio.engine.tools.in_flight`, issue 34) may have partly run: it runs unasked
  only because it is read-only; no remembered rule, "Allow this turn" or ``allow_all``
  lets it through, and its confirmation says it may have partly run.
- A command touching a restricted path asks for the system password unless sudo
  credentials are cached, whatever was remembered or allowed for the turn; a wrong
  password denies the call. When no listener can take the question the call is
  **denied** -- never run unconfirmed.

A model-chosen ``timeout_s`` is clamped to ``[tools] command_timeout_s``.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import trio

from agentrio.engine.messages import subagent_needs_approval
from agentrio.engine.models.base import ToolCallRequest, ToolSpec
from agentrio.engine.processes.command_env import command_environment
from agentrio.engine.processes.runner import CommandResult, run_in_group
from agentrio.engine.processes.sandbox import SandboxError
from agentrio.engine.rules import CommandSubject, command_rule, offered_prefix, prefix_rule
from agentrio.engine.tools.base import (
    Reach,
    Refused,
    Services,
    ServiceTool,
    ToolContext,
    ToolOutcome,
)
from agentrio.engine.tools.cd import change_directory, is_cd
from agentrio.engine.tools.in_flight import again_details
from agentrio.engine.tools.live_output import run_watched
from agentrio.engine.tools.policy import Verdict, classify
from agentrio.engine.tools.turn_scope import turn_refusal
from agentrio.engine.tools.workdir import WorkdirError, real_workdir
from agentrio.protocol.rules import AllowedRule

__all__ = [
    "CommandPlan",
    "RunCommandTool",
    "format_command_result",
    "judge",
    "run_plan",
    "shown_args",
    "start_failure",
]


@attrs.frozen
class CommandPlan:
    """How an allowed command runs.

    ``sandboxed``: nobody was asked; ``argv`` (the judged argv) runs in the sandbox.
    Otherwise a person approved ``command``: ``argv`` when it is simple (the same words
    ``sh`` would build), else the shell string as shown.
    """

    command: str | list[str]
    argv: tuple[str, ...] | None
    sandboxed: bool

    @property
    def runnable(self) -> str | list[str]:
        return list(self.argv) if self.argv is not None else self.command


async def run_plan(
    services: Services,
    plan: CommandPlan,
    *,
    cwd: str | None,
    timeout_s: float | None,
    keep_bytes: int,
    on_output: Callable[[bytes], Awaitable[None]] | None = None,
) -> CommandResult:
    """Run ``plan`` in its own process group (R48): sandboxed commands through the
    sandbox with their own, shorter timeout; raises `SandboxError` when a sandboxed
    command could not be made safe (it then did not run)."""
    tools = services.config.tools
    if plan.sandboxed:
        assert plan.argv is not None
        limit = tools.readonly_timeout_s
        return await services.sandbox.run(
            plan.argv,
            cwd=cwd,
            timeout_s=limit if timeout_s is None else min(timeout_s, limit),
            kill_grace_s=tools.kill_grace_s,
            keep_bytes=keep_bytes,
            on_output=on_output,
        )
    return await run_in_group(
        plan.runnable,
        cwd=cwd,
        env=command_environment(services.config),
        timeout_s=timeout_s,
        kill_grace_s=tools.kill_grace_s,
        keep_bytes=keep_bytes,
        on_output=on_output,
    )


async def judge(services: Services, command: str | list[str], cwd: str) -> Verdict:
    """`classify` in the real directory ``cwd`` against the hidden places as they are now
    (real paths, issue 29), off the Trio thread: the hidden-place and restricted-path
    checks resolve paths (file system reads), and a megabyte of words takes a while too.

    A hidden file with a second name somewhere (`Hidden.linked`) lets nothing run
    unasked: the verdict then asks, whatever the command."""
    config, places = services.config.tools, services.sandbox.places
    await places.refresh()

    def judged() -> Verdict:
        hidden = places.snapshot()
        verdict = classify(command, config, cwd=cwd, hidden=hidden.places)
        if verdict.needs_confirm or not hidden.linked:
            return verdict
        reason = f"needs confirmation: {hidden.linked}"
        return attrs.evolve(verdict, needs_confirm=True, reason=reason)

    return await trio.to_thread.run_sync(judged, abandon_on_cancel=True)


def shown_args(args: dict[str, Any], cwd: str) -> dict[str, Any]:
    """The arguments a confirmation shows: the call's own, with ``cwd`` the real
    directory the command runs in (added when the model named none)."""
    return {**args, "cwd": cwd}


def start_failure(plan: CommandPlan, exc: OSError, cwd: str | None = None) -> str:
    """What the model reads when an approved command could not be started: its
    program is not there (or not runnable), or its directory ``cwd`` could not be
    entered (gone since it was resolved, or no permission)."""
    why = exc.strerror or str(exc)
    if cwd is not None and exc.filename == cwd:
        return f"not run: the working directory {cwd!r} could not be entered: {why}"
    program = plan.argv[0] if plan.argv is not None else "/bin/sh"
    return f"not run: the program {program!r} could not be started: {why}"


class RunCommandTool(ServiceTool):
    name = "run_command"
    reach = Reach(unasked=True, in_subagents=True, in_legs=True)  # read-only, sandboxed

    def spec(self) -> ToolSpec:
        return ToolSpec(
            name=self.name,
            description=(
                "Run a command (a shell string or an argv list) and return its exit code "
                "and output. Commands that change anything need the user's confirmation."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "command": {
                        "anyOf": [
                            {"type": "string"},
                            {"type": "array", "items": {"type": "string"}},
                        ]
                    },
                    "cwd": {"type": "string"},
                    "timeout_s": {"type": "number"},
                },
                "required": ["command"],
            },
        )

    async def execute(self, ctx: ToolContext, call: ToolCallRequest) -> ToolOutcome:
        command = _command_arg(call.args)
        cwd = call.args.get("cwd")
        if cwd is not None and not isinstance(cwd, str):
            raise ValueError("argument 'cwd' must be a string")
        tools = self._services.config.tools
        timeout = call.args.get("timeout_s", tools.command_timeout_s)
        if (
            not isinstance(timeout, (int, float))
            or isinstance(timeout, bool)
            or not math.isfinite(timeout)  # NaN passes every comparison (JSON allows it)
            or timeout <= 0
        ):
            raise ValueError("argument 'timeout_s' must be a positive finite number")
        try:
            where = await real_workdir(cwd, ctx.workdir.path)
        except WorkdirError as exc:
            return ToolOutcome(ok=False, output=f"not run: {exc}")
        if is_cd(command):
            return await change_directory(ctx, command, where)
        plan = await self.plan(ctx, call, command, where)
        if isinstance(plan, ToolOutcome):
            return plan
        if not plan.sandboxed:  # read-only in the sandbox: nothing to record
            await ctx.calls.effect()
        try:
            result = await run_watched(
                ctx.emit,
                call.id,
                self.name,
                lambda on_output: run_plan(
                    self._services,
                    plan,
                    cwd=where,
                    timeout_s=min(float(timeout), tools.command_timeout_s),
                    keep_bytes=tools.max_result_bytes,
                    on_output=on_output,
                ),
            )
        except SandboxError as exc:
            return ToolOutcome(ok=False, output="", skipped=f"not run: {exc}")
        except OSError as exc:  # the program (or, raced away, the directory) is not there
            return ToolOutcome(ok=False, output=start_failure(plan, exc, where))
        ok = result.exit_code == 0 and not result.timed_out
        return ToolOutcome(ok=ok, output=format_command_result(result))

    async def plan(
        self,
        ctx: ToolContext,
        call: ToolCallRequest,
        command: str | list[str],
        cwd: str,
        *,
        again: bool = False,
    ) -> CommandPlan | ToolOutcome:
        """How ``command`` may run in the real directory ``cwd`` (see the module
        docstring), or the denial to report. ``again``: the call that asks for it was
        met again (when ``call`` is one command of it, `background_command`)."""
        services = self._services
        verdict = await judge(services, command, cwd)
        approved = CommandPlan(command=command, argv=verdict.argv, sandboxed=False)
        if not verdict.needs_confirm and services.sandbox.status.active:
            return attrs.evolve(approved, sandboxed=True)  # read-only: again too (issue 34)
        subject = CommandSubject(
            command=command, argv=verdict.argv, cwd=cwd, restricted=verdict.restricted
        )
        again = again or ctx.calls.met_again(call) is not None  # may have partly run: ask
        if not again and await self._allowed_unasked(ctx, subject, verdict):
            return approved
        if ctx.subagent_of is not None:
            # R30: a background sub-agent never raises a confirmation; its leg reports
            # the call as still needing approval.
            shown = command if isinstance(command, str) else shlex.join(command)
            return ToolOutcome(ok=False, output="", skipped=subagent_needs_approval(shown))
        try:
            reply = await ctx.ask(
                "tool_confirm",
                tool_name=self.name,
                tool_args=shown_args(call.args, cwd),
                restricted=verdict.restricted,
                offers=_offers(subject, at=services.clock()),
                details=again_details() if again else None,
            )
        except Refused as refused:  # per command: a background call refuses commands one by one
            return ToolOutcome(ok=False, output="", skipped=refused.reason)
        if reply.remember:
            await ctx.rules.add(command_rule(command, cwd, at=services.clock()))
        if reply.allow_turn:
            ctx.allow_turn.add(self.name)
        return approved

    async def _allowed_unasked(
        self, ctx: ToolContext, subject: CommandSubject, verdict: Verdict
    ) -> bool:
        """Whether a person allowed ``subject`` already: ``allow_all``, a remembered
        rule, or "Allow this turn" for a plain program."""
        if ctx.allow_all or await ctx.rules.covering(subject) is not None:
            return True
        if verdict.restricted or self.name not in ctx.allow_turn:
            return False
        return not turn_refusal(verdict.argv, restricted=False)


def _offers(subject: CommandSubject, *, at: float) -> list[AllowedRule]:
    """The rules a confirmation of ``subject`` offers besides the exact command: its
    argv prefix, when it may have one (`agentrio.engine.rules.offered_prefix`)."""
    prefix = offered_prefix(subject.argv, restricted=subject.restricted)
    return [] if prefix is None else [prefix_rule(prefix, subject.cwd, at=at)]


def _command_arg(args: dict[str, Any]) -> str | list[str]:
    command = args.get("command")
    if isinstance(command, str) and command.strip():
        return command
    if isinstance(command, list) and command and all(isinstance(a, str) for a in command):
        return list(command)
    raise ValueError("argument 'command' must be a non-empty string or list of strings")


def format_command_result(result: Any) -> str:
    """``exit N`` (or how it ended) on the first line, then the output."""
    if result.timed_out:
        head = f"timed out after {result.duration_s:.1f} s (process group killed)"
    elif result.exit_code is None:
        head = f"killed by signal {result.signal}"
    else:
        head = f"exit {result.exit_code}"
    return f"{head}\n{result.output}" if result.output else head
