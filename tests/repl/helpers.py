"""Builders shared by the REPL tests: a connected state with a list as its frame sink."""

from __future__ import annotations

from typing import Any

from agentrio.protocol.events import Event, Question
from agentrio.protocol.frames import Accepted, Ask, DoneFrame, EventFrame, LegInfo, LegList
from agentrio.repl.messages import Connected, Outgoing
from agentrio.repl.state import ReplState

__all__ = [
    "HASH",
    "SESSION",
    "accepted",
    "ask_confirm",
    "ask_questions",
    "connected_state",
    "done",
    "event",
    "leg_list",
]

SESSION = "cli-0a1b2c3d"
HASH = "3f2a9c0d4b1e4f6a8c7d2e1f0a9b8c7d"


def connected_state() -> tuple[ReplState, list[Outgoing]]:
    """A state past `Connected`, with the frames the connect itself sent cleared."""
    sent: list[Outgoing] = []
    state = ReplState(session_id=SESSION, window_hash="w1", send=sent.append, model="builtin")
    state.handle(Connected(url="http://127.0.0.1:1", daemon_version="0.1.0"))
    sent.clear()
    return state, sent


def accepted(request_id: str, task_hash: str = HASH) -> Accepted:
    return Accepted(request_id=request_id, session_id=SESSION, task_hash=task_hash)


def event(ev: Event, task_hash: str = HASH) -> EventFrame:
    return EventFrame(session_id=SESSION, task_hash=task_hash, event=ev)


def done(request_id: str, status: Any = "finished", error: str = "") -> DoneFrame:
    return DoneFrame(request_id=request_id, task_hash=HASH, status=status, error=error)


def ask_confirm(
    ask_id: str = "k1",
    *,
    need_password: bool = False,
    command: object = None,
    **args: object,
) -> Ask:
    """A ``run_command`` confirmation; ``command`` defaults to one that fits
    ``need_password``, ``args`` are further tool arguments."""
    if command is None:
        command = "rm -rf /etc/x" if need_password else "echo hello"
    return Ask(
        id=ask_id,
        kind="tool_confirm",
        session_id=SESSION,
        task_hash=HASH,
        tool_name="run_command",
        tool_args={"command": command, **args},
        restricted=need_password,
        need_password=need_password,
    )


def ask_questions(questions: list[Question], ask_id: str = "q1", kind: Any = "ask_user") -> Ask:
    return Ask(id=ask_id, kind=kind, session_id=SESSION, task_hash=HASH, questions=questions)


def leg_list(*legs: tuple[str, str]) -> LegList:
    return LegList(
        session_id=SESSION,
        legs=[
            LegInfo(
                leg_id=leg_id,
                job_id="job_00000001",
                task_hash=HASH,
                label=label,
                state="running",
                started_at=0.0,
            )
            for leg_id, label in legs
        ],
    )
