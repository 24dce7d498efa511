"""The session's token usage in the REPL: the status bar and ``/usage`` (issue 31
item 7), from ``done`` events of this window's tasks and the session's others; and
``/compact`` (item 3), which asks the daemon to fold the session's conversation."""

from __future__ import annotations

from agentrio.protocol.events import Done, TokenUsage
from agentrio.protocol.frames import Compact, CompactedSession
from agentrio.repl.toolbar import toolbar_fragments
from agentrio.repl.usage import NONE_YET
from tests.repl.helpers import connected_state, event

A, B = "a" * 32, "b" * 32


def done_event(usage: TokenUsage, session: TokenUsage, seq: int = 9) -> Done:
    return Done(seq=seq, at=0.0, text="ok", usage=usage, session_usage=session)


def toolbar_text(state: object) -> str:
    return "".join(text for _, text in toolbar_fragments(state))  # type: ignore[arg-type]


def test_the_status_bar_and_usage_show_the_sessions_tokens_and_cost() -> None:
    """Issue 31 (7): after two tasks finish (one of another window), the status bar
    shows the session's total with its cost, and ``/usage`` lists each task's usage
    and the session's, in the words of every front-end."""
    state, _ = connected_state()
    first = TokenUsage(input_tokens=1830, output_tokens=96, cached_input_tokens=1024, calls=2)
    both = TokenUsage(input_tokens=13830, output_tokens=196, calls=3, cost_usd=0.0412)
    state.handle(event(done_event(first, first), task_hash=A))
    assert toolbar_text(state).endswith(" │ tokens 1830 in, 96 out ")  # unpriced: no cost
    later = TokenUsage(input_tokens=12000, output_tokens=100, calls=1, cost_usd=0.0412)
    state.handle(event(done_event(later, both, seq=12), task_hash=B))
    assert " │ tokens 13.8k in, 196 out · $0.0412" in toolbar_text(state)
    state.submit("/usage")
    assert [text for _, text in state.output[-4:]] == [
        "usage of the tasks finished while this window was open:",
        "  aaaaaaaa  tokens: 1830 in (1024 cached), 96 out",
        "  bbbbbbbb  tokens: 12000 in, 100 out · $0.0412",
        "  session (3 model calls): tokens: 13830 in, 196 out · $0.0412",
    ]


def test_a_model_that_reports_no_tokens_shows_no_usage() -> None:
    """Issue 31 (7): the built-in model reports no tokens: no status-bar field, and
    ``/usage`` says none were reported; ``/new`` starts the count again."""
    state, _ = connected_state()
    state.handle(event(done_event(TokenUsage(calls=1), TokenUsage(calls=1)), task_hash=A))
    assert "tokens" not in toolbar_text(state)
    state.submit("/usage")
    assert state.output[-1] == ("class:dim", NONE_YET)
    used = TokenUsage(input_tokens=5, output_tokens=1, calls=1)
    state.handle(event(done_event(used, used), task_hash=B))
    assert "tokens 5 in, 1 out" in toolbar_text(state)
    state.submit("/new")
    assert "tokens" not in toolbar_text(state)
    state.submit("/usage extra")
    assert state.notice == "usage: /usage (takes no arguments)"


def test_compact_asks_the_daemon_and_says_what_it_folded() -> None:
    """Issue 31 (3): ``/compact`` sends ``compact`` for this session; the answer is
    said in the words of the ``compacted`` event (nothing to fold included); an
    answer for another session is not this window's."""
    state, sent = connected_state()
    sent.clear()
    state.submit("/compact")
    assert sent == [Compact(session_id=state.session_id)]
    state.handle(CompactedSession(session_id=state.session_id, summarised=3))
    assert state.output[-1] == (
        "class:dim",
        "⟲ conversation compacted: 3 earlier exchanges summarised",
    )
    state.handle(CompactedSession(session_id=state.session_id, summarised=0))
    assert state.output[-1] == ("class:dim", "⟲ conversation compacted: nothing to fold")
    before = list(state.output)
    state.handle(CompactedSession(session_id="cli-other", summarised=2))
    assert state.output == before
