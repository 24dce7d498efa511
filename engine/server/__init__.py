"""The daemon's server: HTTP routes and the ``/v1/ws`` endpoint on one port (SPEC §7, §8).

`open_server` serves an engine (tests use it in-process); `run_daemon` is the whole
daemon behind ``agentrio daemon``. `Commands` is the one command layer both transports
call, so HTTP and WebSocket answer the same request alike.
"""

from __future__ import annotations

from engine.server.app import ServerContext as ServerContext
from engine.server.app import create_app as create_app
from engine.server.commands import Commands as Commands
from engine.server.lifecycle import RunningServer as RunningServer
from engine.server.lifecycle import open_server as open_server
from engine.server.lifecycle import run_daemon as run_daemon
from engine.server.lifecycle import serve as serve

__all__ = [
    "Commands",
    "RunningServer",
    "ServerContext",
    "create_app",
    "open_server",
    "run_daemon",
    "serve",
]
