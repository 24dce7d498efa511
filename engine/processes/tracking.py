"""Which process groups a piece of work started, so a stop can say which it ended (R48).

`agentrio.engine.processes.runner.run_in_group` notes every group it starts, and the
end of its clean-up, in the `GroupLog` of the Trio task it runs in (a context
variable: set by the one who wants to know, read by the runner, no argument threaded
through every tool). A task's run sets one for all its calls
(`agentrio.engine.stops`), a command leg one of its own
(`agentrio.engine.background.command_leg`); a task started from inside another (a leg
from a tool call) sets its own before it runs anything, so nothing is counted twice.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import attrs

__all__ = ["GroupLog", "group_ended", "group_started", "logging_groups"]


@attrs.define(eq=False)
class GroupLog:
    """The process groups started under one piece of work: every one (``started``,
    in order) and those whose clean-up has not finished yet (``live``)."""

    started: list[int] = attrs.field(factory=list)
    live: set[int] = attrs.field(factory=set)


_CURRENT: ContextVar[GroupLog | None] = ContextVar("agentrio_group_log", default=None)


@contextmanager
def logging_groups(log: GroupLog) -> Iterator[GroupLog]:
    """Note into ``log`` the groups started by this task (and its children) meanwhile."""
    token = _CURRENT.set(log)
    try:
        yield log
    finally:
        _CURRENT.reset(token)


def group_started(pgid: int) -> None:
    log = _CURRENT.get()
    if log is not None:
        log.started.append(pgid)
        log.live.add(pgid)


def group_ended(pgid: int) -> None:
    """The runner's clean-up of ``pgid`` is over (the group ended, or its bounded wait
    ran out: the stop's receipt checks which)."""
    log = _CURRENT.get()
    if log is not None:
        log.live.discard(pgid)
