"""The session's last exchanges, printed when the REPL opens on it (issue 31 item 3).

``agentrio --session ID`` continues a conversation: before the prompt the person sees
where it stood -- the last few things said in it and the answers -- read from the
daemon's store (``GET /v1/session/{id}/recent``), so also after a daemon restart. A new
session has none and prints nothing. Each reply shows at most `REPLY_LINES` lines;
``/history show N`` has the whole record.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from agentrio.protocol.codec import structure
from agentrio.protocol.errors import FrameDecodeError
from agentrio.protocol.http import RecentExchanges
from agentrio.protocol.wording import plural
from agentrio.repl.messages import HttpCall, HttpResult

__all__ = ["PURPOSE", "REPLY_LINES", "recent_call", "show_recent"]

#: The `HttpCall.purpose` of the request.
PURPOSE: Final = "recent"
#: Lines of one earlier reply shown; the rest is counted.
REPLY_LINES: Final = 8
#: Exchanges asked for.
_LIMIT: Final = 5

Write = Callable[[str, str], None]


def recent_call(session_id: str) -> HttpCall:
    """The request for the session's last exchanges."""
    path = f"/v1/session/{session_id}/recent"
    return HttpCall(method="GET", path=path, params={"limit": str(_LIMIT)}, purpose=PURPOSE)


def show_recent(write: Write, result: HttpResult) -> None:
    """Print the exchanges of ``result`` (a 200 answer to `recent_call`), oldest
    first: the person's words as they were typed, each reply under them."""
    try:
        recent: RecentExchanges = structure(result.body, RecentExchanges)
    except FrameDecodeError:
        return  # an older daemon's answer: the session still works, just unprinted
    if not recent.exchanges:
        return
    count = plural(len(recent.exchanges), "exchange")
    write(f"earlier in this session (the last {count}; /history for more):", "class:dim")
    for exchange in recent.exchanges:
        write("> " + exchange.input.replace("\n", "\n  "), "class:user")
        lines = exchange.reply.splitlines() or ["(no reply)"]
        shown = "\n".join(f"  {line}" for line in lines[:REPLY_LINES])
        if len(lines) > REPLY_LINES:
            shown += f"\n  … {plural(len(lines) - REPLY_LINES, 'more line')}"
        write(shown, "")
    write("— now —", "class:dim")
