"""End to end in a real terminal: ``agentrio`` in tmux against a real daemon.

SPEC §11, R5, R42, R77: the REPL connects to a daemon started with ``--port 0`` in a fresh
home, runs ``run: echo hello``, shows the confirmation dialog (the read-only allowlist
is emptied so the call needs one), approves it with Enter once the dialog is armed
(R77) and prints ``hello``.
Skipped only when tmux is not installed (CI installs it). Waits poll the screen for what
must appear, with generous deadlines: they bound a failure, they do not time anything.
Nothing is asserted on a single capture: prompt_toolkit redraws the live area (the
spinner, lines printed above it), and a capture can land between erase and redraw.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


#: The terminal of the running test, shown when a wait times out.
_SCREEN: list[Callable[[], str]] = []


def wait_for(
    condition: Callable[[], bool], what: str, deadline_s: float = 20.0, every_s: float = 0.05
) -> None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if condition():
            return
        time.sleep(every_s)
    screen = _SCREEN[-1]() if _SCREEN else ""
    raise AssertionError(f"timed out waiting for {what}; the screen:\n{screen}")


#: Shown by a confirmation once it takes keys (R77: it ignores them for ~0.4 s).
ARMED = "↑↓ choose"


def wait_armed(tmux: Tmux) -> None:
    """Wait until the dialog on screen is armed: keys sent before would go to the
    input line (R77). It waits for the armed hint to be drawn, never for the arming
    hint to be gone: a capture taken while the live area is redrawn (lines printed
    above it, a loaded machine) lacks both, and a key sent then went to the input line
    (issue 33 item 10)."""
    wait_for(lambda: ARMED in tmux.screen(), "the dialog to be armed")


def wait_task_ended(tmux: Tmux) -> None:
    """Wait until the toolbar (the last line) counts no running task: a line typed
    while a task still runs steers it, although its reply may be on screen already."""
    wait_for(lambda: "running" not in (tmux.lines() or [""])[-1], "the task's end")


def healthy(home: Path) -> bool:
    try:
        info = json.loads((home / "daemon.json").read_text())
        url = f"http://{info['host']}:{info['port']}/v1/health"
        with urllib.request.urlopen(url, timeout=1) as response:
            return bool(json.load(response)["ok"])
    except (OSError, ValueError, KeyError):
        return False


@pytest.fixture
def daemon_home(tmp_path: Path) -> Iterator[Path]:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text("[tools]\nreadonly_commands = []\n")
    yield from run_daemon(home)


def run_daemon(home: Path) -> Iterator[Path]:
    """A real daemon on a free port for ``home`` (its config.toml written), yielded
    once healthy and stopped with SIGTERM (killed past 10 s) when the test ends."""
    env = {**os.environ, "AGENTRIO_HOME": str(home), "NO_PROXY": "127.0.0.1,localhost"}
    daemon = subprocess.Popen(
        [sys.executable, "-m", "agentrio.engine", "daemon", "--port", "0"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: healthy(home) or daemon.poll() is not None, "daemon health")
        assert daemon.poll() is None, (home / "daemon.log").read_text()
        yield home
    finally:
        daemon.send_signal(signal.SIGTERM)
        try:
            daemon.wait(timeout=10)
        except subprocess.TimeoutExpired:
            daemon.kill()
            daemon.wait()


class Tmux:
    def __init__(self) -> None:
        self.socket = "agentrio-test-" + secrets.token_hex(4)
        _SCREEN[:] = [self.screen]

    def __call__(self, *args: str) -> str:
        done = subprocess.run(
            ["tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=10
        )
        return done.stdout

    def screen(self) -> str:
        return self("capture-pane", "-p", "-t", "repl")

    def lines(self) -> list[str]:
        return [line.rstrip() for line in self.screen().splitlines()]


def test_run_echo_approve_in_dialog(daemon_home: Path) -> None:
    """SPEC §11, R5: type `run: echo hello`, approve in the dialog, see hello."""
    tmux = Tmux()
    command = (
        f"cd {ROOT} && AGENTRIO_HOME={daemon_home} {sys.executable} -m agentrio.repl; "
        "echo REPL-EXITED $?; sleep 60"
    )
    tmux("new-session", "-d", "-s", "repl", "-x", "120", "-y", "40", command)
    try:
        wait_for(lambda: "connected to agentrio daemon" in tmux.screen(), "REPL connected")
        tmux("send-keys", "-t", "repl", "run: echo hello", "Enter")
        wait_for(lambda: "Confirm tool call" in tmux.screen(), "the confirmation dialog")
        wait_armed(tmux)
        wait_for(lambda: "1. Approve" in tmux.screen(), "the Approve choice")
        wait_for(lambda: "6. Stop, keep to resume" in tmux.screen(), "the keep-to-resume choice")
        tmux("send-keys", "-t", "repl", "Enter")
        wait_for(lambda: "    hello" in tmux.lines(), "hello in the tool result")
        for line in ("> run: echo hello", "  → Approve (run_command)", "  ✓ run_command"):
            wait_for(lambda line=line: line in tmux.lines(), repr(line))
        wait_for(lambda: "Confirm tool call" not in tmux.screen(), "the dialog to close")
        tmux("send-keys", "-t", "repl", "/quit", "Enter")
        wait_for(lambda: "REPL-EXITED 0" in tmux.lines(), "the REPL to exit with status 0")
        history = (daemon_home / "repl_history").read_text()
        assert "run: echo hello" in history
        # Issue 33 item 9: owner-only, like every file of the home.
        assert stat.S_IMODE((daemon_home / "repl_history").stat().st_mode) == 0o600
    finally:
        tmux("kill-server")


def _start_repl(tmux: Tmux, home: Path) -> None:
    command = (
        f"cd {ROOT} && AGENTRIO_HOME={home} {sys.executable} -m agentrio.repl; "
        "echo REPL-EXITED $?; sleep 60"
    )
    tmux("new-session", "-d", "-s", "repl", "-x", "120", "-y", "40", command)
    wait_for(lambda: "connected to agentrio daemon" in tmux.screen(), "REPL connected")


def test_esc_pause_then_resume_from_pending(daemon_home: Path) -> None:
    """R47, R41, R42: Esc on a running task opens the stop menu; "Stop, keep to resume"
    keeps it; /pending lists it and /pending 1 resumes it in the same window."""
    tmux = Tmux()
    try:
        _start_repl(tmux, daemon_home)
        tmux("send-keys", "-t", "repl", "run: sleep 30", "Enter")
        wait_for(lambda: "Confirm tool call" in tmux.screen(), "the confirmation dialog")
        wait_armed(tmux)
        tmux("send-keys", "-t", "repl", "Enter")
        wait_for(lambda: "  → Approve (run_command)" in tmux.lines(), "the approval")
        tmux("send-keys", "-t", "repl", "Escape")
        wait_for(lambda: "Stop the running task" in tmux.screen(), "the cancel popup")
        wait_for(lambda: "2. Stop, keep to resume" in tmux.screen(), "the Pause choice")
        tmux("send-keys", "-t", "repl", "2")
        wait_for(
            lambda: "‖ paused — kept: resume it with /pending" in tmux.lines(),
            "the paused task",
        )
        tmux("send-keys", "-t", "repl", "/pending", "Enter")
        wait_for(
            lambda: any(line.endswith("run: sleep 30") and "1." in line for line in tmux.lines()),
            "the task in /pending",
        )
        tmux("send-keys", "-t", "repl", "/pending 1", "Enter")
        wait_for(lambda: "Recovered the interrupted task" in tmux.screen(), "the resumed run")
        wait_for(lambda: "Confirm tool call" in tmux.screen(), "the re-run's confirmation")
        wait_armed(tmux)
        tmux("send-keys", "-t", "repl", "5")  # Stop and discard
        wait_for(lambda: "✗ stopped and discarded" in tmux.lines(), "the canceled task")
        tmux("send-keys", "-t", "repl", "/pending", "Enter")
        wait_for(lambda: "no pending tasks in your cli- sessions" in tmux.lines(), "an empty list")
    finally:
        tmux("kill-server")


def test_esc_opens_the_leg_menu_and_cancels_a_leg(daemon_home: Path) -> None:
    """R47, R44: with a leg running and nothing else to do, Esc opens the background
    menu (No, the leg), then a confirmation; Yes cancels the leg."""
    tmux = Tmux()
    try:
        _start_repl(tmux, daemon_home)
        tmux("send-keys", "-t", "repl", "bg: sleep 60", "Enter")
        wait_for(lambda: "Confirm tool call" in tmux.screen(), "the confirmation dialog")
        wait_armed(tmux)
        tmux("send-keys", "-t", "repl", "Enter")
        wait_for(lambda: "legs 1" in tmux.screen(), "the running leg in the toolbar")
        wait_for(lambda: "working…" not in tmux.screen(), "the starting task to end")
        tmux("send-keys", "-t", "repl", "Escape")
        wait_for(lambda: "Cancel a background task?" in tmux.screen(), "the leg menu")
        wait_for(lambda: "1. No" in tmux.screen(), "the No choice")
        wait_for(lambda: "sleep 60 (running)" in tmux.screen(), "the leg's choice")
        tmux("send-keys", "-t", "repl", "2")
        wait_for(lambda: "Cancel background leg" in tmux.screen(), "the leg confirmation")
        tmux("send-keys", "-t", "repl", "2")  # Yes
        wait_for(
            lambda: any("⧗ background cmd_" in ln and "canceled" in ln for ln in tmux.lines()),
            "the canceled leg",
        )
        wait_for(lambda: "legs 1" not in tmux.screen(), "the toolbar without legs")
        jobs = list((daemon_home / "sessions").glob("cli-*/background/job_*.json"))
        assert len(jobs) == 1
        assert json.loads(jobs[0].read_text())["legs"][0]["state"] == "canceled"
    finally:
        tmux("kill-server")


def test_typing_legs_while_a_confirm_appears_approves_nothing(
    daemon_home: Path, tmp_path: Path
) -> None:
    """R77: a confirmation for ``touch FILE`` pops up while ``/legs⏎`` is being typed
    (``/le`` before it shows, ``gs⏎`` right after): the keys go to the input line —
    ``/legs`` runs — and approve nothing: FILE is absent, the dialog still open and the
    task still waiting. Once armed, the dialog takes its own Enter and FILE appears."""
    target = tmp_path / "r77-touched"
    tmux = Tmux()
    try:
        _start_repl(tmux, daemon_home)
        tmux("send-keys", "-t", "repl", f"run: touch {target}", "Enter")
        tmux("send-keys", "-t", "repl", "-l", "/le")
        # Poll fast: the rest of the word must arrive well within the arming delay.
        wait_for(lambda: "Confirm tool call" in tmux.screen(), "the confirmation", every_s=0.01)
        tmux("send-keys", "-t", "repl", "gs", "Enter")
        wait_for(lambda: "no background legs running" in tmux.lines(), "/legs at the prompt")
        wait_for(lambda: ARMED in tmux.screen(), "the dialog, armed and still open")
        wait_for(lambda: "Confirm tool call" in tmux.screen(), "the dialog still open")
        wait_for(lambda: "? 1 question" in tmux.screen(), "the task still waiting")
        assert not any("→ Approve" in line for line in tmux.lines())
        assert not target.exists()
        tmux("send-keys", "-t", "repl", "Enter")
        wait_for(lambda: "  → Approve (run_command)" in tmux.lines(), "the approval")
        wait_for(target.exists, "the approved command's file")
    finally:
        tmux("kill-server")


def test_padded_command_shows_its_tail(daemon_home: Path) -> None:
    """R77: a command padded with spaces to push its tail out of sight shows the run
    counted and the tail in the dialog, on screen in a real terminal."""
    tmux = Tmux()
    try:
        _start_repl(tmux, daemon_home)
        command = "ls ./build" + " " * 400 + "; echo tail-shown"
        tmux("send-keys", "-t", "repl", "-l", f"run: {command}")
        tmux("send-keys", "-t", "repl", "Enter")
        wait_for(
            lambda: any(
                "ls ./build⟨400 spaces⟩; echo tail-shown" in line and "│" in line
                for line in tmux.lines()
            ),
            "the whole command in the dialog",
        )
        wait_armed(tmux)
        tmux("send-keys", "-t", "repl", "5")  # Stop and discard
        wait_for(lambda: "✗ stopped and discarded" in tmux.lines(), "the canceled task")
    finally:
        tmux("kill-server")


def _approve_each(tmux: Tmux, labels: list[str]) -> None:
    """Approve the confirmation of each sub-agent in ``labels``, in whichever order
    they come; each dialog must name its sub-agent (R80)."""
    left = list(labels)
    while left:
        wait_for(lambda: any(f"from {la}" in tmux.screen() for la in left), "a dialog")
        shown = next(la for la in left if f"from {la}" in tmux.screen())
        wait_armed(tmux)
        tmux("send-keys", "-t", "repl", "Enter")
        wait_for(lambda s=shown: f"from {s}" not in tmux.screen(), f"the dialog of {shown}")
        left.remove(shown)


def test_subagents_confirm_in_the_window_and_cancel_ends_them(
    daemon_home: Path, tmp_path: Path
) -> None:
    """R80, R5, R40, R3: ``subs: run: touch X ;; run: echo hi`` shows each sub-agent's
    confirmation in this window, labelled; approving creates X and one tool result
    holds both. A sub-agent's open confirmation is withdrawn (its dialog closes, the
    command never runs) when the parent is cancelled (Ctrl+C from the dialog), and
    Esc → "Stop and discard" ends a task whose sub-agents' commands are all running."""
    made, never, late = tmp_path / "made", tmp_path / "never", tmp_path / "late"
    tmux = Tmux()
    try:
        _start_repl(tmux, daemon_home)
        tmux("send-keys", "-t", "repl", f"subs: run: touch {made} ;; run: echo hi", "Enter")
        _approve_each(tmux, [f"sub-agent 1/2: run: touch {made}", "sub-agent 2/2: run: echo hi"])
        wait_for(lambda: "  ✓ subagents" in tmux.lines(), "the one subagents result")
        wait_for(lambda: "The 2 sub-agents ended:" in tmux.screen(), "the summary")
        assert made.exists()
        wait_task_ended(tmux)

        tmux("send-keys", "-t", "repl", f"subs: run: touch {never}", "Enter")
        wait_for(lambda: f"from sub-agent 1/1: run: touch {never}" in tmux.screen(), "dialog")
        wait_armed(tmux)
        tmux("send-keys", "-t", "repl", "C-c")
        wait_for(lambda: "✗ stopped and discarded" in tmux.lines(), "the canceled task")
        wait_for(lambda: "Confirm tool call" not in tmux.screen(), "the dialog withdrawn")
        assert not never.exists()

        slow = f"sleep 8; touch {late}"
        tmux("send-keys", "-t", "repl", f"subs: run: sleep 30 ;; run: {slow}", "Enter")
        _approve_each(tmux, ["sub-agent 1/2: run: sleep 30", f"sub-agent 2/2: run: {slow}"])
        approved_at = time.monotonic()
        tmux("send-keys", "-t", "repl", "Escape")
        wait_for(lambda: "Stop the running task" in tmux.screen(), "the cancel popup")
        wait_for(lambda: "3. Stop and discard" in tmux.screen(), "the discard choice")
        tmux("send-keys", "-t", "repl", "3")
        wait_for(
            lambda: sum("✗ stopped and discarded" in line for line in tmux.lines()) >= 2,
            "the second canceled task",
        )
        time.sleep(max(0.0, approved_at + 9 - time.monotonic()))
        assert not late.exists()
    finally:
        tmux("kill-server")


def test_allowed_forget_says_what_it_removed(daemon_home: Path, tmp_path: Path) -> None:
    """Issue 33 item 8, R76, R92: after "Always allow" for a command, ``/allowed`` lists
    what its rule covers and ``/allowed forget 1`` names the rule it removed (the
    command asks again from now on)."""
    tmux = Tmux()
    target = tmp_path / "allowed-once"
    try:
        _start_repl(tmux, daemon_home)
        tmux("send-keys", "-t", "repl", f"run: touch {target}", "Enter")
        wait_for(lambda: "Always allow this exact command" in tmux.screen(), "the dialog")
        wait_armed(tmux)
        choice = re.search(r"(\d)\. Always allow this exact command", tmux.screen())
        assert choice is not None
        tmux("send-keys", "-t", "repl", choice[1])
        wait_for(target.exists, "the command to run")
        wait_for(lambda: "Confirm tool call" not in tmux.screen(), "the dialog to close")
        covers = f"exactly `touch {target}` in {os.path.realpath(os.getcwd())}"
        tmux("send-keys", "-t", "repl", "/allowed", "Enter")
        # (joined: a long temporary path wraps the line at the terminal's width)
        wait_for(lambda: f"1. {covers}" in tmux.screen().replace("\n", ""), "the rule")
        tmux("send-keys", "-t", "repl", "/allowed forget 1", "Enter")
        wait_for(
            lambda: f"forgot {covers} — it asks again" in tmux.screen().replace("\n", ""),
            "the removed rule named",
        )
        wait_for(lambda: "no remembered rules" in tmux.screen(), "the list left")
    finally:
        tmux("kill-server")


def test_history_finds_a_task_by_its_id_and_shows_its_record(daemon_home: Path) -> None:
    """Issue 33 item 8: ``/history <task id>`` finds the task (its id is what the REPL
    shows everywhere) and ``/history show 1`` prints its whole record."""
    tmux = Tmux()
    try:
        _start_repl(tmux, daemon_home)
        tmux("send-keys", "-t", "repl", "run: echo findme-output", "Enter")
        wait_for(lambda: "Confirm tool call" in tmux.screen(), "the confirmation dialog")
        wait_armed(tmux)
        tmux("send-keys", "-t", "repl", "Enter")
        wait_for(lambda: "finished with exit code 0" in tmux.screen(), "the task to end")
        tmux("send-keys", "-t", "repl", "/history", "Enter")
        listed = re.compile(r"  1\. \d\d-\d\d \d\d:\d\d  ([0-9a-f]{8})  finished")
        wait_for(lambda: any(listed.match(ln) for ln in tmux.lines()), "the history list")
        task_id = next(m[1] for ln in tmux.lines() if (m := listed.match(ln)))
        tmux("send-keys", "-t", "repl", f"/history {task_id}", "Enter")
        wait_for(lambda: f"recent tasks matching '{task_id}'" in tmux.screen(), "the id search")
        wait_for(lambda: any(task_id in ln and "  1. " in ln for ln in tmux.lines()), "the task")
        tmux("send-keys", "-t", "repl", "/history show 1", "Enter")
        wait_for(lambda: f"record of task {task_id}:" in tmux.screen(), "the record")
        wait_for(
            lambda: "findme-output" in tmux.screen().split("record of task")[-1], "its content"
        )
    finally:
        tmux("kill-server")
