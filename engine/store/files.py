"""Private files under the home: folders 0700, files 0600, from creation (R73, issue 15
item 6).

Everything the daemon keeps under ``<home>`` can hold something another local user must
not read: the token, the database with its secrets (and its ``-wal``/``-shm`` side
files, which hold recent writes), job files and leg logs (command output), sub-agent
reports, ``daemon.json``, ``daemon.log``. So every such file is *created* owner-only
(``os.open`` with mode 0o600; the umask can only take bits away) — never written first
and tightened after — and every folder is made 0o700.

The daemon's process umask is deliberately left alone: the commands it runs inherit it,
and a person's approved ``touch x`` or ``make`` making owner-only files in their project
would be a surprise. Explicit modes cover our own files only.

A home made earlier with looser modes (by an older agentrio, a front-end or a hand) is
tightened at daemon start: `tighten_home` takes group and world bits off everything
under it and says which paths it changed -- except the person's own files
(`USER_FILES`: ``config.toml``), which agentrio only reads and never rewrites, not even
their mode (issue 30); the daemon warns about a too-open one instead.

Blocking functions: call them from a worker thread in async code.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Final

__all__ = [
    "PRIVATE_DIR_MODE",
    "PRIVATE_FILE_MODE",
    "USER_FILES",
    "make_home",
    "make_private_dirs",
    "open_private",
    "tighten_home",
    "write_private_atomic",
]

#: Files of the home that are the person's, not agentrio's: never changed.
USER_FILES: Final = ("config.toml",)
PRIVATE_DIR_MODE: Final = 0o700
PRIVATE_FILE_MODE: Final = 0o600
#: Group and world bits: none of them may be set on anything under the home.
_OPEN_TO_OTHERS: Final = 0o077


def make_private_dirs(path: Path) -> None:
    """Create ``path`` and every missing parent with mode 0700 (`os.makedirs` would give
    the parents the default mode). Existing folders are left as they are."""
    missing: list[Path] = []
    level = path
    while not level.is_dir():
        missing.append(level)
        if level.parent == level:
            break
        level = level.parent
    for folder in reversed(missing):
        try:
            os.mkdir(folder, PRIVATE_DIR_MODE)
        except FileExistsError:
            if not folder.is_dir():
                raise


def make_home(home: Path) -> None:
    """Create the home 0700 if it is missing; its parents (``~/.config``) get the
    default mode, they are not ours."""
    if home.is_dir():
        return
    home.parent.mkdir(parents=True, exist_ok=True)
    make_private_dirs(home)


def open_private(path: Path, flags: int, *, create: bool = True) -> int:
    """``os.open(path, flags | O_CREAT | O_CLOEXEC, 0o600)`` (without ``O_CREAT`` when
    ``create`` is false); an existing file whose mode is not 0600 is set to 0600 before
    the descriptor is returned."""
    flags |= os.O_CLOEXEC | (os.O_CREAT if create else 0)
    fd = os.open(path, flags, PRIVATE_FILE_MODE)
    try:
        if stat.S_IMODE(os.fstat(fd).st_mode) != PRIVATE_FILE_MODE:
            os.fchmod(fd, PRIVATE_FILE_MODE)
    except BaseException:
        os.close(fd)
        raise
    return fd


def write_private_atomic(path: Path, data: bytes, *, tmp: Path | None = None) -> None:
    """Write ``data`` to ``path`` through a temporary file (0600 from its creation,
    fsynced) and `os.replace`. ``tmp`` defaults to ``.<name>.tmp`` beside ``path``."""
    tmp = tmp or path.with_name(f".{path.name}.tmp")
    fd = open_private(tmp, os.O_WRONLY | os.O_TRUNC)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def tighten_home(home: Path) -> tuple[list[Path], list[tuple[Path, OSError]]]:
    """Take group and world bits off ``home`` and everything under it (symbolic links
    are neither followed nor changed), but the person's own `USER_FILES`. Returns the
    paths changed and the ones that could not be (with why). A missing home is nothing
    to do."""
    changed: list[Path] = []
    failed: list[tuple[Path, OSError]] = []

    def tighten(path: Path) -> None:
        try:
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode) or not st.st_mode & _OPEN_TO_OTHERS:
                return
            os.chmod(path, stat.S_IMODE(st.st_mode) & ~_OPEN_TO_OTHERS)
        except FileNotFoundError:
            return  # removed meanwhile (a leg log, an atomic write's temp file)
        except OSError as exc:
            failed.append((path, exc))
            return
        changed.append(path)

    if not home.is_dir():
        return changed, failed
    home = home.resolve()  # a home that is a symbolic link: its target is the home
    theirs = {home / name for name in USER_FILES}
    tighten(home)
    for top, dirs, files in os.walk(home, onerror=lambda exc: None):
        for name in (*dirs, *files):
            if Path(top) / name not in theirs:
                tighten(Path(top) / name)
    return changed, failed
