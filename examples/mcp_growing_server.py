"""An MCP server whose tools change while it runs, written with the official ``mcp``
SDK (docs/mcp.md, "A server's tools change").

It starts with one tool, ``unlock``. Calling it removes ``unlock`` and adds two:
``word``, which says the word it was unlocked with, and ``lock``, which puts things
back as they were. Each change is told to the client with
``notifications/tools/list_changed``; agentrio then lists the server's tools again,
and the next turn's toolbox has the new ones (``mcp__NAME__word``,
``mcp__NAME__lock``) and not the removed one::

    [mcp.grow]
    command = "python3"
    args = ["/path/to/examples/mcp_growing_server.py"]
"""

from __future__ import annotations

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ToolAnnotations

server = MCPServer("grow")
#: The word ``word`` says while unlocked.
_unlocked: list[str] = []


async def unlock(word: str, ctx: Context) -> str:
    """Unlock the tools ``word`` (which says ``word`` back) and ``lock``; this tool
    goes away until ``lock`` is called."""
    _unlocked[:] = [word]
    server.remove_tool("unlock")
    server.add_tool(said, name="word", annotations=ToolAnnotations(read_only_hint=True))
    server.add_tool(lock, annotations=ToolAnnotations(destructive_hint=False))
    await ctx.session.send_tool_list_changed()
    return f"unlocked {word}"


def said() -> str:
    """The word this server was unlocked with."""
    return _unlocked[0]


async def lock(ctx: Context) -> str:
    """Remove ``word`` and ``lock``; ``unlock`` is back."""
    server.remove_tool("word")
    server.remove_tool("lock")
    server.add_tool(unlock, annotations=ToolAnnotations(destructive_hint=False))
    await ctx.session.send_tool_list_changed()
    return "locked"


server.add_tool(unlock, annotations=ToolAnnotations(destructive_hint=False))

if __name__ == "__main__":
    server.run()
