"""What every route and connection of the server shares (`ServerContext`).

A module of its own so that the routes (`agentrio.engine.server.app`), the WebSocket
connections (`agentrio.engine.server.ws`) and the event streams (`agentrio.engine.server.sse`) all
depend on it, and none of them on another: the app mounts the other two.
"""

from __future__ import annotations

import logging

import attrs
import trio

from agentrio.engine.core import Engine
from agentrio.engine.frontends_supervisor import FrontendStatus
from agentrio.engine.server.commands import Commands
from agentrio.engine.server.refusals import RefusalLog

__all__ = ["ServerContext"]


@attrs.define(eq=False, kw_only=True)
class ServerContext:
    """What every route and connection shares.

    ``own_origins`` is filled in once the port is bound (``--port 0`` picks one), so
    the daemon's own ``http://host:port`` passes the Origin check. ``closing`` is set
    at shutdown: WebSocket connections close with 4001 and event streams end, so
    hypercorn's graceful stop does not wait on them. ``shutdown_requested`` is set by
    ``POST /v1/shutdown`` (with ``shutdown_reason``); the daemon's `serve` stops on it
    as on SIGTERM, while a bare `open_server` (tests) leaves it to its caller.
    """

    engine: Engine
    token: str
    version: str
    allowed_origins: tuple[str, ...] = ()
    own_origins: frozenset[str] = frozenset()
    #: ``Host`` values accepted over TCP (`agentrio.engine.server.auth.own_hosts`), filled in
    #: with ``own_origins``; empty accepts any (an app served by hand in a test).
    own_hosts: frozenset[str] = frozenset()
    #: ``[server] allowed_hosts``: more ``Host`` values to accept over TCP.
    allowed_hosts: tuple[str, ...] = ()
    #: Lines an unauthenticated client can cause, rate-limited.
    refusals: RefusalLog = attrs.field(
        factory=lambda: RefusalLog(logging.getLogger("agentrio.server"))
    )
    #: TCP WebSockets that have not authenticated yet (`agentrio.engine.server.ws`).
    unauthenticated: int = 0
    #: Bearer values of open challenge connections (`agentrio.protocol.challenge.http_key`).
    http_keys: set[str] = attrs.field(factory=set)
    closing: trio.Event = attrs.field(factory=trio.Event)
    shutdown_requested: trio.Event = attrs.field(factory=trio.Event)
    shutdown_reason: str = ""
    #: The command layer both transports call.
    commands: Commands = attrs.field(init=False)
    #: Open WebSocket connections and event streams, for statistics.
    connections: int = 0
    streams: int = 0
    #: The chat front-ends the daemon runs, for ``/v1/health`` (set by `serve`).
    frontends: list[FrontendStatus] = attrs.field(factory=list)

    @commands.default
    def _commands(self) -> Commands:
        return Commands(self.engine)
