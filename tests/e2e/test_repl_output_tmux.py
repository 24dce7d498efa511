"""What the REPL prints, end to end in tmux against a real daemon (issue 19).

- A notice (a leg's end) that arrives while the model streams a line never cuts that
  line: a local OpenAI-compatible server streams half a line, holds the rest until the
  leg's end is on screen, then finishes it.
- Background output is written for the person: no model-facing text, no task tags, the
  follow-up does not repeat the legs' output, ``history:`` lists its results once.
- ``/help`` lists the built-in model's verbs, and the README tour's ``ask:`` row, typed
  as printed, asks a question with two options.
- Model Markdown is drawn: a fenced block shows its code, inline markup disappears.

Waits poll the screen (`wait_for`); nothing is timed.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_repl_tmux import ROOT, Tmux, run_daemon, wait_armed, wait_for

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

HALF = "Started the leg, and it"
REST = " keeps running.\nThat is **all**."


class _FakeModel(BaseHTTPRequestHandler):
    """``POST /v1/chat/completions``, streamed: the typed message starts one background
    leg; the tool result is answered with `HALF`, then — once ``release`` is set — with
    `REST`; anything else (the leg's report) with a short text."""

    release: threading.Event

    def log_message(self, *args: Any) -> None:
        return

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        last = body["messages"][-1]
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        if last["role"] == "user" and last["content"] == "start the leg":
            args = {"commands": ["echo leg-output"], "objective": "Echo", "next": "Say so."}
            call = {
                "index": 0,
                "id": "call_1",
                "type": "function",
                "function": {"name": "background_command", "arguments": json.dumps(args)},
            }
            self._send({"tool_calls": [call]})
        elif last["role"] == "tool":
            self._send({"content": HALF})
            self.release.wait(timeout=60)
            self._send({"content": REST})
        else:
            self._send({"content": "Noted the report."})
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()

    def _send(self, delta: dict[str, Any]) -> None:
        chunk = {"choices": [{"index": 0, "delta": delta}]}
        self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
        self.wfile.flush()


def _daemon(home: Path, config: str) -> Iterator[Path]:
    home.mkdir()
    (home / "config.toml").write_text(config)
    yield from run_daemon(home)


@pytest.fixture
def release() -> threading.Event:
    return threading.Event()


@pytest.fixture
def fake_model(release: threading.Event) -> Iterator[str]:
    handler = type("Handler", (_FakeModel,), {"release": release})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        release.set()
        server.shutdown()
        server.server_close()


@pytest.fixture
def streaming_home(tmp_path: Path, fake_model: str) -> Iterator[Path]:
    config = f'[model]\nprovider = "openai"\nbase_url = "{fake_model}"\nname = "fake"\n'
    yield from _daemon(tmp_path / "home", config)


@pytest.fixture
def builtin_home(tmp_path: Path) -> Iterator[Path]:
    yield from _daemon(tmp_path / "home", "")


@pytest.fixture
def tmux() -> Iterator[Tmux]:
    tmux = Tmux()
    try:
        yield tmux
    finally:
        tmux("kill-server")


def _start_repl(tmux: Tmux, home: Path) -> None:
    command = (
        f"cd {ROOT} && AGENTRIO_HOME={home} {sys.executable} -m agentrio.repl; "
        "echo REPL-EXITED $?; sleep 60"
    )
    tmux("new-session", "-d", "-s", "repl", "-x", "160", "-y", "60", command)
    wait_for(lambda: "connected to agentrio daemon" in tmux.screen(), "REPL connected")


def _history(tmux: Tmux) -> list[str]:
    """The whole pane, scrollback included, line by line."""
    out = tmux("capture-pane", "-p", "-S", "-500", "-t", "repl")
    return [line.rstrip() for line in out.splitlines()]


def test_a_leg_notice_never_cuts_a_streamed_line(
    streaming_home: Path, tmux: Tmux, release: threading.Event
) -> None:
    """Issue 19: the leg finishes while the model is half-way through a line; its notice
    is printed above, and the line, finished later, is printed whole."""
    _start_repl(tmux, streaming_home)
    tmux("send-keys", "-t", "repl", "start the leg", "Enter")
    wait_for(lambda: "⧗ background cmd_" in tmux.screen(), "the leg to start")
    wait_for(lambda: HALF in tmux.screen(), "the first half of the line")
    wait_for(
        lambda: any(re.match(r"⧗ background cmd_\w+ finished", x) for x in tmux.lines()),
        "the leg's end",
    )
    release.set()
    whole = HALF + REST.split("\n")[0]
    wait_for(lambda: whole in tmux.lines(), "the whole line")
    wait_for(lambda: "That is all." in tmux.lines(), "the last line, its markup drawn")
    lines = _history(tmux)
    assert HALF not in lines, "the line was cut around the notice"
    assert not any(line.strip() == REST.split("\n")[0].strip() for line in lines)
    finished = next(i for i, x in enumerate(lines) if re.match(r"⧗ background cmd_\w+ finished", x))
    assert finished < lines.index(whole)


def test_background_output_is_written_for_the_person(builtin_home: Path, tmux: Tmux) -> None:
    """Issue 19: a background job shows its commands one per line and one line per
    leg's start (not the model-facing tool result), its legs' output once, a follow-up
    that names the legs without repeating their output, no job or task id, and no
    task-id prefix on any line; ``history:`` prints its results once, short hashes."""
    _start_repl(tmux, builtin_home)
    tmux("send-keys", "-t", "repl", "bg: echo one ;; echo two", "Enter")
    wait_for(
        lambda: any(re.match(r"⧗ background cmd_\w+ started: echo two", x) for x in tmux.lines()),
        "the person's line for each started leg",
    )
    wait_for(lambda: "⧗ follow-up on the background work:" in tmux.screen(), "the follow-up")
    wait_for(lambda: any("(command: echo two): finished" in x for x in tmux.lines()), "its legs")
    lines = _history(tmux)
    assert ["⚙ background_command:", "    echo one", "    echo two"] == [
        line for line in lines if line.startswith("⚙") or line in ("    echo one", "    echo two")
    ]
    assert not any("legs started" in line or "settled" in line for line in lines)
    assert not any(re.search(r"\b(job_|task )[0-9a-f]{8}", line) for line in lines)
    assert not any("Background Report" in line for line in lines)
    assert not any(re.match(r"\[[0-9a-f]{8}\] ", line) for line in lines)
    assert [line for line in lines if line.strip() == "one"] == ["  one"]
    assert [line for line in lines if line.strip() == "two"] == ["  two"]
    tmux("send-keys", "-t", "repl", "history: echo", "Enter")
    wait_for(lambda: "Chat history matching" in tmux.screen(), "the history summary")
    lines = _history(tmux)
    hits = [line for line in lines if re.match(r" +[0-9a-f]{8} · finished · ", line)]
    assert len(hits) == 2, hits
    assert 'Chat history matching "echo": 2 entries found.' in lines


def test_help_lists_the_verbs_and_the_tour_ask_row_works(builtin_home: Path, tmux: Tmux) -> None:
    """Issue 19: /help has the built-in model's verbs; the README tour's ask row, typed
    exactly as the raw README prints it, asks one question with two options."""
    readme = (ROOT / "README.md").read_text()
    (row,) = [line for line in readme.splitlines() if line.startswith("| `ask:")]
    typed = row.split("`")[1]
    assert "\\" not in typed
    _start_repl(tmux, builtin_home)
    tmux("send-keys", "-t", "repl", "/help", "Enter")
    wait_for(lambda: "Built-in model verbs (type them as a message):" in tmux.lines(), "verbs")
    for verb in ("run:", "ask:", "bg:", "sub:", "subs:", "secret:", "history:"):
        wait_for(lambda verb=verb: any(x.startswith(f"  {verb} ") for x in tmux.lines()), verb)
    tmux("send-keys", "-t", "repl", typed, "Enter")
    wait_for(lambda: "│Which branch?" in tmux.screen(), "the question")
    wait_for(lambda: "1. main" in tmux.screen(), "the first option")
    wait_for(lambda: "2. release" in tmux.screen(), "the second option")
    wait_armed(tmux)  # issue 33 item 10: "no arming hint" passed on a half-drawn screen
    tmux("send-keys", "-t", "repl", "2")
    wait_for(lambda: "You answered: release." in tmux.lines(), "the answer")


def test_model_markdown_is_drawn(builtin_home: Path, tmux: Tmux) -> None:
    """Issues 19 and 33 (item 8): the model's Markdown is drawn, not shown raw: inline
    code loses its backticks; a fenced block shows its lines between two drawn rules,
    no backtick fence on screen (the builtin model fences a command's output)."""
    _start_repl(tmux, builtin_home)
    tmux("send-keys", "-t", "repl", "run: echo hello", "Enter")
    wait_for(lambda: "echo hello finished with exit code 0:" in tmux.lines(), "the summary")
    wait_for(lambda: _history(tmux).count("───") == 2, "the code block's closing rule")
    lines = _history(tmux)
    assert "Running echo hello." in lines
    assert not any("`echo hello`" in line for line in lines)
    summary = lines.index("echo hello finished with exit code 0:")
    assert lines[summary + 1 : summary + 4] == ["───", "hello", "───"]
    assert not any("```" in line for line in lines)
