"""The real working directory a command runs in (issue 29 findings 4, 6 and 10; issue 31
item 1).

A model names a working directory as text: relative (``../x``), through symlinks (a
checkout's ``build -> /``), or not at all. A relative one, and none, are taken from the
session's directory (`agentrio.engine.workdirs`: where the REPL was opened, a script's
``cwd``, or the configured default, moved by ``cd``), never from the daemon's own
directory. Every judgement about a command -- which paths it touches, whether a
remembered rule covers it -- and the confirmation the person reads use the one real
path this module resolves, and the command then runs in that path, so what was judged
and shown is where it runs. A directory that does not exist (or is not a directory) is
a clear tool error the model reads; nothing is asked and nothing runs.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable

import attrs
import trio

__all__ = ["Workdir", "WorkdirError", "real_workdir", "resolve_workdir"]


class WorkdirError(Exception):
    """The working directory cannot be used; the message is for the model."""


@attrs.define(eq=False)
class Workdir:
    """Where one run's commands run: ``path``, a real path. ``moved`` (None for a
    sub-agent) is called with the new path after a ``cd`` moved it, to move the
    session's directory too."""

    path: str
    moved: Callable[[str], Awaitable[None]] | None = None

    def for_subagent(self) -> Workdir:
        """A sub-agent's own directory: starts here, moves only itself."""
        return Workdir(self.path)


def resolve_workdir(cwd: str | None, base: str) -> str:
    """The absolute real path of ``cwd`` taken from ``base`` (an absolute path: the
    session's directory); ``base`` itself when None. Blocking: it reads the file
    system. Raises `WorkdirError`."""
    if not os.path.isabs(base):
        raise ValueError(f"the base directory {base!r} is not absolute")
    shown = repr(base) if cwd is None else repr(cwd)
    if cwd is not None and ("\x00" in cwd or not cwd):
        raise WorkdirError(f"the working directory {shown} is not a path")
    try:
        path = os.path.realpath(os.path.join(base, cwd or "."), strict=True)
    except FileNotFoundError:
        raise WorkdirError(f"the working directory {shown} does not exist") from None
    except OSError as exc:
        why = exc.strerror or type(exc).__name__
        raise WorkdirError(f"the working directory {shown} cannot be used: {why}") from None
    if not os.path.isdir(path):
        raise WorkdirError(f"the working directory {shown} is not a directory")
    return path


async def real_workdir(cwd: str | None, base: str) -> str:
    """`resolve_workdir` off the Trio thread (a slow or hung file system must not
    stall the daemon)."""
    return await trio.to_thread.run_sync(resolve_workdir, cwd, base, abandon_on_cancel=True)
