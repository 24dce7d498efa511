"""Where a home's daemon listens for local clients: ``<home>/daemon.sock`` (issue 29
finding 3; docs/security.md "Reaching the daemon").

The socket lives in the home, which is 0700 and owned by the daemon's user, so only
that user can connect to it and -- what matters for finding 3 -- nobody else can
create it: a client that reaches ``<home>/daemon.sock`` reaches the daemon of that
home, even after a ``kill -9`` freed its TCP port for anyone.

A Unix socket's path is limited to 107 bytes. A longer one (a deep home) is reached
through the home's directory descriptor: ``/proc/self/fd/<fd>/daemon.sock`` names
the same file (Linux), and both the daemon and the client do that (`socket_address`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

__all__ = ["MAX_UNIX_PATH", "SOCKET_FILE", "fits", "via_directory_fd"]

SOCKET_FILE: Final = "daemon.sock"
#: Longest path ``bind``/``connect`` accept for a Unix socket (``sun_path`` less NUL).
MAX_UNIX_PATH: Final = 107


def fits(path: Path) -> bool:
    """Whether ``path`` can be used as a Unix socket address as it is."""
    return len(str(path).encode()) <= MAX_UNIX_PATH


def via_directory_fd(fd: int, name: str = SOCKET_FILE) -> str:
    """The short address of ``name`` in the directory open as descriptor ``fd``."""
    return f"/proc/self/fd/{fd}/{name}"
