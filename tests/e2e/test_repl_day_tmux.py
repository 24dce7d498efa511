"""End to end in a real terminal: what a day of use tripped over in the REPL (issue 33).

``agentrio`` runs in tmux against a real daemon (the fixtures of
`tests.e2e.test_repl_tmux`). Waits poll the screen; nothing is timed by sleeping.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from agentrio.protocol.wording import confirm_title
from tests.e2e.test_repl_tmux import Tmux, _start_repl, daemon_home, wait_armed, wait_for

__all__ = ["daemon_home"]  # the fixture, imported for these tests

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


def _keys(tmux: Tmux, *keys: str) -> None:
    tmux("send-keys", "-t", "repl", *keys)


def test_confirmation_asks_in_the_pages_words(daemon_home: Path, tmp_path: Path) -> None:
    """R77: the REPL's confirmation opens with the one wording of every front-end
    (protocol/wording.confirm_title, "Allow run_command?"), not a REPL-only "Run …?"."""
    tmux = Tmux()
    try:
        _start_repl(tmux, daemon_home)
        _keys(tmux, f"run: touch {tmp_path / 'x'}", "Enter")
        wait_for(lambda: "Confirm tool call" in tmux.screen(), "the confirmation dialog")
        wait_armed(tmux)
        title = confirm_title("run_command")
        wait_for(lambda: title in tmux.screen(), repr(title))
        assert "Run run_command?" not in tmux.screen()
    finally:
        tmux("kill-server")
