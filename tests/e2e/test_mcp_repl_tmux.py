"""An MCP server's elicitation answered from the REPL in tmux (issue 32 section 3).

The daemon runs the example server (examples/mcp_notes_server.py, written with the
``mcp`` SDK) and a scripted model whose turn calls its ``new_note``: the REPL's
``/mcp`` shows the server ready; the call's confirmation shows the server, the tool
and its argument; approved, the server asks for the note's title (elicitation),
which the REPL shows as a question; the title typed there is the one the server
saves the note under.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import tomli_w

from tests.e2e.test_repl_tmux import ROOT, Tmux, run_daemon, wait_armed, wait_for

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

NOTES_SERVER = ROOT / "examples" / "mcp_notes_server.py"


@pytest.fixture
def notes_home(tmp_path: Path) -> Iterator[Path]:
    home, notes = tmp_path / "home", tmp_path / "notes"
    home.mkdir()
    notes.mkdir()
    call = {"id": "c0", "name": "mcp__notes__new_note", "args": {"text": "milk"}}
    turns = [{"text": "", "tool_calls": [call]}, {"text": "noted"}]
    (tmp_path / "script.toml").write_text(tomli_w.dumps({"turns": turns}))
    config = {
        "model": {"provider": "scripted", "script": str(tmp_path / "script.toml")},
        "mcp": {"notes": {"command": sys.executable, "args": [str(NOTES_SERVER), str(notes)]}},
    }
    (home / "config.toml").write_text(tomli_w.dumps(config))
    yield from run_daemon(home)


def test_an_elicitation_is_answered_in_the_repl(notes_home: Path, tmp_path: Path) -> None:
    """Issue 32 §3: ``/mcp`` lists the server ready; the confirmation shows server, tool
    and argument; the server's question is answered in the window and the note is
    saved under the typed title."""
    tmux = Tmux()
    command = (
        f"cd {ROOT} && AGENTRIO_HOME={notes_home} {sys.executable} -m agentrio.repl; "
        "echo REPL-EXITED $?; sleep 60"
    )
    tmux("new-session", "-d", "-s", "repl", "-x", "120", "-y", "40", command)
    try:
        wait_for(lambda: "connected to agentrio daemon" in tmux.screen(), "REPL connected")
        for _ in range(100):  # the server starts in the background: ask until ready
            tmux("send-keys", "-t", "repl", "/mcp", "Enter")
            wait_for(lambda: "MCP servers:" in tmux.screen(), "the /mcp list")
            if "notes ready (stdio, pid" in tmux.screen():
                break
            tmux("send-keys", "-t", "repl", "C-l")
        wait_for(lambda: "notes ready (stdio, pid" in tmux.screen(), "the server ready")
        tmux("send-keys", "-t", "repl", "save it", "Enter")
        wait_for(lambda: "Confirm tool call" in tmux.screen(), "the confirmation dialog")
        for shown in ("server: notes", "tool: new_note", "arguments.text: milk"):
            wait_for(lambda shown=shown: shown in tmux.screen(), repr(shown))
        wait_armed(tmux)
        tmux("send-keys", "-t", "repl", "Enter")  # Approve
        question = "MCP server notes asks: What should the note be called?"
        wait_for(lambda: question in tmux.screen(), "the server's question")
        wait_for(lambda: "Enter answers" in tmux.screen(), "the question armed")
        tmux("send-keys", "-t", "repl", "-l", "groceries")
        tmux("send-keys", "-t", "repl", "Enter")
        wait_for(lambda: "saved groceries" in tmux.screen(), "the tool's result", 30)
        wait_for(lambda: "noted" in tmux.lines(), "the task's reply")
        assert (tmp_path / "notes" / "groceries.txt").read_text() == "milk"
        tmux("send-keys", "-t", "repl", "/quit", "Enter")
        wait_for(lambda: "REPL-EXITED 0" in tmux.lines(), "the REPL to exit")
    finally:
        tmux("kill-server")
