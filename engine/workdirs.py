"""A session's working directory (R86, issue 31 item 1): where its commands run.

A session is a place as well as a conversation. Its directory is, in order:

1. the ``cwd`` a task was started with (``run.cwd``, ``POST /v1/send`` ``cwd``; the
   REPL sends its own working directory), which then becomes the session's;
2. the session's directory as last stored (`Store.session_workdir`): set by 1, or
   moved by a ``cd`` (`agentrio.engine.tools.cd`), kept across a daemon restart;
3. the configured default (`default_workdir`): ``[agent] cwd``, else the home's parent
   for a home other than the default one, else ``$HOME`` -- never the directory the
   daemon happened to start in.

Each is taken as its real path (symlinks resolved, `agentrio.engine.tools.workdir`) and
must be a directory: a ``cwd`` that is not refuses the task with a clear error before
anything runs.

A run keeps its own `Workdir`, made from the session's when it starts, so tasks side by
side in one session do not move each other's commands; a ``cd`` of a task running for
itself also moves the session's (stored, and told with a ``workdir`` event), so the
session's next task starts there. Sub-agents, in-process or background, start in the
directory of the task that started them; their ``cd`` moves only themselves.

Other engine code reads where a run is through one accessor: ``run.workdir.path``
(`agentrio.engine.runs.TaskRun.workdir`) or, in a tool, ``ctx.workdir.path``
(`agentrio.engine.tools.base.ToolContext.workdir`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Protocol

from agentrio.engine.config import Config, default_home
from agentrio.engine.errors import BadRequest
from agentrio.engine.store.base import Store
from agentrio.engine.tools.base import Emit
from agentrio.engine.tools.workdir import WorkdirError, real_workdir
from agentrio.protocol import events as ev

__all__ = ["default_workdir", "move_session", "start_workdir"]


def default_workdir(config: Config) -> str:
    """The configured default directory (see the module docstring), absolute and not
    yet resolved:
    ``[agent] cwd`` with ``~`` expanded, else the home's parent (a home other than
    the default ``~/.config/agentrio``), else ``$HOME``."""
    if config.agent.cwd:  # a relative one is taken from $HOME, never the daemon's cwd
        return os.path.join(Path.home(), os.path.expanduser(config.agent.cwd))
    home = config.home_path.expanduser().absolute()
    if home != default_home().expanduser().absolute():
        return str(home.parent)
    return str(Path.home())


class _Engine(Protocol):
    store: Store
    config: Config


async def start_workdir(
    engine: _Engine, session_id: str, cwd: str | None, *, leg: bool = False
) -> str:
    """The real directory a new run of ``session_id`` starts in (module docstring);
    a given ``cwd`` (relative: to the session's directory) is stored as the
    session's. A stored directory that is gone gives way to the default. Raises
    `BadRequest` when the directory cannot be used: the task is then not started.
    A background sub-agent's run (``leg``) starts in its leg's ``cwd`` as given: the
    real directory of the task that started it, never stored."""
    if leg and cwd is not None:
        return cwd
    store, config = engine.store, engine.config
    stored = await store.session_workdir(session_id)
    base = None
    if stored is not None:
        try:
            base = await real_workdir(None, stored)
        except WorkdirError:
            base = None
    if base is None:
        try:
            base = await real_workdir(None, default_workdir(config))
        except WorkdirError as exc:
            if not cwd or not os.path.isabs(cwd):
                raise BadRequest(f"the default working directory ([agent] cwd): {exc}") from None
            base = "/"
    if not cwd:
        return base
    try:
        path = await real_workdir(cwd, base)
    except WorkdirError as exc:
        raise BadRequest(f"cwd: {exc}") from None
    if path != stored:
        await store.put_session_workdir(session_id, path)
    return path


async def move_session(store: Store, emit: Emit, session_id: str, path: str) -> None:
    """After a ``cd`` of a task running for itself: the session's directory is
    ``path`` from now on (stored, so its next task and a restarted daemon start
    there), and the person is told with a ``workdir`` event."""
    await store.put_session_workdir(session_id, path)
    emit(ev.Workdir, path=path)
