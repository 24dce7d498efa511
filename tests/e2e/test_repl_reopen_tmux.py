"""End to end in a real terminal: work left by a closed REPL is found by the next one
(issue 17 items 2 and 6; R13, R41, R42, R43).

Each REPL start is a new ``cli-`` session. A REPL closed while a question is open, or
left after a pause, leaves a kept task; the next REPL says at start how many tasks
wait, ``/pending`` lists them with their session and age, and ``/pending N`` resumes
one in that session — a kept question is asked again inline, in the new window.
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import pytest

from tests.e2e.test_repl_tmux import ROOT, Tmux, _start_repl, daemon_home, wait_armed, wait_for

__all__ = ["daemon_home"]  # the fixture, imported for these tests

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

WAITING = "1 paused task waits in your cli- sessions"
LISTED = re.compile(r"1\. [0-9a-f]{8}  cli-[0-9a-f]+  \d+[smhd] ago  ")


def _reopen(home: Path) -> Tmux:
    tmux = Tmux()
    _start_repl(tmux, home)
    wait_for(lambda: WAITING in tmux.screen(), "the count of waiting tasks at start")
    return tmux


def test_question_open_when_the_repl_closes_is_asked_in_the_next_one(daemon_home: Path) -> None:
    """R13, R42, R43, issue 17 items 2 and 6: close the REPL with a question form open;
    the next REPL lists the task with its question and asks it again on resume."""
    first = Tmux()
    try:
        _start_repl(first, daemon_home)
        first("send-keys", "-t", "repl", "ask: Which colour? | red, blue", "Enter")
        wait_for(lambda: "Which colour?" in first.screen(), "the question form")
    finally:
        first("kill-server")  # the terminal closes with the form open
    second = _reopen(daemon_home)
    try:
        second("send-keys", "-t", "repl", "/pending", "Enter")
        wait_for(
            lambda: any(
                LISTED.search(ln) and "ask: Which colour?" in ln and "[question]" in ln
                for ln in second.lines()
            ),
            "the kept task with its session, age and question",
        )
        second("send-keys", "-t", "repl", "/pending 1", "Enter")
        wait_for(lambda: "continuing in session cli-" in second.screen(), "the session switch")
        wait_for(lambda: "2. blue" in second.screen(), "the question asked again")
        wait_armed(second)
        second("send-keys", "-t", "repl", "2")  # blue
        wait_for(lambda: "Resumed with your answers:" in second.screen(), "the answered resume")
        wait_for(lambda: "A: blue" in second.screen(), "the answer given")
        assert "A: blue" in second.screen()
    finally:
        second("kill-server")


def test_paused_task_is_found_after_reopening_the_repl(daemon_home: Path) -> None:
    """R41, R42, issue 17 item 6: pause a task, leave the REPL with /quit, open a new
    one: it says a task waits, /pending lists it with its session, /pending 1 resumes
    it in that session."""
    first = Tmux()
    try:
        _start_repl(first, daemon_home)
        first("send-keys", "-t", "repl", "run: sleep 30", "Enter")
        wait_for(lambda: "Confirm tool call" in first.screen(), "the confirmation dialog")
        wait_armed(first)
        first("send-keys", "-t", "repl", "Enter")
        wait_for(lambda: "  → Approve (run_command)" in first.lines(), "the approval")
        first("send-keys", "-t", "repl", "Escape")
        wait_for(lambda: "2. Stop, keep to resume" in first.screen(), "the Pause choice")
        first("send-keys", "-t", "repl", "2")
        wait_for(lambda: "‖ paused — kept" in first.screen(), "the paused task")
        first("send-keys", "-t", "repl", "/quit", "Enter")
        wait_for(lambda: "REPL-EXITED 0" in first.lines(), "the REPL to exit")
    finally:
        first("kill-server")
    second = _reopen(daemon_home)
    try:
        second("send-keys", "-t", "repl", "/pending", "Enter")
        wait_for(
            lambda: any(
                LISTED.search(ln) and ln.endswith("run: sleep 30") for ln in second.lines()
            ),
            "the paused task with its session and age",
        )
        second("send-keys", "-t", "repl", "/pending 1", "Enter")
        wait_for(lambda: "continuing in session cli-" in second.screen(), "the session switch")
        wait_for(lambda: "Recovered the interrupted task" in second.screen(), "the resumed run")
        wait_for(lambda: "Confirm tool call" in second.screen(), "the re-run's confirmation")
        wait_armed(second)
        second("send-keys", "-t", "repl", "5")  # Stop and discard
        wait_for(lambda: "✗ stopped and discarded" in second.lines(), "the canceled task")
        second("send-keys", "-t", "repl", "/pending", "Enter")
        wait_for(
            lambda: "no pending tasks in your cli- sessions" in second.lines(), "an empty list"
        )
        assert "no pending tasks in your cli- sessions" in second.lines()
    finally:
        second("kill-server")


def test_a_leg_ending_after_reopening_the_session_is_shown(daemon_home: Path) -> None:
    """Issue 33 item 4, R26: a background leg started in one REPL ends after that REPL
    closed and ``agentrio --session cli-…`` reopened its session: the new REPL shows the
    leg's end and the follow-up's answer, and its status bar stops counting the leg."""
    flag = daemon_home.parent / "end-the-leg"  # the leg ends once the test makes it
    first = Tmux()
    try:
        _start_repl(first, daemon_home)
        session = re.search(r"session (cli-[0-9a-f]+)", first.screen())
        assert session is not None
        first("send-keys", "-t", "repl", f"bg: until [ -e {flag} ]; do sleep 0.1; done", "Enter")
        wait_for(lambda: "Confirm tool call" in first.screen(), "the confirmation dialog")
        wait_armed(first)
        first("send-keys", "-t", "repl", "Enter")
        wait_for(lambda: "legs 1" in first.screen(), "the leg running")
        first("send-keys", "-t", "repl", "/quit", "Enter")
        wait_for(lambda: "REPL-EXITED 0" in first.screen(), "the first REPL to exit")
    finally:
        first("kill-server")
    second = Tmux()
    command = (
        f"cd {ROOT} && AGENTRIO_HOME={daemon_home} {sys.executable} -m agentrio.repl "
        f"--session {session[1]}; echo REPL-EXITED $?; sleep 60"
    )
    second("new-session", "-d", "-s", "repl", "-x", "120", "-y", "40", command)
    try:
        wait_for(lambda: f"session {session[1]}" in second.screen(), "the reopened session")
        wait_for(lambda: "legs 1" in second.screen(), "the leg counted")
        flag.touch()
        wait_for(lambda: "finished" in second.screen() and "⧗ background" in second.screen(),
                 "the leg's end", deadline_s=30)  # fmt: skip
        wait_for(lambda: "The background work for" in second.screen(), "the follow-up")
        wait_for(lambda: "legs 1" not in second.screen(), "the status bar's count")
    finally:
        second("kill-server")
