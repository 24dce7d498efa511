"""The one registry of tools: what each declares, and the toolbox every run gets.

Every tool declares a `Reach` (``tool.reach``): whether it may run with nobody asked,
whether an in-process sub-agent (R80) and a background sub-agent's leg (R30) may call
it; its schema is its ``spec()``. The engine keeps one `Toolbox` holding every tool
(`agentrio.engine.tools.shipped.shipped_toolbox`, plus whatever is added while it runs);
which tools a call may use is computed from the call's `ToolContext`:

* a background leg's run (``ctx.subagent_of`` set) gets the tools with ``in_legs``;
* an in-process sub-agent (``ctx.parent_task`` set) gets those with ``in_subagents``;
* a task gets every tool;

and within that, those whose ``available(ctx)`` says yes (e.g. background tools only
for ``cli-`` tasks that run for themselves, R20). The same rule decides what the model
is offered and what may be executed, so a call of a tool not offered is refused.

A leg never asks anyone (R30), so a tool that may not run unasked cannot reach legs:
`Toolbox.add` refuses such a declaration.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from agentrio.engine.models.base import ToolCallRequest
from agentrio.engine.tools.base import Reach, Tool, ToolContext, ToolOutcome, run_tool

__all__ = ["Reach", "Toolbox", "offered_in"]


def offered_in(tool: Tool, ctx: ToolContext) -> bool:
    """Whether ``tool`` may be offered to and called by the run behind ``ctx``."""
    reach = tool.reach
    if ctx.subagent_of is not None and not reach.in_legs:
        return False
    if ctx.parent_task is not None and not reach.in_subagents:
        return False
    return tool.available(ctx)


class Toolbox:
    """Every tool of the engine by name, and the one place a call is executed.

    Tools may be added and removed while the engine runs (an MCP server's tools come
    when it is ready and go when it fails); a run sees the tools present at its turn."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            self.add(tool)

    def add(self, tool: Tool) -> None:
        """Register ``tool``; `ValueError` when its name is taken or its `Reach`
        sends a tool that always asks to legs."""
        if tool.name in self._tools:
            raise ValueError(f"a tool named {tool.name!r} is already registered")
        if tool.reach.in_legs and not tool.reach.unasked:
            raise ValueError(f"tool {tool.name!r} always asks, so it cannot run in legs (R30)")
        self._tools[tool.name] = tool

    def remove(self, name: str) -> Tool | None:
        """Unregister the tool ``name`` (None when there is none); calls already
        running finish."""
        return self._tools.pop(name, None)

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def __iter__(self) -> Iterator[Tool]:
        return iter(list(self._tools.values()))

    def available(self, ctx: ToolContext) -> list[Tool]:
        """The tools the run behind ``ctx`` is offered this turn (`offered_in`)."""
        return [tool for tool in self._tools.values() if offered_in(tool, ctx)]

    async def execute(self, ctx: ToolContext, call: ToolCallRequest) -> ToolOutcome:
        """Run ``call`` when its tool is offered to ``ctx``; else say it is not."""
        tool = self._tools.get(call.name)
        if tool is None or not offered_in(tool, ctx):
            return ToolOutcome(
                ok=False, output="", skipped=f"tool {call.name!r} is not available in this task"
            )
        if call.args_error:  # malformed arguments: an error result the model can act on
            sent = f"; the arguments sent were: {call.raw_args}" if call.raw_args else ""
            return ToolOutcome(
                ok=False, output=f"invalid call of {call.name}: {call.args_error}{sent}"
            )
        return await run_tool(tool, ctx, call)
