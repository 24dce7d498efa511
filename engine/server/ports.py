"""Which port the daemon serves on when its default one is taken (issue 30).

A daemon the REPL starts (``agentrio daemon --free-port-if-taken``) on the default port
(none given, none configured) that another program holds -- typically another home's
daemon -- listens on a free port instead of failing; it says so once in its log and
records the taken one in ``daemon.json`` (`PORT_FALLBACK_KEY`), which the REPL reads to
say it once too. A port given with ``--port`` or ``[server] port`` is the person's
choice: taken, it fails in one line (`agentrio.engine.server.startup`).
"""

from __future__ import annotations

import errno
import logging
import socket
from typing import Any, Final

import trio

from agentrio.engine.config import DEFAULT_PORT, Config

__all__ = ["PORT_FALLBACK_KEY", "note_fallback", "port_taken", "port_to_serve"]

log = logging.getLogger("agentrio.daemon")

#: The ``daemon.json`` key naming the default port a daemon found taken; the same as
#: ``agentrio.repl.daemon.PORT_FALLBACK_KEY`` (the REPL does not import the engine).
PORT_FALLBACK_KEY: Final = "port_taken"


async def port_to_serve(
    config: Config, host: str, port: int | None, *, free_port_if_taken: bool
) -> tuple[int, int | None]:
    """``(the port to bind, the default port found taken or None)``; 0 binds any free
    port."""
    if port is not None:
        return port, None
    if free_port_if_taken and config.server.port == DEFAULT_PORT:
        if await trio.to_thread.run_sync(port_taken, host, DEFAULT_PORT):
            return 0, DEFAULT_PORT
    return config.server.port, None


def note_fallback(info: dict[str, Any], *, taken: int, host: str) -> None:
    """Record in ``info`` (``daemon.json``) and log, once, that ``taken`` was held."""
    info[PORT_FALLBACK_KEY] = taken
    log.warning(
        "port %d on %s is in use (another home's daemon?): listening on port %d instead "
        "(recorded in daemon.json)",
        taken,
        host,
        info["port"],
    )


def port_taken(host: str, port: int) -> bool:
    """Whether binding ``host:port`` fails because something holds it (blocking). The
    probe binds as hypercorn does (``SO_REUSEADDR``), so a port left in TIME_WAIT by a
    daemon that just stopped is not taken. A bind that fails for another reason is left
    to the real bind, which says why in one line."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError:
        return False
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            return exc.errno == errno.EADDRINUSE
    return False
