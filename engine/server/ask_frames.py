"""An ask as a front-end sees it, and back: the ``ask`` and ``verify`` frames of
registry entries and notices, and the request an ``ask`` frame stands for (an ask of
a task on another daemon, shown here: `agentrio.engine.server.peer_asks`)."""

from __future__ import annotations

from agentrio.engine.pending import AskRequest, Entry, Verified
from agentrio.protocol.frames import Ask, Verify

__all__ = ["ask_frame", "request_of_ask", "verify_frame"]


def ask_frame(entry: Entry) -> Ask:
    """The ``ask`` frame a front-end is shown for a registry entry."""
    request = entry.request
    return Ask(
        id=entry.id,
        kind=request.kind,
        session_id=request.session_id,
        task_hash=request.task_hash,
        tool_name=request.tool_name,
        tool_args=dict(request.tool_args),
        questions=list(request.questions),
        restricted=request.restricted,
        need_password=request.need_password,
        subagent=request.subagent,
        offers=list(request.offers),
        details=request.details,
    )


def request_of_ask(ask: Ask) -> AskRequest:
    """The request an ``ask`` frame shows (`ask_frame`'s inverse; a frame carries no
    window hash, and asks of REPL windows never leave their daemon, R78)."""
    return AskRequest(
        kind=ask.kind,
        session_id=ask.session_id,
        task_hash=ask.task_hash,
        tool_name=ask.tool_name,
        tool_args=dict(ask.tool_args),
        questions=list(ask.questions),
        restricted=ask.restricted,
        need_password=ask.need_password,
        subagent=ask.subagent,
        offers=list(ask.offers),
        details=ask.details,
    )


def verify_frame(notice: Verified) -> Verify:
    """The ``verify`` frame (R7) of the registry's password-check notice."""
    return Verify(id=notice.entry_id, ok=notice.ok, error=notice.error)
