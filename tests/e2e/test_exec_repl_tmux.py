"""A REPL window answers ``agentrio exec``'s confirmation, in a real terminal (issue 31
item 8, R99).

``agentrio --session ID`` runs in tmux against a real daemon (that of
`tests.e2e.test_repl_tmux`: no read-only programs, so every command asks; new
sessions work in the test's own directory, ``[agent] cwd``); then
``agentrio exec --session ID "run: …"`` runs beside it. The window open on the session
shows exec's confirmation; approved there, the command runs once (its line on disk)
and exec exits 0, naming the REPL as who approved. Denied there, nothing runs and
exec exits 3. Waits poll the screen; nothing is timed by sleeping.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.test_repl_tmux import ROOT, Tmux, run_daemon, wait_armed, wait_for

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

SESSION = "cli-execwindow"
REPL_CLIENT = "repl"  # the front-end name asks' states give agentrio-repl/0.1.0
Popen = subprocess.Popen[bytes]


@pytest.fixture
def daemon_home(tmp_path: Path) -> Iterator[Path]:
    home = tmp_path / "home"
    home.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    config = f'[tools]\nreadonly_commands = []\n[agent]\ncwd = "{work}"\n'
    (home / "config.toml").write_text(config)
    yield from run_daemon(home)


def _start_repl_on(tmux: Tmux, home: Path, session: str) -> None:
    command = (
        f"cd {ROOT} && AGENTRIO_HOME={home} {sys.executable} -m agentrio.repl "
        f"--session {session}; echo REPL-EXITED $?; sleep 60"
    )
    tmux("new-session", "-d", "-s", "repl", "-x", "120", "-y", "40", command)
    wait_for(lambda: "connected to agentrio daemon" in tmux.screen(), "REPL connected")


def _exec(home: Path, session: str, text: str) -> Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "agentrio.repl", "exec", "--session", session, text],
        cwd=ROOT,
        env={**os.environ, "AGENTRIO_HOME": str(home), "NO_PROXY": "127.0.0.1,localhost"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


@contextlib.contextmanager
def _exec_beside_a_window(home: Path, command: str) -> Iterator[tuple[Tmux, Popen]]:
    """The REPL in tmux on `SESSION`, then ``agentrio exec --session SESSION "run:
    command"``, once exec's confirmation is drawn there (the dialog armed); both are
    gone afterwards."""
    tmux = Tmux()
    process: Popen | None = None
    try:
        _start_repl_on(tmux, home, SESSION)
        process = _exec(home, SESSION, f"run: {command}")
        wait_for(lambda: "Confirm tool call" in tmux.screen(), "exec's confirmation")
        wait_armed(tmux)
        yield tmux, process
    finally:
        if process is not None and process.poll() is None:
            process.kill()
            process.communicate()
        tmux("kill-server")


def test_the_window_on_the_session_approves_execs_command(
    daemon_home: Path, tmp_path: Path
) -> None:
    """R99: the confirmation of exec's ``sh -c 'echo ran >> log'`` is drawn in the
    REPL window open on its session; Enter approves it; the command ran once and exec
    exits 0, saying the REPL approved it."""
    log = tmp_path / "ran.log"
    command = f"sh -c 'echo ran >> {log}'"
    with _exec_beside_a_window(daemon_home, command) as (tmux, process):
        assert "echo ran >>" in tmux.screen()
        tmux("send-keys", "-t", "repl", "Enter")
        wait_for(lambda: "  → Approve (run_command)" in tmux.lines(), "the approval")
        _, err = process.communicate(timeout=60)
    assert process.returncode == 0, err.decode()
    assert log.read_text() == "ran\n"
    assert f"agentrio exec: approved on {REPL_CLIENT}: {command}" in err.decode()


def test_a_denial_in_the_window_runs_nothing(daemon_home: Path, tmp_path: Path) -> None:
    """R99: "Deny with reason" chosen in the REPL window: nothing runs, the model
    reads the person's reason, exec exits 3 (a confirmation was denied) and says the
    REPL denied it."""
    log = tmp_path / "ran.log"
    command = f"sh -c 'echo ran >> {log}'"
    with _exec_beside_a_window(daemon_home, command) as (tmux, process):
        tmux("send-keys", "-t", "repl", "2")
        wait_for(lambda: "reason (Enter sends" in tmux.screen(), "the reason field")
        tmux("send-keys", "-t", "repl", "not from the CI", "Enter")
        wait_for(lambda: "→ Deny with reason: not from the CI" in tmux.screen(), "the denial")
        out, err = process.communicate(timeout=60)
    assert process.returncode == 3, err.decode()
    assert not log.exists()
    assert f"agentrio exec: denied on {REPL_CLIENT}: {command}" in err.decode()
    assert "denied by the user: not from the CI" in out.decode()
