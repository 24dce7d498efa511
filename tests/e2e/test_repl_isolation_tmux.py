"""A REPL window's confirmation in a real terminal reaches the window and not a script
(SPEC R5, R78; issue 17, item 1): ``agentrio`` in tmux, a script with the token
listening on ``cli-`` and on ``""`` on the same daemon.

Skipped when tmux is not installed, like `tests/e2e/test_repl_tmux.py`, whose daemon
fixture and screen helpers it uses.
"""

from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path

import pytest
import trio

from agentrio.protocol.frames import Ask, Listen, Ok
from agentrio.transport import open_frame_connection
from tests.e2e.test_repl_tmux import Tmux, _start_repl, daemon_home, wait_armed, wait_for

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

__all__ = ["daemon_home"]  # the fixture, imported for this module's tests


class Script:
    """A script on its own thread and Trio loop: listens on ``cli-`` and ``""`` and
    keeps every ``ask`` it is sent until `stop`."""

    def __init__(self, home: Path) -> None:
        info = json.loads((home / "daemon.json").read_text())
        self.url = f"ws://{info['host']}:{info['port']}/v1/ws"
        self.token = (home / "token").read_text().strip()
        self.asks: list[Ask] = []
        self.listening = threading.Event()
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=trio.run, args=(self._main,), daemon=True)

    async def _main(self) -> None:
        async with open_frame_connection(self.url, self.token) as conn:
            for prefix in ("cli-", ""):
                await conn.send(Listen(prefix=prefix, request_id=f"l{prefix}"))
                while not isinstance(await conn.receive(), Ok):
                    pass
            self.listening.set()
            while not self.stopping.is_set():
                with trio.move_on_after(0.1):
                    frame = await conn.receive()
                    if isinstance(frame, Ask):
                        self.asks.append(frame)

    def __enter__(self) -> Script:
        self.thread.start()
        assert self.listening.wait(20), "the script did not start listening"
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self.thread.join(20)


def test_a_window_confirmation_never_reaches_a_listening_script(daemon_home: Path) -> None:
    """R5, R78: with a script listening on ``cli-`` and ``""``, ``run: echo hello``
    typed in the REPL shows its confirmation in the window, which approves it; the
    script is sent no ``ask`` at all."""
    tmux = Tmux()
    try:
        _start_repl(tmux, daemon_home)
        with Script(daemon_home) as script:
            tmux("send-keys", "-t", "repl", "run: echo hello", "Enter")
            wait_for(lambda: "Confirm tool call" in tmux.screen(), "the window's dialog")
            wait_armed(tmux)
            tmux("send-keys", "-t", "repl", "Enter")
            wait_for(lambda: "    hello" in tmux.lines(), "hello in the tool result")
        assert script.asks == []
        tmux("send-keys", "-t", "repl", "/quit", "Enter")
        wait_for(lambda: "REPL-EXITED 0" in tmux.lines(), "the REPL to exit with status 0")
    finally:
        tmux("kill-server")
