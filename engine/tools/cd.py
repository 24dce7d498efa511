"""``cd DIR`` given to ``run_command`` alone: the task's working directory moves (R86).

A ``cd`` run by a shell would move only that shell, which exits at once; a person (and a
model) who types ``cd src`` means "work in src from now on". So a command that is just
``cd`` and one directory, as plain words (`agentrio.engine.tools.simple_command`) or an
argv, runs no process: the directory is resolved to its real path from the call's
working directory (`agentrio.engine.tools.workdir`), and becomes the task's
(`ToolContext.workdir`) -- and, for a task running for itself, its session's, stored
and shown with a ``workdir`` event (`agentrio.engine.workdirs`). Nothing is read or
changed, so nobody is asked; every later command is judged, shown and run in the new
real path like any other. One that does not exist, or is not a directory, is a tool
error and nothing moves. Anything else that mentions ``cd`` (``cd x && make``) is an
ordinary command.
"""

from __future__ import annotations

from typing import Final

from agentrio.engine.tools.base import ToolContext, ToolOutcome
from agentrio.engine.tools.simple_command import simple_argv
from agentrio.engine.tools.workdir import WorkdirError, real_workdir

__all__ = ["change_directory", "is_cd"]

#: What the model reads for a ``cd`` without exactly one directory.
_USAGE: Final = "not run: cd takes exactly one directory (cd DIR); the working directory is"


def is_cd(command: str | list[str]) -> bool:
    """Whether ``command`` is a ``cd`` given alone as a simple command."""
    argv = simple_argv(command).argv
    return argv is not None and argv[0] == "cd"


async def change_directory(ctx: ToolContext, command: str | list[str], where: str) -> ToolOutcome:
    """Carry out a ``cd`` (`is_cd`) from the real directory ``where`` (the call's)."""
    argv = simple_argv(command).argv
    assert argv is not None
    if len(argv) != 2:
        return ToolOutcome(ok=False, output=f"{_USAGE} still {ctx.workdir.path}")
    try:
        path = await real_workdir(argv[1], where)
    except WorkdirError as exc:
        return ToolOutcome(
            ok=False, output=f"not run: {exc}; the working directory is still {ctx.workdir.path}"
        )
    ctx.workdir.path = path
    if ctx.workdir.moved is not None:
        await ctx.workdir.moved(path)
    return ToolOutcome(output=f"the working directory is now {path}")
