"""What background work needs of the engine (`TaskStarter`), and nothing more.

Background work starts tasks (a sub-agent's child task, a job's follow-up) and reads a
session's live state (its hub, leg limiter, runs and remembered commands). It gets
them through this protocol, which `agentrio.engine.core.Engine` provides, so that nothing in
`agentrio.engine.background` imports the engine facade.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from agentrio.engine.runs import PreludeCall, RunOrigin, TaskRun
from agentrio.engine.sessions import Session

__all__ = ["TaskStarter"]


class TaskStarter(Protocol):
    """What background work needs of the engine: a session's live state (its hub,
    leg limiter, runs and remembered commands) and a way to start a task (a
    sub-agent's child task, a job's follow-up). `agentrio.engine.core.Engine` is one."""

    def session(self, session_id: str) -> Session[TaskRun]: ...

    async def start_task(
        self,
        session_id: str,
        text: str,
        *,
        origin: RunOrigin | None = None,
        allow_all: bool = False,
        objective: str | None = None,
        subagent_of: str | None = None,
        prelude: Sequence[PreludeCall] = (),
        cwd: str | None = None,
    ) -> TaskRun: ...
