"""The ``run_command`` tool: confirm unless read-only, then run in its own group.

Confirmation order (R7, R8, R60): read-only commands, commands the user chose
"Always allow" for in this session, tools allowed for this turn, and runs started
with ``allow_all`` go straight through. Everything else asks the registry; when no
listener can take the question the call is **denied** — never run unconfirmed. A
command touching a restricted path asks for the system password unless sudo
credentials are cached; a wrong password denies the call.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Any

import trio

from engine.causes import Cause
from engine.errors import AskFailed
from engine.models.base import ToolCallRequest, ToolSpec
from engine.pending import AskReply, AskRequest
from engine.tools.base import ServiceTool, ToolOutcome
from engine.tools.policy import classify
from engine.tools.process import run_in_group
from protocol import events as ev

if TYPE_CHECKING:
    from engine.pending import Entry
    from engine.runs import TaskRun

__all__ = ["RunCommandTool", "format_command_result"]


class RunCommandTool(ServiceTool):
    name = "run_command"

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

    async def execute(self, run: TaskRun, call: ToolCallRequest) -> ToolOutcome:
        command = _command_arg(call.args)
        cwd = call.args.get("cwd")
        if cwd is not None and not isinstance(cwd, str):
            raise ValueError("argument 'cwd' must be a string")
        tools = self._services.config.tools
        timeout = call.args.get("timeout_s", tools.command_timeout_s)
        if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or timeout <= 0:
            raise ValueError("argument 'timeout_s' must be a positive number")
        denial = await self._confirm(run, call, command, cwd)
        if denial is not None:
            return denial
        result = await run_in_group(
            command,
            cwd=cwd,
            timeout_s=float(timeout),
            kill_grace_s=tools.kill_grace_s,
            keep_bytes=tools.max_result_bytes,
        )
        ok = result.exit_code == 0 and not result.timed_out
        return ToolOutcome(ok=ok, output=format_command_result(result))

    async def _confirm(
        self, run: TaskRun, call: ToolCallRequest, command: str | list[str], cwd: str | None
    ) -> ToolOutcome | None:
        """None when the command may run; otherwise the denial to report."""
        services = self._services
        verdict = classify(command, services.config.tools, cwd=cwd)
        program = _program(command)
        if run.allow_all or self.name in run.allow_turn:
            return None
        if not verdict.needs_confirm and not verdict.restricted:
            return None
        if program in run.session.remembered_commands and not verdict.restricted:
            return None
        if run.subagent_of is not None:
            # R30: a background sub-agent never raises a confirmation; its leg reports
            # the call as still needing approval.
            shown = command if isinstance(command, str) else shlex.join(command)
            return ToolOutcome(
                ok=False,
                output="",
                skipped=(
                    f"needs approval: {shown!r} — background sub-agents never ask for "
                    "confirmation, so it was not run"
                ),
            )
        need_password = verdict.restricted and not await services.verifier.credentials_cached()
        request = AskRequest(
            kind="tool_confirm",
            session_id=run.session_id,
            task_hash=run.task_hash,
            window_hash=run.origin.window_hash,
            tool_name=self.name,
            tool_args=call.args,
            restricted=verdict.restricted,
            need_password=need_password,
        )
        if not services.registry.has_listener(run.session_id, request):
            return ToolOutcome(
                ok=False,
                output="",
                skipped=(
                    "denied: no front-end is listening for confirmations of this session, "
                    "so the command was not run"
                ),
            )

        entry_box: list[Entry] = []

        def announce(entry: Entry) -> None:
            entry_box.append(entry)
            run.emit(
                ev.Confirm,
                confirm_hash=entry.id,
                tool_name=self.name,
                args=call.args,
                restricted=verdict.restricted,
            )

        try:
            reply = await services.registry.ask(request, on_registered=announce)
        except AskFailed as exc:
            return ToolOutcome(ok=False, output="", skipped=f"denied: {exc}")
        return await self._apply_reply(run, reply, need_password, program, entry_box)

    async def _apply_reply(
        self,
        run: TaskRun,
        reply: AskReply,
        need_password: bool,
        program: str,
        entry_box: list[Entry],
    ) -> ToolOutcome | None:
        if reply.action == "cancel_task":
            run.handle.cancel(Cause.USER_CANCELED)
        elif reply.action == "abort_task":
            run.handle.cancel(Cause.USER_ABORTED)
        if reply.action is not None:
            await trio.lowlevel.checkpoint()  # raises Cancelled: the run's exit path decides
        if not reply.approve:
            reason = f": {reply.reason}" if reply.reason else ""
            return ToolOutcome(ok=False, output="", skipped=f"denied by the user{reason}")
        if need_password:
            ok, error = (
                await self._services.verifier.verify(reply.password)
                if reply.password
                else (False, "no password entered")
            )
            if entry_box:
                self._services.registry.report_verify(entry_box[0], ok, error)
            if not ok:
                return ToolOutcome(
                    ok=False, output="", skipped=f"denied: system password check failed ({error})"
                )
        if reply.remember and program:
            run.session.remembered_commands.add(program)
        if reply.allow_turn:
            run.allow_turn.add(self.name)
        return None


def _command_arg(args: dict[str, Any]) -> str | list[str]:
    command = args.get("command")
    if isinstance(command, str) and command.strip():
        return command
    if isinstance(command, list) and command and all(isinstance(a, str) for a in command):
        return list(command)
    raise ValueError("argument 'command' must be a non-empty string or list of strings")


def _program(command: str | list[str]) -> str:
    try:
        argv = shlex.split(command) if isinstance(command, str) else command
    except ValueError:
        return ""
    return argv[0] if argv else ""


def format_command_result(result: Any) -> str:
    """``exit N`` (or how it ended) on the first line, then the output."""
    if result.timed_out:
        head = f"timed out after {result.duration_s:.1f} s (process group killed)"
    elif result.exit_code is None:
        head = f"killed by signal {result.signal}"
    else:
        head = f"exit {result.exit_code}"
    return f"{head}\n{result.output}" if result.output else head
