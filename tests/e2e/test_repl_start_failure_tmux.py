"""Issue 30, in a real terminal: when the daemon the REPL starts cannot start, the REPL
shows the daemon's own one-line reason and its toolbar says there is no daemon -- not
"the daemon exited; see its log" and "connecting" forever. Then, the mistake fixed, the
REPL starts one by itself and connects.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from tests.e2e.test_repl_tmux import ROOT, Tmux, pytestmark, wait_for

__all__ = ["pytestmark"]


def test_the_repl_shows_why_its_daemon_could_not_start(tmp_path: Path) -> None:
    """Issue 30: ``provider = "openai"`` without ``name`` in the home's config.toml: the
    REPL prints the daemon's line (file, line, key) and ``✕ no daemon``; fixed, the
    REPL's next start attempt connects."""
    home = tmp_path / "home"
    home.mkdir()
    config = home / "config.toml"
    config.write_text('[model]\nprovider = "openai"\n')
    tmux = Tmux()
    command = (
        f"cd {ROOT} && AGENTRIO_HOME={home} {sys.executable} -m agentrio.repl; "
        "echo REPL-EXITED $?; sleep 60"
    )
    tmux("new-session", "-d", "-s", "repl", "-x", "200", "-y", "40", command)
    try:
        reason = (
            f"the daemon could not start: {config}:2: model.name: required with "
            'provider = "openai" (the model to call)'
        )
        wait_for(
            lambda: reason in tmux("capture-pane", "-p", "-J", "-t", "repl"),
            "the daemon's reason",
            deadline_s=30,
        )
        wait_for(lambda: "✕ no daemon (see above)" in tmux.screen(), "the toolbar's no daemon")
        assert "○ connecting" not in tmux.screen()
        config.write_text("")
        wait_for(
            lambda: re.search(r"connected to agentrio daemon \S+ at http", tmux.screen()),
            "the REPL to start a daemon and connect once the config is fixed",
            deadline_s=60,
        )
        wait_for(lambda: "● connected" in tmux.screen(), "the toolbar's connected")
        tmux("send-keys", "-t", "repl", "/quit", "Enter")
        wait_for(lambda: "REPL-EXITED 0" in tmux.lines(), "the REPL to exit")
    finally:
        tmux("kill-server")
        from agentrio.repl.control import main as control

        control(["stop", "--home", str(home)])
