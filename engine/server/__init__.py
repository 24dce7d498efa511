"""The daemon's server: HTTP routes and the ``/v1/ws`` endpoint on one port (SPEC §7, §8).

`open_server` serves an engine (tests use it in-process); `run_daemon` is the whole
daemon behind ``agentrio daemon``. `Commands` is the one command layer both transports
call, so HTTP and WebSocket answer the same request alike.
"""

from __future__ import annotations

from agentrio.engine.server.app import ServerContext as ServerContext
from agentrio.engine.server.app import create_app as create_app
from agentrio.engine.server.commands import Commands as Commands
from agentrio.engine.server.lifecycle import RunningServer as RunningServer
from agentrio.engine.server.lifecycle import open_server as open_server
from agentrio.engine.server.lifecycle import run_daemon as run_daemon
from agentrio.engine.server.lifecycle import serve as serve

__all__ = [
    "Commands",
    "RunningServer",
    "ServerContext",
    "create_app",
    "open_server",
    "run_daemon",
    "serve",
]
