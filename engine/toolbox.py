"""The tools a run may call, and the one place a call is executed (tasks and
sub-agents alike)."""

from __future__ import annotations

from collections.abc import Sequence

from agentrio.engine.models.base import ToolCallRequest
from agentrio.engine.tools.base import Tool, ToolContext, ToolOutcome

__all__ = ["Toolbox"]


class Toolbox:
    """The tools a run may call, and the one place a call is executed."""

    def __init__(self, tools: Sequence[Tool]) -> None:
        self._tools = {tool.name: tool for tool in tools}

    def available(self, ctx: ToolContext) -> list[Tool]:
        return [tool for tool in self._tools.values() if tool.available(ctx)]

    async def execute(self, ctx: ToolContext, call: ToolCallRequest) -> ToolOutcome:
        tool = self._tools.get(call.name)
        if tool is None or not tool.available(ctx):
            return ToolOutcome(
                ok=False, output="", skipped=f"tool {call.name!r} is not available in this task"
            )
        if call.args_error:  # malformed arguments: an error result the model can act on
            sent = f"; the arguments sent were: {call.raw_args}" if call.raw_args else ""
            return ToolOutcome(
                ok=False, output=f"invalid call of {call.name}: {call.args_error}{sent}"
            )
        try:
            return await tool.execute(ctx, call)
        except ValueError as exc:  # bad arguments from the model
            return ToolOutcome(ok=False, output=f"invalid call of {call.name}: {exc}")
