"""End to end in a real terminal: the REPL works where it was opened, and a session
reopened after a daemon restart shows where its conversation stood (issue 31 items 1
and 3; R86: a session's working directory; R87: the session is a conversation).

The REPL is opened in a project directory (not the checkout, not the daemon's); the
built-in offline model runs ``pwd`` there (the home asks for every command, so the
confirmation names the directory too), then ``cd sub`` moves the session. The daemon
is stopped and started again; ``agentrio --session ID`` prints the session's earlier
exchanges before the prompt.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

import pytest

from agentrio.testing import DaemonProcess
from tests.e2e.test_repl_tmux import ROOT, Tmux, wait_armed, wait_for

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

SESSION_LINE = re.compile(r"session (cli-[0-9a-zA-Z_-]+) · /help")


def _open_repl(tmux: Tmux, home: Path, where: Path, *args: str) -> None:
    command = (
        f"cd {where} && PYTHONPATH={ROOT} AGENTRIO_HOME={home} {sys.executable} "
        f"-m agentrio.repl {' '.join(args)}; echo REPL-EXITED $?; sleep 60"
    )
    tmux("new-session", "-d", "-s", "repl", "-x", "140", "-y", "45", command)
    wait_for(lambda: "connected to agentrio daemon" in tmux.screen(), "REPL connected")


def _approve(tmux: Tmux, what: str) -> None:
    wait_for(lambda: "Confirm tool call" in tmux.screen(), f"the confirmation of {what}")
    wait_armed(tmux)
    tmux("send-keys", "-t", "repl", "Enter")
    wait_for(lambda: "  → Approve (run_command)" in tmux.lines(), f"the approval of {what}")


def test_the_repl_runs_where_it_was_opened_and_reopens_after_a_restart(
    tmp_path: Path,
) -> None:
    """R86, R87, issue 31 (1, 3): opened in a project directory the REPL's ``pwd`` runs
    there (the confirmation says so) and ``cd sub`` moves the session (shown, and the
    status bar follows); after a daemon restart ``--session`` prints the two earlier
    exchanges, what was typed and the replies, before anything new."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text("[tools]\nreadonly_commands = []\n")
    project = Path(os.path.realpath(tmp_path / "project"))
    (project / "sub").mkdir(parents=True)
    daemon = DaemonProcess(home, cwd=ROOT)  # the daemon's own directory is elsewhere
    tmux = Tmux()
    try:
        _open_repl(tmux, home, project)
        found = SESSION_LINE.search(tmux.screen().replace("\n", ""))
        assert found is not None, tmux.screen()
        session = found.group(1)
        tmux("send-keys", "-t", "repl", "run: pwd", "Enter")
        wait_for(lambda: f"cwd: {project}" in tmux.screen(), "the confirmation's directory")
        _approve(tmux, "pwd")
        wait_for(lambda: str(project) in tmux.lines(), "pwd's output: the project")
        tmux("send-keys", "-t", "repl", "run: cd sub", "Enter")
        wait_for(lambda: f"→ working directory: {project}/sub" in tmux.screen(), "the cd shown")
        wait_for(
            lambda: [ln for ln in tmux.lines() if ln][-1].endswith("/project/sub"),
            "the status bar's directory",
        )
    finally:
        tmux("kill-server")
        assert daemon.stop() == 0
    again = DaemonProcess(home, cwd=ROOT)
    tmux = Tmux()
    try:
        _open_repl(tmux, home, project, "--session", session)
        wait_for(lambda: "earlier in this session" in tmux.screen(), "the earlier exchanges")
        lines = tmux.lines()
        start = lines.index("earlier in this session (the last 2 exchanges; /history for more):")
        earlier = lines[start : lines.index("— now —")]
        assert earlier[1] == "> run: pwd"
        assert any(str(project) in line for line in earlier[2:]), earlier
        assert "> run: cd sub" in earlier
        assert any(f"{project}/sub" in line for line in earlier), earlier
    finally:
        tmux("kill-server")
        assert again.stop() == 0
