"""The REPL in a real terminal, against the real daemon and aimock (issue 31 items 6
and 7, ``/compact`` of 3): a rate-limited call shows its ``retrying`` line; once the
task finishes the status bar shows the session's tokens and cost, ``/usage`` lists
them, and ``/compact`` says what it folded.

aimock answers the first request with its own 429 (``Retry-After: 1``) and the next
with a reply that reports its tokens; ``[model] price_*`` prices them.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import trio

from tests.aimock import start_aimock, write_fixture
from tests.e2e.test_dialects_e2e import start_daemon
from tests.e2e.test_repl_tmux import Tmux, _start_repl, wait_for

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

FIXTURES = [
    {
        # ``/compact``'s summary request: its transcript quotes the exchange.
        "match": {"userMessage": "user: count my tokens"},
        "response": {"content": "Tokens were counted."},
    },
    {
        "match": {"userMessage": "count my tokens", "sequenceIndex": 0},
        "response": {
            "error": {"message": "Rate limit reached", "type": "rate_limit_error"},
            "status": 429,
            "retryAfter": 1,
        },
    },
    {
        "match": {"userMessage": "count my tokens", "sequenceIndex": 1},
        "response": {
            "content": "Counted them.",
            "usage": {"prompt_tokens": 1200, "completion_tokens": 34},
        },
    },
]


def _show_usage(tmux: Tmux) -> None:
    tmux("send-keys", "-t", "repl", "count my tokens", "Enter")
    wait_for(lambda: "↻ rate limited, retrying in 1 s" in tmux.lines(), "the retrying line", 30)
    wait_for(lambda: "Counted them." in tmux.lines(), "the reply after the retry", 30)
    # 1200 in at $2.50 and 34 out at $10 per million: $0.0033
    bar = "│ tokens 1200 in, 34 out · $0.0033"
    wait_for(lambda: bar in tmux.screen(), "the session's usage in the status bar")
    tmux("send-keys", "-t", "repl", "/usage", "Enter")
    wait_for(
        lambda: "  session (1 model call): tokens: 1200 in, 34 out · $0.0033" in tmux.lines(),
        "/usage's session line",
    )
    assert any(
        line.endswith("  tokens: 1200 in, 34 out · $0.0033") and line.startswith("  ")
        for line in tmux.lines()
        if not line.startswith("  session")
    ), tmux.screen()
    tmux("send-keys", "-t", "repl", "/compact", "Enter")
    wait_for(
        lambda: "⟲ conversation compacted: 1 earlier exchange summarised" in tmux.lines(),
        "/compact's answer",
    )


async def test_the_repl_shows_a_retry_and_the_sessions_usage(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """Issue 31 (6, 7): "↻ rate limited, retrying in 1 s" is printed while the call
    waits; the status bar then shows the session's tokens and cost, and ``/usage``
    prints the task's usage and the session's; ``/compact`` then says it summarised
    the one earlier exchange."""
    aimock = await start_aimock(nursery, write_fixture(tmp_path, FIXTURES))
    home = tmp_path / "home"
    daemon = await start_daemon(
        home, aimock, "openai", retries=3, price_input=2.5, price_output=10.0
    )
    tmux = Tmux()
    try:
        await trio.to_thread.run_sync(_start_repl, tmux, home)
        await trio.to_thread.run_sync(_show_usage, tmux)
    finally:
        tmux("kill-server")
        assert await trio.to_thread.run_sync(daemon.stop) == 0
