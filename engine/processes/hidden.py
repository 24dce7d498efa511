"""The places no unasked command may read, judged by their real paths (issue 29: 1, 2).

A hidden place is a directory or file the sandbox (`agentrio.engine.processes.sandbox`) covers
with an empty one, and that a command must not name to run unasked
(`agentrio.engine.tools.policy`). Each takes a fresh `Hidden` value for every command (the
judge when it judges, the sandbox when it runs), so a place that appeared or became a
symlink since the last command counts.

**Which places.**

- Every agentrio home the daemon can know of: its own; the default one
  (``~/.config/agentrio``) and ``$AGENTRIO_HOME`` as the daemon found it; and every
  directory holding an agentrio ``token`` next to a ``daemon.lock`` or an
  ``agentrio.db`` that a bounded scan finds (`discovery_roots`: the parents of the
  known homes two levels down, the user's home two levels down, ``/srv``, ``/opt`` and
  ``/var/lib`` two levels down, ``/tmp`` and ``/var/tmp`` four levels down; at most
  `SCAN_BUDGET` directory entries, symlinks not followed, ``.git`` and
  ``node_modules`` not entered). The scan runs at start and again at most every
  `RESCAN_S` seconds, in a worker thread. A working directory under ``/tmp`` (which
  the sandbox binds in) is also scanned before each command, `CWD_SCAN_DEPTH` levels
  down; one too large to scan whole (`CWD_SCAN_BUDGET` entries) runs nothing
  unasked.
- ``[sandbox] hide``: the credential stores (docs/security.md lists them and why).

Each place counts under its given name **and** its real path (every symlink on the
way resolved), because the sandbox binds the file system at real paths.

**Judging a command** (`named_place`): its working directory (relative to the daemon's
when relative, the daemon's when absent) and every word that may name a path are
resolved as the kernel would (`os.path.realpath`, from the working directory's real
path, so ``link/..`` is the link's target's parent) and compared with the places.
Magic links resolve too (``/proc/self/root/…``, ``/proc/<pid>/cwd/…``, ``/dev/fd/…``).

**Hard links** cannot be hidden by path: a second name of the token elsewhere shows
its content. Any regular file in a hidden place that has more than one name
(``st_nlink > 1``) therefore closes the unasked path: every command asks until the
extra name is gone, and the reason names the file (`Hidden.linked`). Checked for each
command: the files directly in the known homes (own, default, ``$AGENTRIO_HOME``) and
every hidden file; with each scan: the known homes and every ``hide`` directory two
levels down (at most `LINK_BUDGET` entries each). Homes found by the scan are hidden
by path only: their links are not checked, so that a planted "home" full of linked
files (anyone can make one in ``/tmp``) cannot stop every daemon's unasked commands.
"""

from __future__ import annotations

import math
import os
import posixpath
import stat
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Final

import attrs
import trio

from agentrio.engine.config import Config

__all__ = [
    "LINK_BUDGET",
    "RESCAN_S",
    "SCAN_BUDGET",
    "Hidden",
    "HiddenPlaces",
    "ScanTooLarge",
    "discover_homes",
    "discovery_roots",
    "is_agentrio_home",
    "known_homes",
    "named_place",
    "place_of",
]

RESCAN_S: Final = 30.0
"""Seconds between two scans for agentrio homes (and for hard links deep in places)."""
SCAN_BUDGET: Final = 50_000
"""Directory entries one scan for homes reads at most."""
CWD_SCAN_DEPTH: Final = 8
"""Levels of a working directory under ``/tmp`` (bound into the sandbox) scanned for
agentrio homes before each command."""
CWD_SCAN_BUDGET: Final = 20_000
"""Directory entries that scan reads at most; a larger tree is refused (`ScanTooLarge`)."""
LINK_BUDGET: Final = 512
"""Directory entries of one hidden directory the periodic hard-link check reads."""
_LINK_DEPTH: Final = 2
_SKIPPED_DIRS: Final = frozenset({".git", "node_modules"})
_TOKEN: Final = "token"
_HOME_MARKS: Final = ("daemon.lock", "agentrio.db")


@attrs.frozen
class Hidden:
    """The hidden places for one command.

    ``places``: absolute, normalised paths (each place's given name and real path);
    ``linked``: ``""``, or why no command may run unasked (a hidden file with another
    name somewhere)."""

    places: tuple[str, ...]
    linked: str = ""


def _components(path: str) -> list[str]:
    return [part for part in path.split("/") if part]


def place_of(path: str, places: Sequence[str]) -> str:
    """The first of ``places`` that ``path`` (absolute) is or lies under, or ``""``."""
    parts = _components(path)
    for place in places:
        mine = _components(place)
        if parts[: len(mine)] == mine:
            return place
    return ""


def _real(path: str, base: str) -> str:
    """``path`` (``~`` expanded, relative to ``base``) with every symlink resolved."""
    if path.startswith("~"):
        path = os.path.expanduser(path)
    return os.path.realpath(posixpath.join(base, path))


def named_place(paths: Iterable[str], cwd: str | None, places: Sequence[str]) -> str:
    """The first hidden place that the working directory ``cwd`` or one of ``paths``
    resolves into (by its text or its real path), or ``""``.

    Blocking (``lstat`` and ``readlink`` per component): a worker thread for many paths."""
    if not places:
        return ""
    try:
        here = os.getcwd()
    except OSError:
        # No way to resolve a relative path: fail closed (the command asks).
        return "(the daemon's working directory, which is gone)"
    base = posixpath.join(here, cwd) if cwd is not None else here
    text_base = posixpath.normpath(base)
    real_base = os.path.realpath(base)
    for candidate in (text_base, real_base):
        hit = place_of(candidate, places)
        if hit:
            return hit
    for path in dict.fromkeys(paths):
        if not path or "\x00" in path:
            continue
        for candidate in (
            posixpath.normpath(posixpath.join(text_base, os.path.expanduser(path))),
            _real(path, real_base),
        ):
            hit = place_of(candidate, places)
            if hit:
                return hit
    return ""


def is_agentrio_home(directory: str) -> bool:
    """``directory`` holds an agentrio ``token`` next to a ``daemon.lock`` or an
    ``agentrio.db`` (regular files, not symlinks)."""

    def regular(name: str) -> bool:
        try:
            return stat.S_ISREG(os.lstat(posixpath.join(directory, name)).st_mode)
        except OSError:
            return False

    return regular(_TOKEN) and any(regular(mark) for mark in _HOME_MARKS)


def discovery_roots(known_homes: Sequence[str]) -> list[tuple[str, int]]:
    """Where the periodic scan looks for agentrio homes, and how many levels down."""
    roots = [(posixpath.dirname(home), 2) for home in known_homes]
    roots.append((str(Path.home()), 2))
    roots += [("/srv", 2), ("/opt", 2), ("/var/lib", 2), ("/tmp", 4), ("/var/tmp", 4)]
    return roots


class ScanTooLarge(Exception):
    """A scan that must be complete (`discover_homes` with ``complete``) ran out of
    its budget."""


def discover_homes(
    roots: Sequence[tuple[str, int]], budget: int = SCAN_BUDGET, *, complete: bool = False
) -> list[str]:
    """Real paths of the agentrio homes (`is_agentrio_home`) at most ``depth`` levels
    under each root (the root itself included), reading at most ``budget`` directory
    entries in all -- past it, raises `ScanTooLarge` when ``complete``, else returns
    what it found. Unreadable directories are skipped; symlinks are not followed.

    Blocking: run it in a worker thread."""
    found: dict[str, None] = {}
    left = budget
    seen: set[str] = set()
    for root, depth in roots:
        pending = [(os.path.realpath(root), depth)]
        while pending and left > 0:
            directory, levels = pending.pop()
            if directory in seen:
                continue
            seen.add(directory)
            try:
                with os.scandir(directory) as entries:
                    names = []
                    for entry in entries:
                        left -= 1
                        if left <= 0:
                            break
                        names.append(entry.name)
                        if (
                            levels > 0
                            and entry.name not in _SKIPPED_DIRS
                            and entry.is_dir(follow_symlinks=False)
                        ):
                            pending.append((entry.path, levels - 1))
            except OSError:
                continue
            if _TOKEN in names and any(mark in names for mark in _HOME_MARKS):
                if is_agentrio_home(directory):
                    found[directory] = None
        if left <= 0 and complete:
            raise ScanTooLarge(f"{root} holds more than {budget} entries")
    return list(found)


def _linked_in(directory: str, depth: int, budget: int) -> str:
    """A regular file at most ``depth`` levels under ``directory`` with more than one
    name, described, or ``""`` (reading at most ``budget`` entries)."""
    pending = [(directory, depth)]
    left = budget
    while pending and left > 0:
        current, levels = pending.pop()
        try:
            with os.scandir(current) as entries:
                for entry in entries:
                    left -= 1
                    if left <= 0:
                        break
                    try:
                        info = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    if stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
                        return _linked_reason(entry.path, info.st_nlink)
                    if levels > 0 and stat.S_ISDIR(info.st_mode):
                        pending.append((entry.path, levels - 1))
        except OSError:
            continue
    return ""


def _linked_reason(path: str, names: int) -> str:
    return (
        f"{path} (a hidden file) has {names} names: a hard link elsewhere would show it, "
        "so no command runs unasked until the other name is removed"
    )


def _expand(path: str) -> str:
    return posixpath.normpath(os.path.abspath(os.path.expanduser(path)))


def known_homes(config: Config) -> list[str]:
    """The agentrio homes the daemon knows by name: its own, ``$AGENTRIO_HOME`` and the
    default ``~/.config/agentrio`` (absolute, not resolved)."""
    names = [str(config.home_path), str(Path.home() / ".config" / "agentrio")]
    env = os.environ.get("AGENTRIO_HOME")
    if env:
        names.append(env)
    return list(dict.fromkeys(map(_expand, names)))


class HiddenPlaces:
    """The hidden places of one daemon: the configured ones, and the homes found by
    the periodic scan (see the module docstring)."""

    def __init__(self, config: Config) -> None:
        self._homes = known_homes(config)
        self._hide = list(dict.fromkeys(_expand(place) for place in config.sandbox.hide))
        self._found: tuple[str, ...] = ()
        self._deep_linked = ""
        self._scanned_at = -math.inf
        self._lock = trio.Lock()
        self._guard = threading.Lock()

    def snapshot(self) -> Hidden:
        """The places now, and the per-command hard-link check. A place that does not
        exist is left out (nothing there to read; the next command looks again).
        Blocking: an ``lstat`` per place, a few more for each that exists."""
        with self._guard:
            found, deep_linked = self._found, self._deep_linked
        places: dict[str, None] = {}
        linked = deep_linked
        own: list[str] = []
        for name in (*self._homes, *found, *self._hide):
            try:
                info = os.lstat(name)
            except OSError:
                continue
            real = os.path.realpath(name)
            places[name] = None
            places[real] = None
            if stat.S_ISREG(info.st_mode) and info.st_nlink > 1 and not linked:
                linked = _linked_reason(name, info.st_nlink)
            if name in self._homes:
                own.append(real)
        for home in own:
            if linked:
                break
            linked = _linked_in(home, 0, LINK_BUDGET)
        return Hidden(places=tuple(places), linked=linked)

    def scan(self) -> None:
        """Look for agentrio homes and for hard links deep in hidden directories.
        Blocking: a worker thread."""
        found = tuple(discover_homes(discovery_roots(self._homes)))
        with self._guard:
            self._found = found
        deep = ""
        for place in dict.fromkeys(map(os.path.realpath, [*self._homes, *self._hide])):
            if deep:
                break
            if os.path.isdir(place):
                deep = _linked_in(place, _LINK_DEPTH, LINK_BUDGET)
        with self._guard:
            self._deep_linked = deep
            self._scanned_at = time.monotonic()

    async def refresh(self) -> None:
        """`scan` (in a worker thread) when the last is older than `RESCAN_S` (real
        seconds: a test's mock clock does not age it)."""
        if time.monotonic() - self._scanned_at >= RESCAN_S:
            async with self._lock:
                if time.monotonic() - self._scanned_at >= RESCAN_S:
                    await trio.to_thread.run_sync(self.scan, abandon_on_cancel=False)

    async def current(self) -> Hidden:
        """`snapshot` after `refresh`, in a worker thread."""
        await self.refresh()
        return await trio.to_thread.run_sync(self.snapshot)
