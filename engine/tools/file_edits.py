"""The ``write_file`` and ``edit_file`` tools: a change a person sees as a diff and
approves, applied exactly as shown (issue 32 section 2).

**The edit form: exact-string replacement** (the habit of Claude Code's Edit), not a
patch: ``edit_file {path, old_string, new_string, replace_all?}`` replaces
``old_string``, which must occur **exactly once** in the file (every occurrence with
``replace_all``); none, or several without ``replace_all``, is an error the model
reads, and nothing is asked. A model reproduces a snippet it has just read more
reliably than it counts lines for a hunk header, and a string that must match once
cannot land in the wrong place; the person still sees the result as a unified diff.
``write_file {path, content}`` writes a whole file, new or not. Both work on UTF-8
text as it is: nothing is normalised (line endings, a final newline, invisible
characters all stay, and the diff shows them).

**How a call goes.** The path is resolved against the working directory and judged by
its real path (`agentrio.engine.tools.file_reach`): a refused path is an error the model
reads, never a confirmation. The file is read (at most `MAX_FILE_BYTES`), the new text
computed, and the diff of the two (`agentrio.engine.tools.file_diff`) goes to the person
as the confirmation's typed details (``details.change``, `FileChange`); the arguments
show the real path. **Every write asks**, even in a session started with every
confirmation given (``allow_all``) and whatever "Allow this turn" allowed -- except
when the person chose "Always allow edits under <directory>" for the file's real
directory (an ``edits`` rule of the home, `agentrio.engine.rules`, kept across
restarts, listed by ``/allowed`` and forgotten there). A
background sub-agent never asks, so it has no write tools. After an approval the change
is applied by `agentrio.engine.tools.file_apply`, which refuses -- "read it again" --
when the file is no longer what the diff was computed from. A diff too large to show
(`MAX_DIFF_BYTES` as JSON: a confirmation travels in one protocol message) is refused
before anything is asked.
"""

from __future__ import annotations

import json
import os
import posixpath
from collections.abc import Callable
from typing import Final

import attrs
import trio

from agentrio.engine.models.base import ToolCallRequest, ToolSpec
from agentrio.engine.processes.hidden import Hidden
from agentrio.engine.rules import EditSubject, edits_rule
from agentrio.engine.tools.base import (
    Reach,
    ServiceTool,
    ToolContext,
    ToolOutcome,
    string_arg,
)
from agentrio.engine.tools.file_apply import CurrentFile, Proposal, apply, current_umask
from agentrio.engine.tools.file_diff import unified_diff
from agentrio.engine.tools.file_reach import (
    FileRefused,
    Target,
    open_regular,
    resolve_target,
    write_refusal,
)
from agentrio.engine.tools.in_flight import again_details
from agentrio.engine.tools.workdir import WorkdirError, real_workdir
from agentrio.protocol.events import FileChange, ToolDetails

__all__ = ["MAX_DIFF_BYTES", "MAX_FILE_BYTES", "EditFileTool", "WriteFileTool"]

#: The largest file the write tools read or write.
MAX_FILE_BYTES: Final = 16 * 1024 * 1024
#: The largest diff a confirmation carries, as JSON (a protocol message is 1 MiB).
MAX_DIFF_BYTES: Final = 512 * 1024

#: Computes the new text from the current one (None: no file); raises `ValueError`
#: with a message for the model when the change cannot be made.
NewText = Callable[[str | None], str]


@attrs.frozen
class _Planned:
    """A change ready to show: what to apply and what the person sees."""

    proposal: Proposal
    change: FileChange


def _read_current(target: Target) -> CurrentFile | None:
    """The file at ``target`` (None: there is none, in an existing directory).
    Raises `FileRefused` or `ValueError` (for the model)."""
    if not os.path.lexists(target.real):
        if not os.path.isdir(posixpath.dirname(target.real)):
            raise ValueError(f"the directory {posixpath.dirname(target.real)} does not exist")
        return None
    try:
        fd = open_regular(target.real)
    except OSError as exc:
        raise ValueError(f"cannot read {target.real}: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if info.st_size > MAX_FILE_BYTES:
            raise ValueError(f"{target.real} is larger than {MAX_FILE_BYTES} bytes")
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return CurrentFile(data=b"".join(chunks), mode=info.st_mode & 0o7777)
    finally:
        os.close(fd)


def _plan(
    path: str, base: str, hidden: Hidden, restricted: list[str], new_text: NewText
) -> _Planned:
    """Judge, read and diff (blocking). Raises `FileRefused` for a refused path and
    `ValueError` for a change that cannot be made; both messages are for the model."""
    target = resolve_target(path, base)
    refusal = write_refusal(target, hidden, restricted)
    if refusal:
        raise FileRefused(refusal)
    current = _read_current(target)
    try:
        old = None if current is None else current.data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{target.real} is not UTF-8 text; change it with a command") from None
    text = new_text(old)
    new = text.encode("utf-8")
    if len(new) > MAX_FILE_BYTES:
        raise ValueError(f"the new content is larger than {MAX_FILE_BYTES} bytes")
    if old is not None and old == text:
        raise ValueError(f"{target.real} already holds exactly this text: nothing to change")
    diff = unified_diff(old or "", text)
    if len(json.dumps(diff.text)) > MAX_DIFF_BYTES:
        raise ValueError(
            f"the change to {target.real} is too large to show for approval (its diff is "
            f"over {MAX_DIFF_BYTES} bytes): make it in smaller edits"
        )
    mode = current.mode if current is not None else 0o666 & ~current_umask()
    proposal = Proposal(
        text=target.text,
        real=target.real,
        old_digest=None if current is None else current.digest,
        mode=mode,
        new=new,
    )
    change = FileChange(
        path=target.real,
        diff=diff.text,
        added=diff.added,
        removed=diff.removed,
        created=current is None,
        rule_dir=posixpath.dirname(target.real),
    )
    return _Planned(proposal=proposal, change=change)


class _FileWriteTool(ServiceTool):
    """What ``write_file`` and ``edit_file`` share: plan, ask, apply."""

    reach = Reach(unasked=False, in_subagents=True, in_legs=False)  # every write asks

    async def change(
        self, ctx: ToolContext, call: ToolCallRequest, path: str, new_text: NewText
    ) -> ToolOutcome:
        try:
            base = await real_workdir(None, ctx.workdir.path)
        except WorkdirError as exc:
            return ToolOutcome(ok=False, output=f"not written: {exc}")
        services = self._services
        hidden = await services.sandbox.places.current()
        restricted = list(services.config.tools.restricted_paths)
        try:
            planned = await trio.to_thread.run_sync(
                _plan, path, base, hidden, restricted, new_text, abandon_on_cancel=True
            )
        except FileRefused as exc:
            return ToolOutcome(ok=False, output="", skipped=str(exc))
        change = planned.change
        subject = EditSubject(path=change.path, cwd=change.rule_dir)
        again = ctx.calls.met_again(call) is not None  # issue 34: no rule lets it through
        if again or await ctx.rules.covering(subject) is None:
            # The reply's remember/allow_turn mean nothing here: only the offered
            # edits rule is remembered (the front-ends offer no other choice).
            details = ToolDetails(change=change)
            await ctx.ask(
                "tool_confirm",
                tool_name=self.name,
                tool_args={"path": change.path},
                details=again_details(details) if again else details,
                offers=[edits_rule(change.rule_dir, at=services.clock())],
            )
        await ctx.calls.effect()
        why = await trio.to_thread.run_sync(apply, planned.proposal)
        if why:
            return ToolOutcome(
                ok=False,
                output=f"not written: {why}. Nothing was changed; read the file again "
                "and make the change anew.",
            )
        shown = attrs.evolve(change, rule_dir="")
        done = "created" if change.created else "changed"
        return ToolOutcome(
            output=f"{done} {change.path} (+{change.added} -{change.removed} lines)",
            details=ToolDetails(change=shown),
        )


class WriteFileTool(_FileWriteTool):
    name = "write_file"

    def spec(self) -> ToolSpec:
        return ToolSpec(
            name=self.name,
            description=(
                "Write a whole UTF-8 text file (created when absent; the directory must "
                "exist). The user sees the diff and approves it. Prefer edit_file to "
                "change part of an existing file."
            ),
            parameters={
                "type": "object",
                "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
                "required": ["path", "content"],
            },
        )

    async def execute(self, ctx: ToolContext, call: ToolCallRequest) -> ToolOutcome:
        path, content = string_arg(call, "path"), string_arg(call, "content")
        return await self.change(ctx, call, path, lambda old: content)


class EditFileTool(_FileWriteTool):
    name = "edit_file"

    def spec(self) -> ToolSpec:
        return ToolSpec(
            name=self.name,
            description=(
                "Replace old_string with new_string in an existing UTF-8 text file. "
                "old_string must match the file exactly (whitespace and line endings "
                "included) and exactly once, unless replace_all is true. Read the file "
                "first. The user sees the diff and approves it."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "old_string": {"type": "string"},
                    "new_string": {"type": "string"},
                    "replace_all": {"type": "boolean"},
                },
                "required": ["path", "old_string", "new_string"],
            },
        )

    async def execute(self, ctx: ToolContext, call: ToolCallRequest) -> ToolOutcome:
        path = string_arg(call, "path")
        old_string, new_string = string_arg(call, "old_string"), string_arg(call, "new_string")
        replace_all = call.args.get("replace_all", False)
        if not isinstance(replace_all, bool):
            raise ValueError("argument 'replace_all' must be true or false")
        if not old_string:
            raise ValueError("argument 'old_string' must not be empty (write_file makes files)")
        if old_string == new_string:
            raise ValueError("old_string and new_string are the same: nothing to change")

        def replaced(old: str | None) -> str:
            if old is None:
                raise ValueError("the file does not exist (write_file makes files)")
            count = old.count(old_string)
            if count == 0:
                raise ValueError("old_string was not found in the file; read it again")
            if count > 1 and not replace_all:
                raise ValueError(
                    f"old_string occurs {count} times; give more surrounding text so it "
                    "matches once, or set replace_all"
                )
            return old.replace(old_string, new_string)

        return await self.change(ctx, call, path, replaced)
