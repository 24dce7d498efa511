"""One MCP server's state as `agentrio.engine.mcp.servers` keeps it and its tools read it
(the states are described there), and the one line a failure is said in."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, Literal

import attrs
import trio

from agentrio.engine.mcp.config import McpServerConfig
from agentrio.protocol.http import McpServerInfo

if TYPE_CHECKING:
    from mcp import ClientSession

__all__ = ["REASON_CHARS", "ServerState", "State", "describe"]

#: The longest reason kept.
REASON_CHARS: Final = 300

State = Literal["starting", "ready", "failed", "restarting"]


@attrs.define(eq=False)
class ServerState:
    """One server's state (the module docstring) and, while ready, its session."""

    name: str
    config: McpServerConfig
    state: State = "starting"
    reason: str = ""
    pid: int | None = None
    restarts: int = 0
    #: When (trio time) a ``restarting`` server starts again.
    retry_at: float | None = None
    tools: list[str] = attrs.field(factory=list)
    session: ClientSession | None = None
    #: Set when a ready server's connection ends (its process exited).
    gone: trio.Event = attrs.field(factory=trio.Event)
    #: Set when the server said its tools changed (``notifications/tools/list_changed``).
    tools_changed: trio.Event = attrs.field(factory=trio.Event)

    def info(self) -> McpServerInfo:
        retry = None if self.retry_at is None else max(0.0, self.retry_at - trio.current_time())
        return McpServerInfo(
            name=self.name,
            transport="http" if self.config.url else "stdio",
            state=self.state,
            reason=self.reason,
            pid=self.pid,
            tools=len(self.tools),
            restarts=self.restarts,
            retry_in_s=None if retry is None else round(retry, 1),
        )


def describe(exc: BaseException) -> str:
    """One line for a server's failure: the program missing, a timeout, a protocol
    error, an HTTP status; exception groups say their first leaf."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, FileNotFoundError):
        return f"cannot start: {exc.filename or exc}: no such program"
    if isinstance(exc, PermissionError):
        return f"cannot start: {exc.filename or exc}: permission denied"
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
