"""What travels between the REPL's two halves besides wire frames.

The UI side (state, asyncio) hands the Trio side `Outgoing` items: WebSocket frames or
`HttpCall`s. The Trio side hands back `Incoming` items: server frames, connection
changes and `HttpResult`s. Both directions cross only in `agentrio.repl.bridge`.
"""

from __future__ import annotations

from typing import Any, Literal

import attrs

from agentrio.protocol.frames import ClientFrame, ServerFrame

__all__ = [
    "Connected",
    "Disconnected",
    "HttpCall",
    "HttpResult",
    "Incoming",
    "Outgoing",
    "Status",
]


@attrs.frozen(kw_only=True)
class HttpCall:
    """An authenticated request to the daemon's HTTP API (``/history``, ``/pending drop``).

    ``purpose`` and ``ref`` come back unchanged in the `HttpResult`, so the state knows
    what the answer is about without keeping a table of requests.
    """

    method: Literal["GET", "DELETE"]
    path: str
    params: dict[str, str] = attrs.field(factory=dict)
    purpose: str = ""
    ref: str = ""


@attrs.frozen(kw_only=True)
class HttpResult:
    """``status`` 0 with ``error`` set means the request did not reach the daemon."""

    call: HttpCall
    status: int
    body: Any = None
    error: str = ""


@attrs.frozen(kw_only=True)
class Connected:
    """A WebSocket connection is up. ``reconnect`` is true after the first one."""

    url: str
    daemon_version: str
    reconnect: bool = False


@attrs.frozen(kw_only=True)
class Disconnected:
    reason: str


@attrs.frozen(kw_only=True)
class Status:
    """A line about the connection itself (daemon started, its log path, retrying)."""

    text: str
    error: bool = False


Outgoing = ClientFrame | HttpCall
Incoming = ServerFrame | Connected | Disconnected | Status | HttpResult
