"""A frozen REPL's ask is reported as not acknowledged, and acknowledged once it draws
it (issue 34 acceptance; R97), in a real terminal against a real daemon.

The task runs ``runs: cat FIFO ;; touch TARGET``: ``cat`` is read-only here, so it runs
unasked and blocks on the FIFO until the test writes to it, and only then does the
``touch`` ask. The REPL is frozen (SIGSTOP) before the FIFO is written, so the ask is
sent to a window that cannot draw it, whatever the machine's load. ``[server]
ack_wait_s`` is short, and every step waits on a state the daemon reports (``GET
…/asks``, ``agentrio status``, the ``ask_state`` events), never on a sleep.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_repl_tmux import (
    ROOT,
    Tmux,
    run_daemon,
    wait_armed,
    wait_for,
    wait_task_ended,
)

SESSION = "cli-frozen0ack"


@pytest.fixture
def frozen_home(tmp_path: Path) -> Iterator[Path]:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(
        '[server]\nack_wait_s = 0.5\n[tools]\nreadonly_commands = ["cat"]\n'
    )
    yield from run_daemon(home)


def _get(home: Path, path: str) -> Any:
    info = json.loads((home / "daemon.json").read_text())
    token = (home / "token").read_text().strip()
    request = urllib.request.Request(
        f"http://{info['host']}:{info['port']}{path}",
        headers={"Authorization": f"Bearer {token}"},
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        return json.load(response)


def _asks(home: Path) -> list[dict[str, Any]]:
    return list(_get(home, f"/v1/session/{SESSION}/asks")["asks"])


def _running(home: Path) -> bool:
    return int(_get(home, "/v1/health")["statistics"]["tasks_running"]) == 1


def _status(home: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "agentrio.repl", "status", "--home", str(home)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    return done.stdout + done.stderr


def _repl_pid(tmux: Tmux) -> int:
    """The REPL's process: the one child of the pane's shell."""
    shell = int(tmux("display-message", "-p", "-t", "repl", "#{pane_pid}").strip())
    children = Path(f"/proc/{shell}/task/{shell}/children").read_text().split()
    (child,) = children
    return int(child)


def _feed(fifo: Path) -> bool:
    """Write one line to ``fifo`` once its reader (the task's ``cat``) opened it."""
    try:
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            return False
        raise
    try:
        os.write(fd, b"fed\n")
    finally:
        os.close(fd)
    return True


def _ask_states(home: Path, ask_id: str) -> list[dict[str, Any]]:
    """The session's ``ask_state`` events of ``ask_id`` so far, read from the SSE
    stream's replay up to the acknowledgement (it is in the replay by then)."""
    info = json.loads((home / "daemon.json").read_text())
    token = (home / "token").read_text().strip()
    request = urllib.request.Request(
        f"http://{info['host']}:{info['port']}/v1/session/{SESSION}/events",
        headers={"Authorization": f"Bearer {token}"},
    )
    states: list[dict[str, Any]] = []
    with urllib.request.urlopen(request, timeout=20) as stream:
        for raw in stream:
            line = raw.decode().rstrip("\n")
            if not line.startswith("data: "):
                continue
            event = json.loads(line[len("data: ") :])
            if event.get("kind") == "ask_state" and event.get("ask_id") == ask_id:
                states.append(event)
                if event.get("acknowledged"):
                    return states
    raise AssertionError(f"the stream ended before the acknowledgement: {states}")


def test_a_frozen_repl_s_ask_is_late_then_acknowledged(frozen_home: Path, tmp_path: Path) -> None:
    """R97 (issue 34 acceptance): the ask reaches a REPL stopped by SIGSTOP; the daemon
    reports it shown on ``repl`` and not acknowledged (``late``: in ``GET …/asks``, in
    ``agentrio status`` and as an ``ask_state`` event), the command not run. After
    SIGCONT the REPL draws the dialog and acknowledges it; approved, it runs."""
    work = tmp_path / "work"
    work.mkdir()
    fifo, target = work / "gate", work / "touched"
    os.mkfifo(fifo)
    tmux = Tmux()
    command = (
        f"cd {work} && PYTHONPATH={ROOT} AGENTRIO_HOME={frozen_home} {sys.executable} "
        f"-m agentrio.repl --session {SESSION}; echo REPL-EXITED $?; sleep 60"
    )
    tmux("new-session", "-d", "-s", "repl", "-x", "120", "-y", "40", command)
    pid = 0
    try:
        wait_for(lambda: "connected to agentrio daemon" in tmux.screen(), "REPL connected")
        tmux("send-keys", "-t", "repl", "runs: cat gate ;; touch touched", "Enter")
        wait_for(lambda: _running(frozen_home), "the task to run")
        pid = _repl_pid(tmux)
        os.kill(pid, signal.SIGSTOP)
        wait_for(lambda: _feed(fifo), "the task's cat to open the FIFO")
        wait_for(lambda: any(a["late"] for a in _asks(frozen_home)), "the ask to be late")
        (ask,) = _asks(frozen_home)
        assert (ask["state"], ask["frontend"], ask["acknowledged"]) == ("shown", "repl", False)
        assert ask["tool_name"] == "run_command"
        assert "1 shown but not acknowledged yet" in _status(frozen_home)
        assert not target.exists()

        os.kill(pid, signal.SIGCONT)
        pid = 0
        wait_for(lambda: all(a["acknowledged"] for a in _asks(frozen_home)), "the ack")
        (acked,) = _asks(frozen_home)
        assert (acked["id"], acked["late"], acked["frontend"]) == (
            ask["id"],
            False,
            ask["frontend"],
        )
        assert "not acknowledged" not in _status(frozen_home)
        states = _ask_states(frozen_home, ask["id"])
        assert [(s["state"], s.get("late", False), s.get("acknowledged", False)) for s in states][
            -2:
        ] == [("shown", True, False), ("shown", False, True)]

        wait_for(lambda: "Confirm tool call" in tmux.screen(), "the confirmation dialog")
        wait_armed(tmux)
        tmux("send-keys", "-t", "repl", "Enter")
        wait_for(target.exists, "the approved touch")
        wait_task_ended(tmux)
        assert _asks(frozen_home) == []
    finally:
        if pid:
            os.kill(pid, signal.SIGCONT)
        tmux("kill-server")
