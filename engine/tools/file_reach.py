"""Where the file tools may read and write, judged by real paths (issue 32 section 2).

A model names a file as text: relative (resolved against the directory commands run
in, `agentrio.engine.tools.workdir`), through symlinks, through ``..``. Every judgement
here is made on the **real path** (every symlink resolved, as the kernel would), and the
file is then opened and its descriptor's own path read back (``/proc/self/fd``), so a
name swapped between the judgement and the open is refused, not followed.

**What ``read_file`` reaches unasked: exactly what an unasked command reaches in the
sandbox** (`agentrio.engine.processes.sandbox`): the file system as the daemon's user
sees it, except

- the hidden places (`agentrio.engine.processes.hidden`: every agentrio home the daemon
  knows or found, ``[sandbox] hide``), by their names and real paths, and any file in a
  directory that is an agentrio home (a ``token`` next to a ``daemon.lock`` or an
  ``agentrio.db``) whether or not a scan found it yet;
- ``/tmp``, ``/var/tmp``, ``/run`` and ``/dev/shm``, which are private and empty in
  the sandbox -- except the working directory when it lies under ``/tmp`` or
  ``/var/tmp``, which the sandbox binds back in;
- ``/proc`` and ``/dev``: the sandbox has its own, and here they would be the
  daemon's (its environment, its open files);
- everything while a hidden file has a second name somewhere (`Hidden.linked`): the
  sandbox then runs nothing unasked either.

Only regular files are read. A refused read never asks anyone: the model is told why,
and may ask for a command instead (which a person confirms).

**What the write tools may change** (always after a person approved the diff, or under
a remembered directory rule): any regular file, or a new one in an existing directory,
except in a hidden place, under ``/proc``, ``/dev`` or ``/sys``, or at a restricted path
(``[tools] restricted_paths``, which need the system password: a person can run such a
change as a command). Refused writes never reach a confirmation.
"""

from __future__ import annotations

import os
import posixpath
import stat
from collections.abc import Sequence
from typing import Final

import attrs

from agentrio.engine.processes.hidden import Hidden, is_agentrio_home, named_place, place_of

__all__ = [
    "PRIVATE_ROOTS",
    "FileRefused",
    "Target",
    "open_regular",
    "read_refusal",
    "resolve_target",
    "write_refusal",
]

#: Empty in the sandbox (`_PRIVATE` there, plus ``/dev/shm``, which its ``/dev`` lacks).
PRIVATE_ROOTS: Final = ("/tmp", "/var/tmp", "/run", "/dev/shm")
#: Where the sandbox binds a working directory back in.
_BOUND_ROOTS: Final = ("/tmp", "/var/tmp")
#: Never read: the sandbox's are its own, the daemon's would leak its state.
_NOT_READ: Final = ("/proc", "/dev")
#: Never written.
_NOT_WRITTEN: Final = ("/proc", "/dev", "/sys")


class FileRefused(Exception):
    """The path may not be read (or written) by a file tool; the message is for the
    model and names no content."""


@attrs.frozen
class Target:
    """A path a model named: ``text`` (absolute, ``..`` kept, as joined with the
    working directory) and ``real`` (every symlink resolved), in the working
    directory ``base`` (a real path)."""

    text: str
    real: str
    base: str


def _under(path: str, root: str) -> bool:
    return bool(place_of(path, (root,)))


def resolve_target(path: str, base: str) -> Target:
    """The real path of ``path`` (relative to ``base``). Blocking. Raises `ValueError`
    for something that is no path."""
    if not path or "\x00" in path:
        raise ValueError("argument 'path' must be a non-empty path without NUL bytes")
    text = posixpath.join(base, path)
    return Target(text=posixpath.normpath(text), real=os.path.realpath(text), base=base)


def _home_around(real: str) -> str:
    """The nearest directory holding ``real`` that is an agentrio home, or ``""``."""
    directory = real if os.path.isdir(real) else posixpath.dirname(real)
    while True:
        if is_agentrio_home(directory):
            return directory
        parent = posixpath.dirname(directory)
        if parent == directory:
            return ""
        directory = parent


def _hidden_refusal(target: Target, places: Sequence[str]) -> str:
    hit = named_place([target.text], target.base, places) or place_of(target.real, places)
    home = hit or _home_around(target.real)
    if home:
        return f"{target.real} is in a hidden place ({home})"
    return ""


def _root_of(paths: Sequence[str], roots: Sequence[str]) -> str:
    return next((root for path in paths for root in roots if _under(path, root)), "")


def read_refusal(target: Target, hidden: Hidden) -> str:
    """Why ``read_file`` may not read ``target`` unasked (see the module docstring),
    or ``""``. Blocking."""
    paths = (target.text, target.real)
    root = _root_of(paths, _NOT_READ)
    if root:
        return f"{target.real}: read_file does not read {root}"
    if hidden.linked:
        return hidden.linked
    hidden_why = _hidden_refusal(target, hidden.places)
    if hidden_why:
        return f"{hidden_why}: no tool reads there unasked"
    bound = _root_of((target.base,), _BOUND_ROOTS)
    private = _root_of(paths, PRIVATE_ROOTS)
    if private and not (bound and _under(target.real, target.base)):
        return (
            f"{target.real} is under {private}, which unasked reads do not reach "
            "(only the working directory is seen there)"
        )
    return ""


def write_refusal(target: Target, hidden: Hidden, restricted: Sequence[str]) -> str:
    """Why no file tool may write ``target`` (see the module docstring), or ``""``.
    ``restricted``: the configured restricted paths. Blocking."""
    paths = (target.text, target.real)
    root = _root_of(paths, _NOT_WRITTEN)
    if root:
        return f"{target.real}: file tools do not write under {root}"
    hidden_why = _hidden_refusal(target, hidden.places)
    if hidden_why:
        return f"{hidden_why}: no tool writes there"
    roots = [posixpath.normpath(os.path.expanduser(r)) for r in restricted if r]
    root = _root_of(paths, [r for r in roots if r.startswith("/")])
    if root:
        return (
            f"{target.real} is under the restricted path {root}: a change there needs the "
            "system password, so ask for it as a command (run_command) instead"
        )
    return ""


def open_regular(real: str) -> int:
    """A read descriptor of the regular file at the real path ``real``, checked to be
    that file: opened without blocking (a FIFO cannot hang it), then its own path read
    back from ``/proc/self/fd`` and compared. Raises `FileRefused` (or `OSError` for a
    file that is not there or not readable). Blocking."""
    fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise FileRefused(f"{real} is not a regular file")
        opened = os.readlink(f"/proc/self/fd/{fd}")
        if opened != real:
            raise FileRefused(f"{real} changed while it was opened; read it again")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd
