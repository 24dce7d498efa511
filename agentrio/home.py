"""Finding a daemon through its home: ``daemon.json`` names its address (and its Unix
socket, ``<home>/daemon.sock``), ``token`` holds its bearer token. The daemon writes
them (docs/configuration.md); the REPL and scripts read them here. Blocking (small
file reads): call from a worker thread.

A client that finds the daemon through its home talks over the Unix socket whenever
``daemon.json`` names one (`read_socket`), never over TCP: only the daemon of that home
can listen there (`agentrio.protocol.local`), so the token is never sent to a process that took
a freed port (issue 29 finding 3).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from agentrio.errors import DaemonNotFound
from agentrio.protocol.local import SOCKET_FILE, fits, via_directory_fd

__all__ = ["default_home", "read_address", "read_socket", "read_token", "socket_address"]

#: Directory descriptors kept open to reach sockets with long paths (`socket_address`).
_DIRECTORY_FDS: dict[str, int] = {}


def default_home() -> Path:
    """``$AGENTRIO_HOME`` or ``~/.config/agentrio`` (the daemon's own rule)."""
    env = os.environ.get("AGENTRIO_HOME")
    return Path(env).expanduser() if env else Path.home() / ".config" / "agentrio"


def read_address(home: Path) -> tuple[str, int]:
    """``(host, port)`` from ``<home>/daemon.json``. Raises `DaemonNotFound` when no
    daemon serves from that home (absent or malformed: one may be starting)."""
    data = _daemon_json(home)
    try:
        host, port = data["host"], data["port"]
    except KeyError:
        raise DaemonNotFound(
            f"no daemon.json in {home}: start one with `agentrio daemon`"
        ) from None
    if not isinstance(host, str) or not isinstance(port, int) or isinstance(port, bool):
        raise DaemonNotFound(f"{home / 'daemon.json'}: host or port is malformed")
    return host, port


def read_socket(home: Path) -> str | None:
    """The address of the Unix socket ``<home>/daemon.json`` names (`socket_address`),
    or None when it names none (a daemon of a release without one: then TCP with the
    mutual challenge). Raises `DaemonNotFound` like `read_address`."""
    if _daemon_json(home).get("socket") != SOCKET_FILE:
        return None
    return socket_address(home)


def _daemon_json(home: Path) -> dict[str, object]:
    try:
        data = json.loads((home / "daemon.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        data = None
    if not isinstance(data, dict):
        raise DaemonNotFound(f"no daemon.json in {home}: start one with `agentrio daemon`")
    return data


def socket_address(home: Path) -> str:
    """What to connect to for ``<home>/daemon.sock``: the path itself, or -- too long
    for a Unix socket address -- the same file through a descriptor of the home kept
    open for the process (one per home, reopened if the home was replaced)."""
    path = home / SOCKET_FILE
    if fits(path):
        return str(path)
    key = os.path.abspath(home)
    fd = _DIRECTORY_FDS.get(key)
    if fd is not None:
        try:
            same = os.path.samestat(os.fstat(fd), os.stat(key))
        except OSError:
            same = False
        if not same:
            os.close(fd)
            fd = None
    if fd is None:
        try:
            fd = os.open(key, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            raise DaemonNotFound(f"cannot open {home}: no daemon serves from it") from None
        _DIRECTORY_FDS[key] = fd
    return via_directory_fd(fd)


def read_token(home: Path) -> str:
    """The bearer token in ``<home>/token``. Raises `DaemonNotFound` when there is
    none (no daemon has run from that home yet)."""
    try:
        return (home / "token").read_text(encoding="utf-8").strip()
    except OSError:
        raise DaemonNotFound(f"no token in {home}: has a daemon run there?") from None
