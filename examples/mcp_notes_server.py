"""A small MCP server for agentrio, written with the official ``mcp`` SDK (docs/mcp.md,
"Writing an MCP server for agentrio").

It keeps notes in one directory and shows the three things agentrio does with a server:
a read-only tool (its ``readOnlyHint`` only changes the confirmation's wording: every
call still asks unless a rule allows it), a tool that reports progress (shown as
``tool_progress`` lines), and a tool that asks the person through elicitation (asked
inline in a REPL window, parked for chat sessions). Run it from config.toml::

    [mcp.notes]
    command = "python3"
    args = ["/path/to/examples/mcp_notes_server.py", "/home/me/notes"]

Try it by hand with ``python3 examples/mcp_notes_server.py --self-check DIR``: it
connects to itself over stdio with the SDK's client and prints what it lists.
"""

from __future__ import annotations

import sys
from pathlib import Path

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ToolAnnotations
from pydantic import BaseModel

server = MCPServer("notes")
NOTES = Path(sys.argv[-1] if len(sys.argv) > 1 else ".").resolve()


def _note(name: str) -> Path:
    """A note's file: a plain name in the notes directory, never a path out of it."""
    if not name or "/" in name or name.startswith("."):
        raise ValueError(f"not a note name: {name!r}")
    return NOTES / f"{name}.txt"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def list_notes() -> str:
    """The names of the notes, one a line."""
    return "\n".join(sorted(p.stem for p in NOTES.glob("*.txt"))) or "(no notes)"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def read_note(name: str) -> str:
    """The text of the note ``name``."""
    return _note(name).read_text(encoding="utf-8")


@server.tool(annotations=ToolAnnotations(destructive_hint=False))
async def write_notes(names: list[str], text: str, ctx: Context) -> str:
    """Write ``text`` to each note of ``names``, reporting progress as it goes."""
    for done, name in enumerate(names, start=1):
        _note(name).write_text(text, encoding="utf-8")
        await ctx.report_progress(done, len(names), f"wrote {name}")
    return f"wrote {len(names)} note(s)"


class Title(BaseModel):
    title: str


@server.tool(annotations=ToolAnnotations(destructive_hint=False))
async def new_note(text: str, ctx: Context) -> str:
    """Save ``text`` as a new note; the person is asked for its title."""
    answer = await ctx.elicit("What should the note be called?", Title)
    if answer.action != "accept":
        return f"no note saved (the person chose {answer.action})"
    _note(answer.data.title).write_text(text, encoding="utf-8")
    return f"saved {answer.data.title}"


async def _self_check(directory: str) -> None:
    from mcp import ClientSession, StdioServerParameters, stdio_client

    params = StdioServerParameters(command=sys.executable, args=[__file__, directory])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        tools = await session.list_tools()
        print("tools:", ", ".join(sorted(tool.name for tool in tools.tools)))
        result = await session.call_tool("list_notes", {})
        print("list_notes:", result.content[0].text)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--self-check":
        import anyio

        anyio.run(_self_check, sys.argv[2])
    else:
        server.run()
