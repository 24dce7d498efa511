"""Judging a ``run_command`` confirmation by rule, as a script front-end does (issue 29
finding 4): the command **and** the directory it would run in.

A confirmation's arguments name the real directory the command runs in (its ``cwd``:
the daemon resolved it, symlinks and all, and runs the command exactly there). A rule
that looks at the command alone approves ``sh build.sh`` in a hostile checkout as
readily as in a trusted one, so `RuleOfCommands` matches both: the command as one
shell-readable string (an argv as ``shlex.join`` of it, so ``["rm", "a b"]`` never
passes for ``rm a b``) fully matching a pattern, and the directory being one of the
directories given (their real paths). A confirmation without a ``cwd`` (a daemon from
before it said one) matches nothing. ``agentrio.testing.allow_commands`` and
examples/chat_frontend.py both judge with it.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterable

import attrs

from agentrio.protocol.frames import Ask

__all__ = ["RuleOfCommands", "confirmed_command"]


def confirmed_command(ask: Ask) -> tuple[str, str] | None:
    """``(command, cwd)`` of a ``run_command`` confirmation -- the command as one
    string (an argv as ``shlex.join``), ``cwd`` the real directory shown -- or None for
    any other ask, or one that names no directory."""
    if ask.kind != "tool_confirm" or ask.tool_name != "run_command":
        return None
    command, cwd = ask.tool_args.get("command"), ask.tool_args.get("cwd")
    if not isinstance(cwd, str) or not cwd.startswith("/"):
        return None
    if isinstance(command, list) and command and all(isinstance(w, str) for w in command):
        return shlex.join(command), cwd
    if isinstance(command, str):
        return command, cwd
    return None


@attrs.frozen
class RuleOfCommands:
    """Commands fully matching ``pattern``, run in one of ``directories`` (kept as their
    real paths; `of` resolves them)."""

    pattern: re.Pattern[str]
    directories: frozenset[str]

    @classmethod
    def of(
        cls, pattern: str | re.Pattern[str], directories: Iterable[str | os.PathLike[str]]
    ) -> RuleOfCommands:
        """A rule for ``pattern`` in ``directories`` (each resolved to its real path
        now: blocking, call it where the file system may be read)."""
        real = frozenset(os.path.realpath(os.fspath(d)) for d in directories)
        if not real:
            raise ValueError("a rule of commands needs at least one directory")
        return cls(re.compile(pattern), real)

    def allows(self, ask: Ask) -> bool:
        """Whether ``ask`` is a ``run_command`` confirmation this rule approves."""
        found = confirmed_command(ask)
        if found is None:
            return False
        command, cwd = found
        return cwd in self.directories and self.pattern.fullmatch(command) is not None
