"""Refusing a home someone else could have planted (issue 29 finding 8).

A home pre-created by another user -- in a shared parent such as ``/srv/agents`` --
with a token that user knows was adopted as it was, and that user then ran commands
as the daemon's user. So, like ssh with ``~/.ssh``, the daemon starts only when

- the home (when it exists), its ``token`` and its ``config.toml`` are owned by the
  daemon's effective user and not writable by group or others;
- every directory above the home is owned by that user or by root, and is not
  writable by group or others unless it has the sticky bit (``/tmp``): otherwise its
  owner or group could rename the home away and put their own in its place.

"The daemon's user" is the effective uid, root included: a daemon run as root refuses
a home owned by another user (that user's config would run as root). A home the
daemon created is 0700 and its own, so it always passes; a home made by an earlier
release with looser *read* modes passes too and is tightened as before
(`agentrio.engine.store.files.tighten_home`): only writability by others and foreign owners
are refused. Symlinks are followed (the checks are on what they lead to, and on the
directories above that). `UnsafeHome` carries the one start-up line
(`agentrio.engine.server.startup`, exit 2).
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path
from typing import Final

from agentrio.engine.server.startup import STARTUP_EXIT

__all__ = ["UnsafeHome", "check_home", "refuse_unsafe_home"]

#: Files of the home whose owner and mode are checked besides the home itself.
_CHECKED_FILES: Final = ("token", "config.toml")


class UnsafeHome(Exception):
    """The home (or its token or config) could have been planted by another user; the
    message names the path and the fix."""


def check_home(home: Path, *, uid: int | None = None) -> None:
    """Raise `UnsafeHome` unless ``home`` is safe to use as user ``uid`` (default: the
    effective uid). Blocking (a few ``stat`` calls)."""
    user = os.geteuid() if uid is None else uid
    real = Path(os.path.realpath(home))
    for parent in reversed(real.parents):
        _check_parent(parent, user)
    try:
        info = os.stat(real)
    except FileNotFoundError:
        return  # made 0700 and ours at the start
    if not stat.S_ISDIR(info.st_mode):
        raise UnsafeHome(f"home {home} is not a directory: {_FIX}")
    _check_own(real, info, user, what="home")
    for name in _CHECKED_FILES:
        path = real / name
        try:
            _check_own(path, os.stat(path), user, what=name)
        except FileNotFoundError:
            continue


_FIX: Final = "choose another home with --home DIR or AGENTRIO_HOME"


def _check_own(path: Path, info: os.stat_result, user: int, *, what: str) -> None:
    if info.st_uid != user:
        raise UnsafeHome(
            f"{what} {path} is owned by uid {info.st_uid}, not by this user (uid {user}): "
            f"another user could have planted it; if it is yours, chown it "
            f"(chown -R {user} {path}), else {_FIX}"
        )
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise UnsafeHome(
            f"{what} {path} is writable by group or others (mode "
            f"{stat.S_IMODE(info.st_mode):o}): anyone could have changed it; check its "
            f"contents, then chmod go-w {path}, or {_FIX}"
        )


def _check_parent(path: Path, user: int) -> None:
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return  # created by the daemon (default mode, its own)
    if info.st_uid not in (0, user):
        raise UnsafeHome(
            f"{path}, above the home, is owned by uid {info.st_uid}: that user could "
            f"replace the home; {_FIX}"
        )
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not info.st_mode & stat.S_ISVTX:
        raise UnsafeHome(
            f"{path}, above the home, is writable by group or others without the sticky "
            f"bit (mode {stat.S_IMODE(info.st_mode):o}): they could replace the home; "
            f"chmod go-w {path}, or {_FIX}"
        )


def refuse_unsafe_home(home: Path) -> int | None:
    """`STARTUP_EXIT` after printing the one line, when ``home`` could have been
    planted by another user (`agentrio.engine.server.ownership`); None when it is safe."""
    try:
        check_home(home)
    except UnsafeHome as exc:
        print(f"agentrio daemon: {exc}", file=sys.stderr)
        return STARTUP_EXIT
    return None
