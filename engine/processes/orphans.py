"""Processes a killed daemon left behind: find them by an inherited tag, end their groups.

``kill -9`` of the daemon runs no clean-up, and its commands (foreground ``run_command``
processes and background legs) live on: each is the leader of its own session (R48), so
nothing ties it to the daemon any more. R27 says background work does not survive a
restart, so the next daemon on the same home must end them.

How they are found: `mark_children` puts ``AGENTRIO_OWNER=<home>`` into the daemon's
environment at start, so every process it starts (and everything those start, unless
they wipe their environment) carries it from its first instruction. `find_orphans`
reads ``/proc/<pid>/environ`` of every process and returns the process groups of the
tagged ones; `kill_orphans` ends those groups (SIGTERM, then SIGKILL after a grace, like
R48) before the daemon clears the background folders.

Why a tag and not a registry of pids written by the daemon: a registry entry can only
be written *after* the child exists, and a ``kill -9`` in between would leave an
unrecorded process. The tag is in the child's environment before it runs at all, so
there is no such window. A process that both clears its environment and leaves its
group (``setsid env -i …``) escapes; so would it escape a pid registry's group kill.

Safety: only this user's processes with exactly this home's tag are touched, never the
calling process's own group nor those of its ancestors. Only one daemon runs per home
(the instance lock), so a tagged process is always a leftover. Zombies count as gone
(see `agentrio.engine.processes.groups`). Everything here is blocking: call it from a worker
thread.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Final

from agentrio.engine.processes.groups import group_alive

__all__ = ["OWNER_ENV", "find_orphans", "kill_orphans", "mark_children", "owner_tag"]

#: The environment variable every process the daemon starts inherits.
OWNER_ENV: Final = "AGENTRIO_OWNER"
_POLL_S: Final = 0.02


def owner_tag(home: Path) -> str:
    """The tag value of ``home``: its resolved path, so two spellings agree."""
    return str(Path(home).resolve())


def mark_children(home: Path) -> None:
    """Tag every process this process starts from now on as belonging to ``home``.

    Call it once, in the daemon process only (it changes ``os.environ``)."""
    os.environ[OWNER_ENV] = owner_tag(home)


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, ppid, pgrp) of ``pid``, or None when it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    fields = raw[raw.rfind(b")") + 2 :].split()
    if len(fields) < 3:
        return None
    return fields[0].decode("ascii", "replace"), int(fields[1]), int(fields[2])


def _protected_groups() -> set[int]:
    """The process groups of this process and of every ancestor: never signalled."""
    groups = {os.getpgrp()}
    pid = os.getpid()
    seen: set[int] = set()
    while pid > 1 and pid not in seen:
        seen.add(pid)
        stat = _stat(pid)
        if stat is None:
            break
        groups.add(stat[2])
        pid = stat[1]
    return groups


def find_orphans(home: Path) -> set[int]:
    """Process groups holding a running process tagged with ``home``'s tag (Linux;
    elsewhere, without ``/proc``, nothing is found)."""
    entry = f"{OWNER_ENV}={owner_tag(home)}".encode()
    me = os.getpid()
    protected = _protected_groups()
    groups: set[int] = set()
    try:
        names = os.listdir("/proc")
    except OSError:
        return groups
    for name in names:
        if not name.isdigit() or int(name) == me:
            continue
        try:
            environ = Path(f"/proc/{name}/environ").read_bytes()
        except OSError:  # gone, or another user's process
            continue
        if entry not in environ.split(b"\0"):
            continue
        stat = _stat(int(name))
        if stat is None or stat[0] in ("Z", "X") or stat[2] in protected:
            continue
        groups.add(stat[2])
    return groups


def _signal(groups: set[int], signum: int) -> None:
    for pgid in groups:
        try:
            os.killpg(pgid, signum)
        except (ProcessLookupError, PermissionError):
            pass


def _wait_gone(groups: set[int], deadline: float) -> set[int]:
    alive = {pgid for pgid in groups if group_alive(pgid)}
    while alive and time.monotonic() < deadline:
        time.sleep(_POLL_S)
        alive = {pgid for pgid in alive if group_alive(pgid)}
    return alive


def kill_orphans(home: Path, *, grace_s: float = 2.0) -> int:
    """End every process group `find_orphans` finds: SIGTERM (and SIGCONT), then SIGKILL
    after ``grace_s`` for groups still running. Returns how many groups there were.

    Processes tagged while this runs (none should be: it runs before the engine
    starts) are caught by a second scan."""
    groups = find_orphans(home)
    if not groups:
        return 0
    _signal(groups, signal.SIGTERM)
    _signal(groups, signal.SIGCONT)
    alive = _wait_gone(groups, time.monotonic() + grace_s)
    stubborn = alive | find_orphans(home)
    if stubborn:
        _signal(stubborn, signal.SIGKILL)
        _wait_gone(stubborn, time.monotonic() + grace_s)
    return len(groups)
