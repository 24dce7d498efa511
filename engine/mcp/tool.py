"""An MCP server's tool as an agentrio tool: ``mcp__NAME__TOOL`` (docs/mcp.md).

- **Every call asks** through `ToolContext.ask`, the confirmation showing the server,
  the server's own name of the tool and every argument (``arguments.<name>``, each as
  `agentrio.protocol.faithful` renders it) -- unless the home's "Always allow" rule
  for this tool covers it (kind ``mcp_tool``, `agentrio.engine.rules`), which the
  confirmation offers as a choice of its own. The server's annotations
  (``readOnlyHint``, ``destructiveHint``) only add a ``hint`` line to what is shown:
  a server's word about itself never grants anything. It never runs unasked, so it
  reaches neither background legs (R30) nor runs without a listener.
- **The call is the task's**: it runs inside the task's scope, so a cancel, pause or
  abort of the task cancels the MCP request, and the server's ``notifications/
  cancelled`` carries the task's cause (`agentrio.engine.mcp.transport`). A server
  that dies mid-call, or answers with an error, is the tool's error result; progress
  notifications become ``tool_progress`` events; content parts become the text the
  model reads (clamped like command output) and typed `McpResult` details.
- **Elicitation** (a server asking the person for input while a call runs) goes to
  the call it belongs to (`McpCalls`) and is asked like ``ask_user``
  (`agentrio.engine.mcp.elicit`); in the 2026-07-28 protocol the call's own result
  asks (``input_required``) and the call is retried with the answers
  (`agentrio.engine.mcp.rounds`).
"""

from __future__ import annotations

import json
from typing import Any, Final

import attrs
import trio

from agentrio.engine.mcp.elicit import Elicitation, McpCalls
from agentrio.engine.mcp.rounds import call_with_input
from agentrio.engine.mcp.state import ServerState, describe
from agentrio.engine.models.base import ToolCallRequest, ToolSpec
from agentrio.engine.rules.kinds import McpToolSubject, mcp_tool_rule
from agentrio.engine.snapshot import clamp
from agentrio.engine.tools.base import Reach, ToolContext, ToolOutcome
from agentrio.engine.tools.in_flight import again_details
from agentrio.protocol import events as ev
from agentrio.protocol.events import McpPart, McpResult, ToolDetails

__all__ = ["McpCalls", "McpTool", "confirm_args"]

#: The hint line a confirmation shows for a server's annotations (never a grant).
HINTS: Final = {
    "read_only": "the server calls this tool read-only (not verified)",
    "destructive": "the server says this tool may destroy data",
    "additive": "the server says this tool changes things but destroys nothing",
}


def confirm_args(server: str, tool: Any, arguments: dict[str, Any]) -> dict[str, Any]:
    """What a confirmation of a call shows, in order: ``server``, ``tool`` (the
    server's own name), a ``hint`` from its annotations when it has any, and each
    argument as ``arguments.<name>``. Every argument is there; nothing is merged."""
    shown: dict[str, Any] = {"server": server, "tool": tool.name}
    hint = _hint(tool)
    if hint:
        shown["hint"] = hint
    for name, value in arguments.items():
        shown[f"arguments.{name}"] = value
    return shown


def _hint(tool: Any) -> str:
    notes = tool.annotations
    if notes is None:
        return ""
    if notes.read_only_hint:
        return HINTS["read_only"]
    if notes.destructive_hint is False:
        return HINTS["additive"]
    if notes.destructive_hint:
        return HINTS["destructive"]
    return ""


_REACH: Final = Reach(unasked=False, in_subagents=True, in_legs=False)


@attrs.define(eq=False)
class McpTool:
    """One tool of a ready server (module docstring)."""

    name: str
    server: ServerState
    #: The server's `mcp_types.Tool` (name, description, schema, annotations).
    tool: Any
    calls: McpCalls
    #: Every call asks, so never in legs (R30); in-process sub-agents ask the parent's window.
    reach = _REACH

    def spec(self) -> ToolSpec:
        description = self.tool.description or self.tool.title or self.tool.name
        return ToolSpec(
            name=self.name,
            description=f"[MCP server {self.server.name}] {description}",
            parameters=dict(self.tool.input_schema or {"type": "object"}),
        )

    def available(self, ctx: ToolContext) -> bool:
        return self.server.state == "ready"

    async def execute(self, ctx: ToolContext, call: ToolCallRequest) -> ToolOutcome:
        server = self.server
        subject = McpToolSubject(tool=self.name, cwd=f"mcp:{server.name}")
        again = ctx.calls.met_again(call) is not None  # issue 34: no rule lets it through
        if again or await ctx.rules.covering(subject) is None:
            await ctx.ask(
                "tool_confirm",
                tool_name=self.name,
                tool_args=confirm_args(server.name, self.tool, call.args),
                offers=[mcp_tool_rule(subject, at=0.0)],
                details=again_details() if again else None,
            )
        session = server.session
        if server.state != "ready" or session is None:
            return ToolOutcome(ok=False, output=f"MCP server {server.name} is not ready")
        await ctx.calls.effect()
        elicitation = Elicitation(ctx=ctx, server=server.name, tool=self.tool.name)
        with self.calls.track(server.name, elicitation):
            try:
                result = await self._call(session, ctx, call, elicitation)
            except Exception as exc:  # the server's failure is the call's result
                return self._failure(exc)
        if elicitation.parked is not None:
            return ToolOutcome(output="", park=elicitation.parked)
        if result is None:
            return ToolOutcome(ok=False, output=f"MCP server {server.name} did not answer")
        return self._outcome(ctx, result)

    async def _call(
        self, session: Any, ctx: ToolContext, call: ToolCallRequest, elicitation: Elicitation
    ) -> Any:
        """``tools/call`` in this task, retried with the person's answers while the
        server asks for input (2026-07-28, `agentrio.engine.mcp.rounds`); None when
        an elicitation parked the task (the request was cancelled, or not retried)."""

        async def progress(done: float, total: float | None, message: str | None) -> None:
            ctx.emit(
                ev.ToolProgress,
                call_id=call.id,
                tool_name=self.name,
                progress=float(done),
                total=float(total or 0),
                message=message or "",
            )

        timeout = self.server.config.call_timeout_s or None

        async def send(responses: Any, state: str | None) -> Any:
            return await session.call_tool(
                self.tool.name,
                dict(call.args),
                read_timeout_seconds=timeout,
                progress_callback=progress,
                input_responses=responses,
                request_state=state,
                allow_input_required=True,
            )

        with trio.CancelScope() as scope:  # cancelled only when an elicitation parks
            elicitation.scope = scope
            return await call_with_input(send, elicitation, self.calls.kept)
        return None

    def _failure(self, exc: Exception) -> ToolOutcome:
        from mcp import MCPError
        from mcp_types import CONNECTION_CLOSED

        name = self.server.name
        while isinstance(exc, ExceptionGroup) and len(exc.exceptions) == 1:
            exc = exc.exceptions[0]  # the call's nursery wraps what the call raised
        if isinstance(exc, MCPError) and exc.error.code == CONNECTION_CLOSED:
            self.server.gone.set()
            return ToolOutcome(ok=False, output=f"MCP server {name} went away during the call")
        if isinstance(exc, MCPError):
            return ToolOutcome(ok=False, output=f"MCP server {name} refused the call: {exc}")
        return ToolOutcome(ok=False, output=f"MCP server {name} failed: {describe(exc)}")

    def _outcome(self, ctx: ToolContext, result: Any) -> ToolOutcome:
        parts = [_part(block) for block in result.content]
        text = "\n".join(_text_of(part) for part in parts)
        if not parts and result.structured_content is not None:
            text = json.dumps(result.structured_content, ensure_ascii=False)
        limit = ctx.services.config.tools.max_result_bytes
        shown = [_clamped(part, limit) for part in parts]
        details = McpResult(
            server=self.server.name, tool=self.tool.name, is_error=result.is_error, parts=shown
        )
        return ToolOutcome(
            ok=not result.is_error, output=clamp(text, limit), details=ToolDetails(mcp=details)
        )


def _clamped(part: McpPart, limit: int) -> McpPart:
    """``part`` with its text clamped like command output (the same part when it fits)."""
    text = clamp(part.text, limit)
    return part if text is part.text else attrs.evolve(part, text=text)


def _part(block: Any) -> McpPart:
    """One content block as a typed part: text kept, binary data only measured."""
    kind = str(getattr(block, "type", "unknown"))
    if kind == "text":
        return McpPart(type="text", text=block.text)
    if kind in ("image", "audio"):
        return McpPart(type=kind, mime_type=block.mime_type, size=len(block.data) * 3 // 4)
    if kind == "resource_link":
        return McpPart(type=kind, uri=str(block.uri), mime_type=block.mime_type or "")
    if kind == "resource":
        resource = block.resource
        text = getattr(resource, "text", "") or ""
        return McpPart(type=kind, uri=str(resource.uri), text=text)
    return McpPart(type=kind)


def _text_of(part: McpPart) -> str:
    """How the model reads a part: text as it is, the others by a bracketed note."""
    if part.type == "text":
        return part.text
    if part.type in ("image", "audio"):
        return f"[{part.type} {part.mime_type}, {part.size} bytes]"
    if part.type == "resource" and part.text:
        return f"[resource {part.uri}]\n{part.text}"
    if part.uri:
        return f"[{part.type} {part.uri}]"
    return f"[{part.type}]"
