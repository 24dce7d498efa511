"""End to end in a real terminal: a running command's output, live and folded.

Issue 33 item 6: the output of a running foreground command shows while it runs (its
newest lines under the spinner, from the daemon's ``tool_output`` events), and once it
ends its result is folded with a fold line that names ``/expand``, which prints the
folded lines in full. The REPL runs in tmux against a real daemon.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.e2e.test_repl_tmux import Tmux, _start_repl, daemon_home, wait_armed, wait_for

__all__ = ["daemon_home"]  # the fixture, imported for these tests

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


def _keys(tmux: Tmux, *keys: str) -> None:
    tmux("send-keys", "-t", "repl", *keys)


def _history(tmux: Tmux) -> list[str]:
    """Every line of the pane, scrollback included (long output scrolls off screen)."""
    return [x.rstrip() for x in tmux("capture-pane", "-p", "-S", "-", "-t", "repl").split("\n")]


def _approve(tmux: Tmux, command: str) -> None:
    _keys(tmux, f"run: {command}", "Enter")
    wait_for(lambda: "Confirm tool call" in tmux.screen(), "the confirmation")
    wait_armed(tmux)
    _keys(tmux, "Enter")
    wait_for(lambda: "  → Approve (run_command)" in _history(tmux), "the approval")


def test_a_running_commands_output_shows_before_it_ends(daemon_home: Path) -> None:
    """Issue 33 item 6: a 4-second loop printing a line a second shows its first line
    on screen while it still runs (no result yet); the result then prints every line."""
    tmux = Tmux()
    try:
        _start_repl(tmux, daemon_home)
        _approve(tmux, "for i in 1 2 3 4; do echo tick-$i; sleep 1; done")

        def first_line_live() -> bool:
            lines = tmux.lines()
            return "  ┊ tick-1" in lines and not any("✓ run_command" in x for x in lines)

        wait_for(first_line_live, "the first line while the loop runs")
        wait_for(lambda: "  ✓ run_command" in tmux.lines(), "the result")
        wait_for(lambda: "    tick-4" in tmux.lines(), "the last line in the result")
        wait_for(lambda: "┊" not in tmux.screen(), "the live lines gone with the result")
    finally:
        tmux("kill-server")


def test_a_fold_names_expand_and_expand_prints_it_whole(daemon_home: Path) -> None:
    """Issue 33 item 6: 30 lines of output show their first lines and a fold line that
    names /expand; /expand prints all 30."""
    tmux = Tmux()
    try:
        _start_repl(tmux, daemon_home)
        _keys(tmux, "/expand", "Enter")
        wait_for(lambda: "nothing folded yet" in tmux.screen(), "nothing to expand yet")
        _approve(tmux, "seq 101 130")
        fold = "    … 23 more lines (folded: /expand shows them)"
        wait_for(lambda: fold in tmux.lines(), "the fold line")
        assert "    130" not in tmux.lines()
        _keys(tmux, "/expand", "Enter")
        wait_for(lambda: "    130" in tmux.lines(), "the folded lines in full")
        lines = [
            x.rstrip() for x in tmux("capture-pane", "-p", "-S", "-", "-t", "repl").split("\n")
        ]
        start = lines.index("> /expand", lines.index(fold))
        whole = ["    exit 0", *(f"    {n}" for n in range(101, 131))]
        assert lines[start + 1 : start + 32] == whole
    finally:
        tmux("kill-server")
