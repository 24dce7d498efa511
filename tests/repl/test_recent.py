"""The REPL reopened on a session prints its last exchanges first (issue 31 item 3;
R87: the session is a conversation). The state asks ``GET …/recent`` once, on its
first connection, only when opened with ``--session``; the answer is printed as the
person's lines and the replies under them, a long reply cut to its first lines."""

from __future__ import annotations

from agentrio.protocol.codec import unstructure
from agentrio.protocol.frames import ListLegs, ListPending, OpenWindow
from agentrio.protocol.http import RecentExchange, RecentExchanges
from agentrio.repl.messages import Connected, HttpCall, HttpResult
from agentrio.repl.recent import REPLY_LINES
from agentrio.repl.state import ReplState
from tests.repl.helpers import HASH, SESSION

ASK = HttpCall(
    method="GET", path=f"/v1/session/{SESSION}/recent", params={"limit": "5"}, purpose="recent"
)


def test_a_reopened_session_asks_for_its_last_exchanges_once() -> None:
    """R87: with ``reopened`` the first connection also asks for the last exchanges; a
    reconnection does not ask again (they are on screen already)."""
    sent: list[object] = []
    state = ReplState(session_id=SESSION, window_hash="w1", send=sent.append, reopened=True)
    state.handle(Connected(url="http://h:1", daemon_version="0.1.0"))
    assert sent == [
        OpenWindow(session_id=SESSION, window_hash="w1"),
        ASK,
        ListLegs(session_id=SESSION),
        ListPending(origin="cli-"),
    ]
    sent.clear()
    state.handle(Connected(url="http://h:1", daemon_version="0.1.0", reconnect=True))
    assert ASK not in sent


def test_the_answer_prints_what_was_said_and_the_replies() -> None:
    """R87: each exchange prints as ``> input`` and its reply indented, oldest first; a
    reply longer than `REPLY_LINES` lines shows them and counts the rest; an error
    answer (an older daemon's 404) prints nothing and sets no notice."""
    state = ReplState(session_id=SESSION, window_hash="w1", send=lambda _: None, reopened=True)
    long_reply = "\n".join(f"line {n}" for n in range(REPLY_LINES + 3))
    body = RecentExchanges(
        exchanges=[
            RecentExchange(task_hash=HASH, end_at=1.0, input="my name is Ada", reply="Hi Ada."),
            RecentExchange(task_hash=HASH, end_at=2.0, input="count", reply=long_reply),
        ]
    )
    state.handle(HttpResult(call=ASK, status=200, body=unstructure(body)))
    texts = [text for _, text in state.output]
    assert texts[0] == "earlier in this session (the last 2 exchanges; /history for more):"
    assert texts[1:3] == ["> my name is Ada", "  Hi Ada."]
    assert texts[3] == "> count"
    assert texts[4 : 4 + REPLY_LINES] == [f"  line {n}" for n in range(REPLY_LINES)]
    assert texts[4 + REPLY_LINES :] == ["  … 3 more lines", "— now —"]
    before = list(state.output)
    state.handle(HttpResult(call=ASK, status=404, body={"error": {}}))
    assert (state.output, state.notice) == (before, None)
