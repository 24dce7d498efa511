"""End to end in a real terminal: the REPL's keys (issue 19).

``agentrio`` runs in tmux against a real daemon (the fixtures of
`tests.e2e.test_repl_tmux`): Esc in a confirmation or question opens the stop popup of
its task and never answers it (R47, R77); Alt+Enter and Ctrl+J make a message of
several lines while a lone Esc still clears the input; quitting with a task running
says it is kept and where (R43); the spinner counts the seconds; each dialog names its
keys; Esc with nothing to do says so; commands are echoed; Ctrl+R searches the input
history; a second Ctrl+C quits. Waits poll the screen; nothing is timed by sleeping.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from tests.e2e.test_repl_tmux import ROOT, Tmux, _start_repl, daemon_home, wait_armed, wait_for

__all__ = ["daemon_home"]  # the fixture, imported for these tests

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

POPUP = "Stop the running task"
EXITED = "REPL-EXITED 0"


def _keys(tmux: Tmux, *keys: str) -> None:
    tmux("send-keys", "-t", "repl", *keys)


def _approve_first_command(tmux: Tmux, command: str) -> None:
    _keys(tmux, command, "Enter")
    wait_for(lambda: "Confirm tool call" in tmux.screen(), "the confirmation dialog")
    wait_armed(tmux)
    _keys(tmux, "Enter")
    wait_for(lambda: "  → Approve (run_command)" in tmux.lines(), "the approval")


def test_esc_in_a_confirmation_opens_the_stop_popup_and_keep_running_returns(
    daemon_home: Path, tmp_path: Path
) -> None:
    """R47, R77: Esc in an armed confirmation opens Keep running / Stop, keep to
    resume / Stop and discard with its key hints and approves nothing; Keep running
    (and Esc in the popup) bring the same dialog back, armed; its Enter then approves."""
    target = tmp_path / "esc-touched"
    tmux = Tmux()
    try:
        _start_repl(tmux, daemon_home)
        _keys(tmux, f"run: touch {target}", "Enter")
        wait_for(lambda: "Confirm tool call" in tmux.screen(), "the confirmation dialog")
        wait_armed(tmux)
        wait_for(lambda: "Esc: stop menu" in tmux.screen(), "the dialog's key hints")
        _keys(tmux, "Escape")
        wait_for(lambda: POPUP in tmux.screen(), "the stop popup")
        wait_for(lambda: "1. Keep running" in tmux.screen(), "Keep running")
        wait_for(lambda: "3. Stop and discard" in tmux.screen(), "Stop and discard")
        wait_for(lambda: "Esc: Keep running" in tmux.screen(), "the popup's key hints")
        _keys(tmux, "1")
        wait_for(lambda: "Confirm tool call" in tmux.screen(), "the dialog back")
        wait_armed(tmux)
        _keys(tmux, "Escape")
        wait_for(lambda: POPUP in tmux.screen(), "the stop popup again")
        _keys(tmux, "Escape")
        wait_for(lambda: "Confirm tool call" in tmux.screen(), "the dialog back again")
        wait_armed(tmux)
        assert not any("→ Approve" in line for line in tmux.lines())
        assert not target.exists()
        _keys(tmux, "Enter")
        wait_for(lambda: "  → Approve (run_command)" in tmux.lines(), "the approval")
        wait_for(target.exists, "the approved command's file")
    finally:
        tmux("kill-server")


def test_esc_in_a_question_stops_and_keeps_the_task(daemon_home: Path) -> None:
    """R47, R41: Esc in a question form opens the stop popup (the form names its keys);
    Stop, keep to resume pauses the task without answering it."""
    tmux = Tmux()
    try:
        _start_repl(tmux, daemon_home)
        _keys(tmux, "ask: Which colour? | red, blue", "Enter")
        wait_for(lambda: "2. blue" in tmux.screen(), "the question form")
        wait_for(lambda: "Enter or 1–3 picks · Esc: stop menu" in tmux.screen(), "armed, hints")
        _keys(tmux, "Escape")
        wait_for(lambda: POPUP in tmux.screen(), "the stop popup")
        _keys(tmux, "2")  # Stop, keep to resume
        wait_for(
            lambda: "‖ paused — kept: resume it with /pending" in tmux.lines(), "the paused task"
        )
        assert not any(line.startswith("  → Which colour?") for line in tmux.lines())
    finally:
        tmux("kill-server")


def test_alt_enter_and_ctrl_j_make_several_lines_and_esc_still_clears(
    daemon_home: Path,
) -> None:
    """Issue 19: Alt+Enter (Esc, Enter) and Ctrl+J insert new lines; Enter sends the
    whole message, echoed whole; a lone Esc still clears the typed line."""
    tmux = Tmux()
    try:
        _start_repl(tmux, daemon_home)
        _keys(tmux, "-l", "first line")
        _keys(tmux, "M-Enter")
        _keys(tmux, "-l", "second line")
        _keys(tmux, "C-j")
        _keys(tmux, "-l", "third line")
        wait_for(lambda: "  third line" in tmux.lines(), "three lines in the input")
        _keys(tmux, "Enter")

        def echoed() -> bool:
            """The three lines in the scrollback, and the input line empty again (the
            input showed the same three lines before Enter)."""
            lines = tmux.lines()
            block = ["> first line", "  second line", "  third line"]
            sent = any(lines[i : i + 3] == block for i in range(len(lines)))
            return sent and ">" in lines

        wait_for(echoed, "the message echoed whole")

        # The reply's task must have ended: Esc while it runs opens the stop popup
        # instead (R47), which then closes with the task and leaves the line typed.
        def reply_done() -> bool:
            """The model's reply shown and no task counted in the toolbar."""
            lines = tmux.lines()
            replied = any(line.startswith("• fail: MESSAGE") for line in lines)
            return replied and not any("│" in line and " running" in line for line in lines)

        wait_for(reply_done, "the reply's task to end")
        _keys(tmux, "-l", "zzz-not-sent")
        wait_for(lambda: "> zzz-not-sent" in tmux.lines(), "the typed line")
        _keys(tmux, "Escape")
        wait_for(lambda: "zzz-not-sent" not in tmux.screen(), "Esc to clear the line")
    finally:
        tmux("kill-server")


def test_quit_with_a_task_running_says_where_it_waits(daemon_home: Path) -> None:
    """R43, issue 19: Ctrl+D while a task runs quits, first saying the task is kept in
    /pending and how to reopen its session; reopened so -- the printed command run as
    printed (issue 30) -- /pending lists it. The spinner counts the seconds the task
    has run."""
    tmux = Tmux()
    try:
        _start_repl(tmux, daemon_home)
        _approve_first_command(tmux, "run: sleep 30")
        wait_for(
            lambda: re.search(r"working… [2-9]s \(Esc or Ctrl\+C stops\)", tmux.screen()),
            "the spinner's elapsed seconds",
        )
        _keys(tmux, "C-d")
        wait_for(lambda: EXITED in tmux.lines(), "the REPL to exit")
        joined = tmux("capture-pane", "-p", "-J", "-t", "repl").splitlines()
        said = [ln for ln in joined if ln.startswith("‖ run: sleep 30 — stopped")]
        assert said, tmux.screen()
        match = re.search(
            r"kept: it waits in /pending; reopen with `(\S*agentrio) --session (cli-\S+)`",
            said[0],
        )
        assert match, said[0]
        printed, session = match.groups()
    finally:
        tmux("kill-server")
    # Issue 30: the printed command works as printed, in a shell whose PATH has no
    # agentrio (the venv is not activated): it names this install's script.
    assert printed == "agentrio" or Path(printed).is_absolute(), printed
    bare = "" if printed == "agentrio" else "PATH=/usr/bin:/bin "
    again = Tmux()
    try:
        command = (
            f"cd {ROOT} && {bare}AGENTRIO_HOME={daemon_home} {printed} "
            f"--session {session}; echo {EXITED.split()[0]} $?; sleep 60"
        )
        again("new-session", "-d", "-s", "repl", "-x", "120", "-y", "40", command)
        wait_for(lambda: f"session {session}" in again.screen(), "the session reopened")
        _keys(again, "/pending", "Enter")
        wait_for(
            lambda: any(ln.endswith("run: sleep 30") and "1." in ln for ln in again.lines()),
            "the kept task in /pending",
        )
    finally:
        again("kill-server")


def test_idle_esc_says_nothing_to_stop(daemon_home: Path) -> None:
    """R47, issue 19: Esc with no task, no legs and an empty line says so; the next key
    clears the hint."""
    tmux = Tmux()
    try:
        _start_repl(tmux, daemon_home)
        _keys(tmux, "Escape")
        wait_for(
            lambda: "nothing to stop: no task running, no background legs" in tmux.screen(),
            "the nothing-to-stop hint",
        )
        _keys(tmux, "-l", "x")
        wait_for(lambda: "nothing to stop" not in tmux.screen(), "the hint cleared by a key")
    finally:
        tmux("kill-server")


def test_slash_commands_are_echoed(daemon_home: Path) -> None:
    """Issue 19: a slash command is echoed (``> /session``) just above its output."""
    tmux = Tmux()
    try:
        _start_repl(tmux, daemon_home)
        _keys(tmux, "/session", "Enter")

        def echoed() -> bool:
            lines = tmux.lines()
            return any(
                ln.startswith("session cli-") and i and lines[i - 1] == "> /session"
                for i, ln in enumerate(lines)
            )

        wait_for(echoed, "> /session above its output")
    finally:
        tmux("kill-server")


def test_ctrl_r_searches_the_input_history(daemon_home: Path) -> None:
    """Issue 19: Ctrl+R opens a visible reverse search over earlier inputs; Enter takes
    the match into the line, Enter again runs it."""
    daemon_home.joinpath("repl_history").write_text(
        "\n# 2026-01-01 00:00:00\n+/session\n\n# 2026-01-01 00:00:01\n+/legs\n"
    )
    tmux = Tmux()
    try:
        _start_repl(tmux, daemon_home)
        _keys(tmux, "C-r")
        wait_for(lambda: "I-search backward:" in tmux.screen(), "the search line")
        _keys(tmux, "-l", "sess")
        wait_for(lambda: "> /session" in tmux.lines(), "the match shown in the input")
        _keys(tmux, "Enter")
        wait_for(lambda: "I-search backward:" not in tmux.screen(), "the search closed")
        _keys(tmux, "Enter")
        wait_for(lambda: any(ln.startswith("session cli-") for ln in tmux.lines()), "/session ran")
    finally:
        tmux("kill-server")


def test_a_second_ctrl_c_quits(daemon_home: Path) -> None:
    """Issue 19: Ctrl+C on an idle empty line asks for a second; the second quits."""
    tmux = Tmux()
    try:
        _start_repl(tmux, daemon_home)
        _keys(tmux, "C-c")
        wait_for(lambda: "press Ctrl+C again to quit" in tmux.screen(), "the quit hint")
        _keys(tmux, "C-c")
        wait_for(lambda: EXITED in tmux.lines(), "the REPL to exit")
    finally:
        tmux("kill-server")
