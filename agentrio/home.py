"""Finding a daemon through its home: ``daemon.json`` names its address, ``token`` holds
its bearer token. The daemon writes both (docs/configuration.md); the REPL and
scripts read them here. Blocking (small file reads): call from a worker thread.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from agentrio.errors import DaemonNotFound

__all__ = ["default_home", "read_address", "read_token"]


def default_home() -> Path:
    """``$AGENTRIO_HOME`` or ``~/.config/agentrio`` (the daemon's own rule)."""
    env = os.environ.get("AGENTRIO_HOME")
    return Path(env).expanduser() if env else Path.home() / ".config" / "agentrio"


def read_address(home: Path) -> tuple[str, int]:
    """``(host, port)`` from ``<home>/daemon.json``. Raises `DaemonNotFound` when no
    daemon serves from that home (absent or malformed: one may be starting)."""
    try:
        data = json.loads((home / "daemon.json").read_text(encoding="utf-8"))
        host, port = data["host"], data["port"]
    except (OSError, ValueError, KeyError, TypeError):
        raise DaemonNotFound(
            f"no daemon.json in {home}: start one with `agentrio daemon`"
        ) from None
    if not isinstance(host, str) or not isinstance(port, int) or isinstance(port, bool):
        raise DaemonNotFound(f"{home / 'daemon.json'}: host or port is malformed")
    return host, port


def read_token(home: Path) -> str:
    """The bearer token in ``<home>/token``. Raises `DaemonNotFound` when there is
    none (no daemon has run from that home yet)."""
    try:
        return (home / "token").read_text(encoding="utf-8").strip()
    except OSError:
        raise DaemonNotFound(f"no token in {home}: has a daemon run there?") from None
