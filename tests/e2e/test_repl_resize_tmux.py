"""End to end in a real terminal: resizing it while a dialog is open leaves nothing of
the dialog behind (issue 33 item 7).

tmux re-wraps its lines when a window is narrowed: each of a dialog's full-width rows
becomes two, and prompt_toolkit's erase (up by the cursor's row, then down) used to
miss the rows above the cursor — the dialog's top border, its title — which then
stayed in the scrollback. The REPL runs in tmux against a real daemon, in a fresh
terminal (empty rows under the dialog, the case where the re-wrapped rows left the
screen) and after the screen filled; the window is narrowed several times (once with
the REPL stopped across two narrowings, so that it meets the re-wrap of both at once)
and widened again. After each step the whole pane, scrollback included
(``capture-pane -S -``), holds exactly one dialog, drawn at the new width, and not one
box-drawing character above it; then the dialog still works: the approved command
runs (its file is on disk) and the answers typed reach the model.

Waits poll the pane (`wait_for`); nothing is timed.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections.abc import Iterable
from pathlib import Path

import pytest

from tests.e2e.test_repl_tmux import (
    Tmux,
    _start_repl,
    daemon_home,
    wait_armed,
    wait_for,
    wait_task_ended,
)

__all__ = ["daemon_home"]  # the fixture, imported for these tests

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

#: The characters a dialog's frame and command view are drawn with.
BORDER = frozenset("┌┐└┘─│┆")
#: A free-text question's hint once it takes keys (R77).
ANSWER_ARMED = "Enter answers"


def _keys(tmux: Tmux, *keys: str) -> None:
    tmux("send-keys", "-t", "repl", *keys)


def _pane(tmux: Tmux) -> list[str]:
    """Every line of the pane, scrollback included, without trailing blanks."""
    out = tmux("capture-pane", "-p", "-S", "-", "-t", "repl")
    return [line.rstrip() for line in out.splitlines()]


def _one_dialog(tmux: Tmux, title: str, width: int) -> bool:
    """The pane holds one dialog, ``title``, drawn ``width`` wide, followed only by the
    input line and the toolbar; above it nothing but the transcript: no piece of a
    border, no earlier toolbar."""
    lines = _pane(tmux)
    tops = [i for i, line in enumerate(lines) if line.startswith("┌")]
    bottoms = [i for i, line in enumerate(lines) if line.startswith("└")]
    if len(tops) != 1 or len(bottoms) != 1 or bottoms[0] < tops[0]:
        return False
    top, bottom = tops[0], bottoms[0]
    if len(lines[top]) != width or title not in lines[top] or len(lines[bottom]) != width:
        return False
    if not all(line.startswith("│") and len(line) == width for line in lines[top + 1 : bottom]):
        return False
    if any(char in BORDER for line in lines[:top] for char in line):
        return False
    rest = [line for line in lines[bottom + 1 :] if line]
    return len(rest) == 2 and rest[0] == ">" and "● connected" in rest[1]


def _wait_one_dialog(tmux: Tmux, title: str, width: int) -> None:
    """Wait for `_one_dialog`; on a timeout the whole pane is shown, scrollback too."""
    try:
        wait_for(lambda: _one_dialog(tmux, title, width), f"one dialog, {width} wide")
    except AssertionError as error:
        pane = "\n".join(_pane(tmux))
        raise AssertionError(f"{error}\nthe whole pane:\n{pane}") from None


def _resize(tmux: Tmux, title: str, widths: Iterable[int]) -> None:
    """Resize the window to each width in turn; after each, wait for the one dialog
    redrawn at that width and nothing of it left behind."""
    for width in widths:
        tmux("resize-window", "-t", "repl", "-x", str(width))
        _wait_one_dialog(tmux, title, width)


def _repl_pid(tmux: Tmux) -> int:
    """The REPL's process: the child of the pane's shell."""
    shell = tmux("display", "-p", "-t", "repl", "#{pane_pid}").strip()
    found = subprocess.run(["pgrep", "-P", shell], capture_output=True, text=True, check=True)
    (pid,) = found.stdout.split()
    return int(pid)


def _resize_stopped(tmux: Tmux, title: str, widths: list[int]) -> None:
    """Resize to each width while the REPL is stopped (tmux re-wraps at each; the REPL
    sees only the last, as a loaded machine may), then let it run and wait as above."""
    pid = _repl_pid(tmux)
    os.kill(pid, signal.SIGSTOP)
    try:
        for width in widths:
            tmux("resize-window", "-t", "repl", "-x", str(width))
    finally:
        os.kill(pid, signal.SIGCONT)
    _wait_one_dialog(tmux, title, widths[-1])


def test_resizing_during_a_confirmation_leaves_no_border_behind(
    daemon_home: Path, tmp_path: Path
) -> None:
    """Issue 33 item 7, R77: in a fresh terminal, a confirmation survives four
    narrowings (120 → 104 → 90 → 76 → 64 columns), two more with the REPL stopped, and
    a widening back to 120 with one dialog in the whole pane and no border piece above
    it; Approve then runs the command: its file is on disk."""
    made = tmp_path / "resized-ok"
    tmux = Tmux()
    try:
        _start_repl(tmux, daemon_home)
        _keys(tmux, f"run: touch {made}", "Enter")
        wait_for(lambda: "Confirm tool call" in tmux.screen(), "the confirmation")
        wait_armed(tmux)
        _resize(tmux, "Confirm tool call", [104, 90, 76, 64])
        _resize_stopped(tmux, "Confirm tool call", [120, 100, 80])
        _resize(tmux, "Confirm tool call", [120])
        assert not made.exists()
        wait_armed(tmux)
        _keys(tmux, "1")  # Approve
        wait_for(made.exists, "the approved command's file on disk")
        wait_for(lambda: "  → Approve (run_command)" in _pane(tmux), "the approval")
        wait_task_ended(tmux)
        lines = [line for line in _pane(tmux) if line]
        assert lines[-1].startswith(" cli-"), "\n".join(lines)  # the toolbar, last
        assert not any(char in BORDER for line in lines[:-1] for char in line), "\n".join(lines)
    finally:
        tmux("kill-server")


def test_resizing_during_a_question_form_leaves_no_border_behind(daemon_home: Path) -> None:
    """Issue 33 item 7, R10, R77: with the screen filled, a form of two questions is
    resized at each (narrowed while typing a free-text answer, with the REPL stopped
    across two narrowings, then widened; the second narrowed and widened), always one
    dialog in the whole pane and no border piece above it; the typed text shows where
    typing goes (a drawn cursor after it, the terminal's own resting at the area's
    first cell) and the answers reach the model."""
    tmux = Tmux()
    try:
        _start_repl(tmux, daemon_home)
        for _ in range(8):  # fill the screen: the area sits at its bottom
            _keys(tmux, "/session", "Enter")
        wait_for(lambda: _pane(tmux).count("> /session") == 8, "eight /session listings")
        wait_for(lambda: ">" in tmux.lines(), "the input line")
        _keys(tmux, "ask: Your name? ;; Which colour? | red, blue", "Enter")
        wait_for(lambda: "(1/2) Your name?" in tmux.screen(), "the first question")
        wait_for(lambda: ANSWER_ARMED in tmux.screen(), "the form armed")
        _keys(tmux, "-l", "Ad")
        wait_for(lambda: "│> Ad" in tmux.screen(), "the typed text in the form")
        ansi = tmux("capture-pane", "-e", "-p", "-t", "repl")
        assert "> Ad\x1b[7m \x1b[0m" in ansi, "the drawn cursor after the typed text"
        _resize(tmux, "| Question |", [100])
        _resize_stopped(tmux, "| Question |", [86, 70])
        _resize(tmux, "| Question |", [120])
        wait_for(lambda: ANSWER_ARMED in tmux.screen(), "the form still armed")
        _keys(tmux, "-l", "a")
        _keys(tmux, "Enter")
        wait_for(lambda: "(2/2) Which colour?" in tmux.screen(), "the second question")
        wait_armed(tmux)
        _resize(tmux, "| Question |", [90, 120])
        wait_armed(tmux)
        _keys(tmux, "2")
        wait_for(lambda: "    A: Ada" in _pane(tmux), "the typed answer the model received")
        wait_for(lambda: "    A: blue" in _pane(tmux), "the chosen answer the model received")
        wait_task_ended(tmux)
    finally:
        tmux("kill-server")
