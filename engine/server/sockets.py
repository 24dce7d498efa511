"""Ending the connections a shutdown cannot wait for (R53, R81).

hypercorn writes to a client's socket inside a shielded cancel scope, so a client that
stopped reading (a full TCP window) holds that write, its connection and so the
server's exit for as long as the peer stays: a cancel cannot reach it. What does reach
it is the socket itself: `abort_connections` shuts down (``SHUT_RDWR``) every
established TCP socket of this process whose local port is the daemon's, which wakes
the blocked write with an error; hypercorn then closes the connection as if the peer
had gone. `open_server` calls it only once the graceful period is over, so every client
that reads got its close frame first.

The connections accepted on the daemon's Unix socket (`agentrio.protocol.local`) are found the
same way in ``/proc/net/unix``, where an accepted socket carries its listener's path.

Linux only (``/proc``); elsewhere nothing is found and nothing is aborted.
"""

from __future__ import annotations

import contextlib
import os
import socket
from pathlib import Path
from typing import Final

__all__ = ["abort_connections", "connected_inodes", "unix_inodes"]

#: ``/proc/net/tcp`` state of a listening socket (never aborted).
_LISTEN: Final = "0A"
#: ``/proc/net/unix`` flag of a listening socket (``__SO_ACCEPTCON``).
_ACCEPTING: Final = 0x10000


def connected_inodes(port: int, proc: Path = Path("/proc")) -> set[str]:
    """Socket inodes of TCP connections (IPv4 and IPv6) whose local port is ``port``."""
    inodes: set[str] = set()
    for name in ("tcp", "tcp6"):
        try:
            lines = (proc / "net" / name).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 10:
                continue
            local, state, inode = fields[1], fields[3], fields[9]
            if state != _LISTEN and int(local.rsplit(":", 1)[1], 16) == port:
                inodes.add(inode)
    return inodes


def unix_inodes(path: Path, proc: Path = Path("/proc")) -> set[str]:
    """Socket inodes of connections accepted on the Unix socket ``path`` (bound as it
    is, or through a directory descriptor: ``/proc/self/fd/N/<name>``)."""
    inodes: set[str] = set()
    try:
        lines = (proc / "net" / "unix").read_text().splitlines()[1:]
    except OSError:
        return inodes
    for line in lines:
        fields = line.split()
        if len(fields) < 8:
            continue
        flags, inode, bound = int(fields[3], 16), fields[6], fields[7]
        if flags & _ACCEPTING:
            continue
        if bound == str(path) or (
            bound.startswith("/proc/self/fd/") and bound.endswith("/" + path.name)
        ):
            inodes.add(inode)
    return inodes


def abort_connections(port: int, unix_socket: Path | None = None) -> int:
    """Blocking: shut down every connection accepted on ``port`` (and on
    ``unix_socket``) by this process; returns how many. The descriptors stay open
    (their owners close them)."""
    inodes = connected_inodes(port)
    if unix_socket is not None:
        inodes |= unix_inodes(unix_socket)
    if not inodes:
        return 0
    aborted = 0
    fd_dir = Path("/proc/self/fd")
    with contextlib.suppress(OSError):
        for entry in fd_dir.iterdir():
            try:
                target = os.readlink(entry)
            except OSError:
                continue
            if not (target.startswith("socket:[") and target[8:-1] in inodes):
                continue
            try:
                sock = socket.socket(fileno=os.dup(int(entry.name)))
            except OSError:
                continue
            with sock:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    continue
                aborted += 1
    return aborted
