"""A session's last exchanges, as a reopened window shows them (issue 31 item 3).

A person who reopens a session (``agentrio --session ID``, the page's session list)
expects to see where the conversation stood: the last few things they said and the
answers they got, before the prompt -- also after a daemon restart, when the session's
replay buffer is gone. They are read from the stored conversation
(`agentrio.engine.store.base.Store.conversation` with ``folded``: a compaction folds
exchanges into the model's summary, but the person still sees them), at most
`MAX_RECENT` and each text clamped, so the answer stays small whatever the session's
length.

What the person said is the task's objective from its history row: a resumed task's
first message is the engine's resume message, meant for the model, while its objective
is what was asked. The reply is the task's last text, or the note a cancel or failure
left (``[Canceled]``).
"""

from __future__ import annotations

from typing import Final

from agentrio.engine.conversation import Exchange
from agentrio.engine.errors import BadRequest
from agentrio.engine.snapshot import clamp
from agentrio.engine.store.base import Store
from agentrio.protocol.http import RecentExchange, RecentExchanges

__all__ = ["DEFAULT_RECENT", "MAX_RECENT", "RECENT_TEXT_BYTES", "recent_exchanges"]

#: Exchanges shown when the caller names no ``limit``.
DEFAULT_RECENT: Final = 5
#: The most a caller may ask for.
MAX_RECENT: Final = 50
#: Each input and reply is clamped to this many UTF-8 bytes (head and tail kept).
RECENT_TEXT_BYTES: Final = 4096


def _reply(exchange: Exchange) -> str:
    for message in reversed(exchange.messages):
        if message.role == "assistant" and message.content.strip():
            return message.content
    return ""


def _said(exchange: Exchange) -> str:
    return next((m.content for m in exchange.messages if m.role == "user"), "")


async def recent_exchanges(
    store: Store, session_id: str, limit: int = DEFAULT_RECENT
) -> RecentExchanges:
    """The session's last ``limit`` exchanges, oldest first (module docstring);
    `BadRequest` for a limit outside 0-`MAX_RECENT`."""
    if not 0 <= limit <= MAX_RECENT:
        raise BadRequest(f"limit must be 0-{MAX_RECENT}, got {limit}")
    if limit == 0:
        return RecentExchanges(exchanges=[])
    stored = await store.conversation(session_id, limit=limit, folded=True)
    # Background sub-agents' rows have no exchange: read a few more to find each input.
    rows = await store.list_history(session_id, limit=limit * 2)
    objectives = {row.task_hash: row.objective for row in rows}
    return RecentExchanges(
        exchanges=[
            RecentExchange(
                task_hash=e.task_hash,
                end_at=e.end_at,
                input=clamp(objectives.get(e.task_hash) or _said(e), RECENT_TEXT_BYTES),
                reply=clamp(_reply(e), RECENT_TEXT_BYTES),
            )
            for e in stored.exchanges
        ]
    )
