"""The daemon's parts as lines: its store, its chat front-ends and its MCP servers, for
``agentrio status`` and (the MCP servers) the REPL's ``/mcp`` (docs/mcp.md)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agentrio.protocol.wording import plural

__all__ = ["frontend_lines", "mcp_lines", "mcp_status_lines", "store_line"]


def mcp_lines(servers: Sequence[Mapping[str, Any]]) -> list[str]:
    """One line per server (``/v1/health``'s ``mcp``, as JSON values):
    ``fs ready (stdio, pid 812), 14 tools``, ``web restarting (http), again in 4 s,
    1 restart: …``; none: one line saying where they are configured."""
    if not servers:
        return ["none configured ([mcp.NAME] in config.toml, docs/mcp.md)"]
    lines: list[str] = []
    for server in servers:
        state = str(server.get("state", "?"))
        where = str(server.get("transport", "?"))
        if server.get("pid"):
            where += f", pid {server['pid']}"
        text = f"{server.get('name')} {state} ({where})"
        if state == "ready":
            text += f", {plural(int(server.get('tools') or 0), 'tool')}"
        if state == "restarting" and server.get("retry_in_s") is not None:
            text += f", again in {float(server['retry_in_s']):g} s"
        restarts = int(server.get("restarts") or 0)
        if restarts:
            text += f", {plural(restarts, 'restart')}"
        if server.get("reason") and state != "ready":
            text += f": {server['reason']}"
        lines.append(text)
    return lines


def mcp_status_lines(servers: Sequence[Mapping[str, Any]]) -> list[str]:
    """`mcp_lines` in ``agentrio status``'s columns (``  mcp       …``)."""
    return [f"  {'' if i else 'mcp':<10}{line}" for i, line in enumerate(mcp_lines(servers))]


def store_line(store: dict[str, Any] | None) -> str:
    if not store:
        return "unknown"
    backend = str(store.get("backend", "?"))
    if store.get("ok"):
        return f"{backend}, answering"
    return f"{backend}, NOT answering: {store.get('detail') or 'no reason given'}"


def frontend_lines(frontends: list[dict[str, Any]]) -> list[str]:
    """One ``bots`` line per chat front-end the daemon runs (none: one line saying so)."""
    if not frontends:
        return ["  bots      none enabled"]
    lines: list[str] = []
    for bot in frontends:
        state = str(bot.get("state", "?"))
        if state == "running" and bot.get("pid"):
            state = f"running (pid {bot['pid']})"
        elif state == "stopped":
            state = "stopped: cannot start as configured (fix it, then restart the daemon)"
        restarts = int(bot.get("restarts") or 0)
        text = f"{bot.get('name')} {state}"
        if restarts:
            text += f", {plural(restarts, 'restart')}"
        if bot.get("last_error"):
            text += f"; last error: {bot['last_error']}"
        lines.append(f"  {'bots' if not lines else '':<10}{text}")
    return lines
