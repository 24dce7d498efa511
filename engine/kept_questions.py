"""The questions a stopped run was asking, kept with its task (R13, R42).

A run stopped by a cause that keeps its task (a closed window, R43; pause; abort;
shutdown) while a question was open must not lose it (R13): the resume asks it again
(R42) or takes answers. Two places ask: a resumed run asking its saved questions (its
``resume_snapshot`` still set), and an inline ``ask_user`` call -- the call being
executed is the first of the run's open calls (each leaves the list when it returns).
That call is then taken off the open calls: it is the question, not an interrupted
call. Any other open call (a confirmation, R6) stays *interrupted*, so the resumed task
proposes it again and it is asked again; nothing ran unconfirmed.
"""

from __future__ import annotations

from agentrio.engine.models.base import ToolCallRequest
from agentrio.engine.snapshot import Snapshot
from agentrio.engine.tools.ask_user import AskUserTool, parse_questions
from agentrio.protocol.events import Question

__all__ = ["open_questions"]


def open_questions(
    resume_snapshot: Snapshot | None, open_calls: list[ToolCallRequest]
) -> list[Question] | None:
    """The questions the run was asking when it was stopped, or None (see the module
    docstring); an ``ask_user`` call found asking leaves ``open_calls``."""
    if resume_snapshot is not None:
        return list(resume_snapshot.questions)
    if not open_calls or open_calls[0].name != AskUserTool.name:
        return None
    try:
        questions = parse_questions(open_calls[0].args)
    except ValueError:
        return None
    open_calls.pop(0)
    return questions
