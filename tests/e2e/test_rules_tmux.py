"""The argv-prefix rule chosen in the REPL's confirmation, in a real terminal (issue 32
section 4, R92).

``agentrio`` runs in tmux against a real daemon (the fixtures of
`tests.e2e.test_repl_tmux`, whose home sets no read-only programs, so every command
asks). The daemon works in the repository root: that is the real directory every
command here runs in and the rule covers. Waits poll the screen; nothing is timed by
sleeping.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from agentrio.protocol.wording import offer_label
from tests.e2e.test_repl_tmux import ROOT, Tmux, _start_repl, daemon_home, wait_armed, wait_for

__all__ = ["daemon_home"]  # the fixture, imported for these tests

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


def _keys(tmux: Tmux, *keys: str) -> None:
    tmux("send-keys", "-t", "repl", *keys)


def _joined(tmux: Tmux) -> str:
    """The screen with wrapped lines joined (a long path wraps at the terminal's width)."""
    return tmux.screen().replace("\n", "")


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()


def test_the_prefix_rule_is_a_choice_of_its_own(daemon_home: Path, tmp_path: Path) -> None:
    """R92: ``git rev-parse HEAD``'s confirmation offers, after the six fixed choices,
    "Always allow `git rev-parse …` in <the real directory> (…)"; chosen, it runs;
    ``git rev-parse --short=12 HEAD`` then runs unasked (its output shows, no dialog);
    ``/allowed`` lists the rule; a chained ``git rev-parse HEAD; touch BAD`` still asks
    (with no prefix offered) and, denied, runs nothing."""
    bad = tmp_path / "bad"
    where = os.path.realpath(ROOT)
    covers = f"`git rev-parse …` in {where} (any further arguments that name no path outside it)"
    label = offer_label(covers)
    full, short = _git("rev-parse", "HEAD"), _git("rev-parse", "--short=12", "HEAD")
    tmux = Tmux()
    try:
        _start_repl(tmux, daemon_home)
        _keys(tmux, "run: git rev-parse HEAD", "Enter")
        wait_for(lambda: f"7. {label}" in _joined(tmux), "the offered rule, seventh")
        assert "6. Stop, keep to resume" in tmux.screen()  # the fixed six keep their numbers
        wait_armed(tmux)
        _keys(tmux, "7")
        wait_for(lambda: "Confirm tool call" not in tmux.screen(), "the dialog to close")
        wait_for(lambda: f"→ {label}" in _joined(tmux), "the choice in the transcript")
        wait_for(lambda: full in tmux.screen(), "the approved command's output")
        # (typed while a task runs, the next line would steer it: wait for its end)
        wait_for(lambda: "git rev-parse HEAD finished" in tmux.screen(), "the first task's end")

        _keys(tmux, "run: git rev-parse --short=12 HEAD", "Enter")
        wait_for(lambda: f"{short}\n" in tmux.screen() + "\n", "the covered command's output")
        assert "Confirm tool call" not in tmux.screen()
        wait_for(lambda: "--short=12 HEAD finished" in _joined(tmux), "the second task's end")

        _keys(tmux, "/allowed", "Enter")
        wait_for(lambda: f"1. {covers}" in _joined(tmux), "the rule listed")

        _keys(tmux, f"run: git rev-parse HEAD; touch {bad}", "Enter")
        wait_for(lambda: "Confirm tool call" in tmux.screen(), "the chained command's dialog")
        wait_armed(tmux)
        assert "7. " not in tmux.screen()  # not a simple command: no prefix offered
        _keys(tmux, "2")
        wait_for(lambda: "reason (Enter sends" in tmux.screen(), "the reason field")
        _keys(tmux, "no", "Enter")
        wait_for(lambda: "Confirm tool call" not in tmux.screen(), "the denied dialog to close")
        wait_for(lambda: "→ Deny with reason: no" in tmux.screen(), "the denial")
    finally:
        tmux("kill-server")
    assert not bad.exists()
