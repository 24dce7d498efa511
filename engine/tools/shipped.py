"""The tools agentrio ships, in the order the model is offered them.

A new tool goes here (one line) when the engine always has it; tools that come and go
while the engine runs (an MCP server's) are added to and removed from the engine's
`agentrio.engine.tools.registry.Toolbox` instead. Each declares its own `Reach`.
"""

from __future__ import annotations

from agentrio.engine.tools.ask_user import AskUserTool
from agentrio.engine.tools.background_tools import (
    BackgroundCommandTool,
    BackgroundLegs,
    BackgroundSubagentsTool,
)
from agentrio.engine.tools.base import Services
from agentrio.engine.tools.file_edits import EditFileTool, WriteFileTool
from agentrio.engine.tools.history import ChatHistoryTool
from agentrio.engine.tools.read_file import ReadFileTool
from agentrio.engine.tools.registry import Toolbox
from agentrio.engine.tools.run_command import RunCommandTool
from agentrio.engine.tools.secrets import StoreSecretTool
from agentrio.engine.tools.subagents import SubagentsTool

__all__ = ["shipped_toolbox"]


def shipped_toolbox(services: Services, legs: BackgroundLegs) -> Toolbox:
    """The engine's one toolbox, holding every shipped tool; ``subagents`` calls
    through the same toolbox (its children get what their `Reach` allows)."""
    toolbox = Toolbox(
        [
            RunCommandTool(services),
            ReadFileTool(services),
            EditFileTool(services),
            WriteFileTool(services),
            AskUserTool(services),
            StoreSecretTool(services),
            ChatHistoryTool(services),
            BackgroundCommandTool(services, legs),
            BackgroundSubagentsTool(services, legs),
        ]
    )
    toolbox.add(SubagentsTool(services, toolbox))
    return toolbox
