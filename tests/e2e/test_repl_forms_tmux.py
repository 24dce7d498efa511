"""End to end in a real terminal: keys reach a form the moment it shows as armed.

Issue 33 item 10: under CPU load a tmux test typed "2" into the prompt instead of the
question form that had just opened. R77 keeps keys typed before a dialog is armed on
the input line (by design); once the form shows as armed, every key must reach it —
the first question's, each later question's (built when the one before is answered)
and a confirmation's. The REPL runs in tmux against a real daemon while busy-loop
processes keep both cores loaded; each key is sent right after the armed form is on
screen, and the test asserts the answer the model received and an empty input line.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
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

#: Busy-loop processes for the load: more than the machine's cores, as `stress -c` would.
LOAD_PROCESSES = 3


@pytest.fixture
def cpu_load() -> Iterator[None]:
    """Busy loops on every core for the test's duration (killed in a finally)."""
    spinners = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(LOAD_PROCESSES)
    ]
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
        for spinner in spinners:
            spinner.wait()


def _keys(tmux: Tmux, *keys: str) -> None:
    tmux("send-keys", "-t", "repl", *keys)


def _open_armed(tmux: Tmux, typed: str, shown: str) -> None:
    """Send ``typed``; wait until its dialog shows ``shown`` and is drawn armed."""
    _keys(tmux, typed, "Enter")
    wait_for(lambda: shown in tmux.screen(), repr(shown))
    wait_armed(tmux)


def _model_received(tmux: Tmux, question: str, answer: str) -> None:
    """Wait for ``answer`` to ``question`` shown and echoed by the model (its ``A:``
    line), and for the task's end (the next line typed would steer it otherwise); the
    input line must have stayed empty."""
    wait_for(lambda: f"  → {question}: {answer}" in tmux.lines(), f"the answer {answer!r}")
    wait_for(lambda: f"A: {answer}" in tmux.screen(), "the answer the model received")
    wait_task_ended(tmux)
    _wait_prompt_empty(tmux)


def _wait_prompt_empty(tmux: Tmux) -> None:
    """Wait for the input line drawn empty (a key typed there would stay: this times
    out); a single capture could land between the erase and the redraw."""
    wait_for(lambda: ">" in tmux.lines(), "an empty input line")


def test_keys_reach_an_armed_form_under_load(daemon_home: Path, cpu_load: None) -> None:
    """Issue 33 item 10, R77: with both cores busy, a digit typed as soon as a question
    form shows armed answers it (the model echoes the answer, the input line stays
    empty); in a form of two questions, Down typed with the first answer's digit
    reaches the second question (built when the first is answered, not drawn yet), and
    its Esc then opens the stop popup and "Keep running" brings it back with Down's
    choice; a confirmation's digit approves its command."""
    tmux = Tmux()
    try:
        _start_repl(tmux, daemon_home)
        _open_armed(tmux, "ask: Which colour? | red, blue", "2. blue")
        _keys(tmux, "2")
        _model_received(tmux, "Which colour?", "blue")

        _open_armed(
            tmux, "ask: Which colour? | red, blue ;; Which size? | small, large", "(1/2) Which"
        )
        _keys(tmux, "1", "Down")  # one write: Down reaches the second question undrawn
        wait_for(lambda: "(2/2) Which size?" in tmux.screen(), "the second question")
        wait_armed(tmux)
        _keys(tmux, "Escape")  # its form's Esc, though its first key came before it showed
        wait_for(lambda: "Stop the running task" in tmux.screen(), "the stop popup")
        _keys(tmux, "1")  # Keep running
        wait_for(lambda: "(2/2) Which size?" in tmux.screen(), "the second question back")
        wait_armed(tmux)
        _keys(tmux, "Enter")  # the entry Down chose
        _model_received(tmux, "Which size?", "large")
        wait_for(lambda: "  → Which colour?: red" in tmux.lines(), "the first answer")

        _open_armed(tmux, "run: echo loaded-ok", "Confirm tool call")
        _keys(tmux, "1")
        wait_for(lambda: "  → Approve (run_command)" in tmux.lines(), "the approval")
        wait_for(lambda: "    loaded-ok" in tmux.lines(), "the command's output")
        _wait_prompt_empty(tmux)
    finally:
        tmux("kill-server")


def test_other_and_pgup_back_give_the_answers_the_model_receives(daemon_home: Path) -> None:
    """Issue 33 item 8: a closed question's last entry is "Other…"; its digit opens a
    line, and the typed text is the answer the model receives. In a form of two
    questions the second names PgUp in its hints; PgUp shows the first again, and its
    new answer is the one the model receives."""
    tmux = Tmux()
    try:
        _start_repl(tmux, daemon_home)
        _open_armed(tmux, "ask: Which colour? | red, blue", "3. Other…")
        _keys(tmux, "3")
        wait_for(lambda: "your answer:" in tmux.screen(), "the Other… line")
        wait_for(lambda: "Esc back to the choices" in tmux.screen(), "its key hints")
        _keys(tmux, "-l", "sea green")
        _keys(tmux, "Enter")
        _model_received(tmux, "Which colour?", "sea green")

        _open_armed(
            tmux, "ask: Which shade? | red, blue ;; Which size? | small, large", "(1/2) Which"
        )
        _keys(tmux, "1")
        wait_for(lambda: "(2/2) Which size?" in tmux.screen(), "the second question")
        wait_for(lambda: "PgUp: back to question 1" in tmux.screen(), "the back key's hint")
        _keys(tmux, "PPage")
        wait_for(lambda: "(1/2) Which shade?" in tmux.screen(), "the first question again")
        wait_armed(tmux)
        _keys(tmux, "2")
        wait_for(lambda: "(2/2) Which size?" in tmux.screen(), "the second question again")
        wait_armed(tmux)
        _keys(tmux, "2")
        _model_received(tmux, "Which size?", "large")
        wait_for(lambda: "  → Which shade?: blue" in tmux.lines(), "the changed answer")
        wait_for(lambda: "A: blue" in tmux.screen(), "the changed answer the model received")
        assert not any("A: red" in line for line in tmux.lines())
    finally:
        tmux("kill-server")
