"""``[mcp.NAME]`` tables: one MCP server each (docs/mcp.md).

A server is either **stdio** (``command`` and ``args``: a program agentrio starts and
talks to over its stdin/stdout) or **streamable HTTP** (``url``). Neither kind takes a
secret from config.toml: a stdio server gets only the environment variables ``env``
names (besides a minimal ``PATH``/``HOME``/locale set), an HTTP server's headers come
from environment variables (``headers_env``) or stored secrets (``headers_secret``),
never from the file's text (a ``headers`` table is refused, like ``api_key``).
"""

from __future__ import annotations

import re
from typing import Final

import attrs

__all__ = [
    "HEADERS_REFUSED",
    "NAME_PATTERN",
    "PROTOCOLS",
    "McpServerConfig",
    "mcp_problems",
    "refused_mcp_keys",
]

#: What a server's name may be: it becomes part of its tools' names
#: (``mcp__NAME__TOOL``), which models accept only in ``[A-Za-z0-9_-]``.
NAME_PATTERN: Final = re.compile(r"^[A-Za-z0-9-]+(_[A-Za-z0-9-]+)*$")
#: The values of ``protocol``.
PROTOCOLS: Final = ("handshake", "auto")
#: Why a ``headers`` table is refused (a header usually carries a token).
HEADERS_REFUSED: Final = (
    "header values never go in config.toml: name the environment variable holding each "
    "(headers_env) or a stored secret (headers_secret)"
)


@attrs.frozen(kw_only=True)
class McpServerConfig:
    """One ``[mcp.NAME]`` table (docs/configuration.md)."""

    #: The program of a stdio server (looked up on ``PATH``); empty for an HTTP server.
    command: str = ""
    args: list[str] = attrs.field(factory=list)
    #: Names of the daemon's environment variables the server gets (values never
    #: written here); the server gets no other variable but ``PATH``, ``HOME``,
    #: ``LANG``, ``LC_ALL``, ``TMPDIR``, ``USER`` and ``LOGNAME``.
    env: list[str] = attrs.field(factory=list)
    #: The working directory of a stdio server (absolute); empty: the daemon's home.
    cwd: str = ""
    #: The endpoint of a streamable-HTTP server (``http://`` or ``https://``).
    url: str = ""
    #: ``{header = "ENV_VAR"}``: a header whose value is that environment variable's.
    headers_env: dict[str, str] = attrs.field(factory=dict)
    #: ``{header = "secret-name"}``: a header whose value is that stored secret.
    headers_secret: dict[str, str] = attrs.field(factory=dict)
    #: Seconds a start (spawn, handshake, tool listing) may take before it failed.
    start_timeout_s: float = attrs.field(default=30.0, validator=attrs.validators.gt(0))
    #: Restarts after a failed start or a death before the server stays failed.
    max_restarts: int = attrs.field(default=5, validator=attrs.validators.ge(0))
    #: Seconds before the first restart, doubling up to 60.
    restart_backoff_s: float = attrs.field(default=1.0, validator=attrs.validators.ge(0))
    #: Seconds one tool call may take; 0: no limit but the task's.
    call_timeout_s: float = attrs.field(default=0.0, validator=attrs.validators.ge(0))
    #: How the protocol revision is agreed: ``"handshake"``, the ``initialize``
    #: handshake (revisions up to 2025-11-25: a server asks by ``elicitation/create``
    #: and says its tools changed by notification); ``"auto"``, the SDK's own default:
    #: ``server/discover`` first, so a server that speaks 2026-07-28 is spoken to in
    #: it (it asks through ``input_required`` results), the handshake otherwise.
    protocol: str = attrs.field(default="handshake", validator=attrs.validators.in_(PROTOCOLS))

    @property
    def transport(self) -> str:
        return "http" if self.url else "stdio"


def mcp_problems(servers: dict[str, McpServerConfig]) -> list[tuple[str, str, str]]:
    """``(dotted key, problem, the key whose line to show)`` for what the types
    cannot say about the ``[mcp.NAME]`` tables."""
    found: list[tuple[str, str, str]] = []
    for name, server in servers.items():
        where = f"mcp.{name}"
        if not NAME_PATTERN.match(name):
            found.append((where, "a server name is letters, digits, '-' and single '_'", where))
        elif bool(server.command) == bool(server.url):
            found.append(
                (f"{where}.command", "give either command (stdio) or url (streamable HTTP)", where)
            )
        elif server.url and not server.url.startswith(("http://", "https://")):
            found.append((f"{where}.url", f"expected an http(s) URL, got {server.url!r}", where))
        elif server.command and (server.headers_env or server.headers_secret):
            found.append((f"{where}.headers_env", "headers are for url servers only", where))
        elif server.url and (server.args or server.env or server.cwd):
            found.append((f"{where}.args", "args, env and cwd are for command servers", where))
    return found


def refused_mcp_keys(data: dict[str, object]) -> list[tuple[str, str, str]]:
    """``(table, key, why refused)`` for each ``headers`` table of the raw file."""
    tables = data.get("mcp")
    if not isinstance(tables, dict):
        return []
    return [
        (f"mcp.{name}", "headers", HEADERS_REFUSED)
        for name, table in tables.items()
        if isinstance(table, dict) and "headers" in table
    ]
