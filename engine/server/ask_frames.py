"""An ask as a front-end sees it, and back: the ``ask`` and ``verify`` frames of
registry entries and notices, and the request an ``ask`` frame stands for (an ask of
a task on another daemon, shown here: `agentrio.engine.server.peer_asks`)."""

from __future__ import annotations

from agentrio.engine.pending import AskRequest, Entry, Verified
from agentrio.protocol.asks import asked_fields
from agentrio.protocol.frames import Ask, Verify

__all__ = ["ask_frame", "request_of_ask", "verify_frame"]


def ask_frame(entry: Entry) -> Ask:
    """The ``ask`` frame a front-end is shown for a registry entry."""
    return Ask(id=entry.id, **asked_fields(entry.request))


def request_of_ask(ask: Ask) -> AskRequest:
    """The request an ``ask`` frame shows (`ask_frame`'s inverse; a frame carries no
    window hash, and asks of REPL windows never leave their daemon, R78)."""
    return AskRequest(**asked_fields(ask))


def verify_frame(notice: Verified) -> Verify:
    """The ``verify`` frame (R7) of the registry's password-check notice."""
    return Verify(id=notice.entry_id, ok=notice.ok, error=notice.error)
