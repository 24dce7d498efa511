"""An MCP server that asks the person through the 2026-07-28 protocol's
``input_required`` results, written with the official ``mcp`` SDK (docs/mcp.md, "A
server asks the person").

Its one tool, ``file_ticket``, files a ticket as a file in one directory; the
ticket's priority and owner are the person's to say, so the tool asks for them. The
SDK's ``Resolve``/``Elicit`` idiom follows the connection's protocol: on a 2026-07-28
connection the first ``tools/call`` answers with an ``InputRequiredResult`` (the form
in ``inputRequests``, the SDK's signed ``requestState``) and the client calls again
with ``inputResponses``; on an older one it sends ``elicitation/create`` while the
call runs. The ticket records the protocol it was filed over. For agentrio to speak
2026-07-28 to it, say ``protocol = "auto"``::

    [mcp.tickets]
    command = "python3"
    args = ["/path/to/examples/mcp_tickets_server.py", "/home/me/tickets"]
    protocol = "auto"
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Annotated, Literal

from mcp.server.mcpserver import Context, Elicit, MCPServer, Resolve
from mcp_types import ToolAnnotations
from pydantic import BaseModel, Field

server = MCPServer("tickets")
TICKETS = Path(sys.argv[-1] if len(sys.argv) > 1 else ".").resolve()


class Triage(BaseModel):
    """What the person says about a new ticket."""

    priority: Literal["low", "high"] = Field(description="How urgent it is")
    owner: str = Field(description="Who takes it")


def triage(summary: str) -> Elicit[Triage]:
    return Elicit(f"Triage the ticket {summary!r}", Triage)


@server.tool(annotations=ToolAnnotations(destructive_hint=False))
async def file_ticket(
    summary: str, answers: Annotated[Triage, Resolve(triage)], ctx: Context
) -> str:
    """File a ticket; the person is asked for its priority and owner."""
    name = re.sub(r"[^a-z0-9]+", "-", summary.lower()).strip("-") or "ticket"
    path = TICKETS / f"{name}.txt"
    path.write_text(
        f"{summary}\npriority: {answers.priority}\nowner: {answers.owner}\n"
        f"protocol: {ctx.protocol_version}\n",
        encoding="utf-8",
    )
    return f"filed {name} ({answers.priority}, {answers.owner}) over {ctx.protocol_version}"


if __name__ == "__main__":
    server.run()
