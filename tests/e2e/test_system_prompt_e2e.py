"""The model is told where it is, end to end through the real daemon and aimock in each
dialect (R87; issue 31 item 2): every request starts with the system prompt, which
names the daemon's working directory and holds the project's ``AGENTS.md`` and
``[agent] instructions``; the ``AGENTS.md`` path is announced once per session, and
the REPL in tmux shows it once.

aimock runs with ``--strict`` and its journal shows each body in the chat shape (the
Responses ``instructions`` and the Anthropic ``system`` parameter as the first
``system`` message); tests/engine/models/test_system_wire.py reads the raw forms.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest
import tomli_w
import trio

from agentrio.engine.models.builtin import HELP_TEXT
from agentrio.protocol.events import AgentsMd
from agentrio.protocol.frames import DoneFrame, EventFrame, Run
from agentrio.protocol.wording import agents_md_line
from agentrio.transport import open_frame_connection
from tests.aimock import start_aimock, write_fixture
from tests.e2e.conftest import DaemonProcess
from tests.e2e.test_dialects_e2e import DIALECTS, until_done
from tests.e2e.test_repl_tmux import ROOT, Tmux, wait_for

RULE = "Always run make check before you commit."
FIXTURE: list[dict[str, Any]] = [
    {"match": {"userMessage": "where am i"}, "response": {"content": "In your project."}},
    {"match": {"userMessage": "and now"}, "response": {"content": "Still there."}},
]


@pytest.fixture(params=list(DIALECTS))
def dialect(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _project(tmp_path: Path) -> Path:
    """A repository with an AGENTS.md, its real path (the prompt names real paths)."""
    project = Path(os.path.realpath(tmp_path)) / "project"
    (project / ".git").mkdir(parents=True)
    (project / "AGENTS.md").write_text(f"# Project rules\n{RULE}\n")
    return project


async def test_every_request_carries_the_system_prompt(
    nursery: trio.Nursery, tmp_path: Path, dialect: str
) -> None:
    """R87, issue 31 (2): both tasks' requests start with the same system prompt,
    holding the working directory, the AGENTS.md text and ``[agent] instructions``,
    before the person's input; ``agents_md`` comes once, in the first task."""
    project = _project(tmp_path)
    aimock = await start_aimock(nursery, write_fixture(tmp_path, FIXTURE))
    name, extra = DIALECTS[dialect]
    base_url = aimock.url if dialect == "anthropic" else f"{aimock.url}/v1"
    home = tmp_path / "home"
    home.mkdir()
    config = {
        "model": {"provider": dialect, "name": name, "base_url": base_url, **extra},
        "agent": {"instructions": "Answer in French."},
    }
    (home / "config.toml").write_text(tomli_w.dumps(config))
    daemon = await trio.to_thread.run_sync(lambda: DaemonProcess(home, cwd=project))
    announced: list[list[AgentsMd]] = []
    try:
        with trio.fail_after(60):
            async with open_frame_connection(daemon.info.ws_url, daemon.info.token) as conn:
                for index, text in enumerate(["where am i", "and now"]):
                    await conn.send(Run(request_id=f"r{index}", session_id="cli-sp", input=text))
                    frames = await until_done(conn, f"r{index}")
                    assert isinstance(frames[-1], DoneFrame)
                    assert frames[-1].status == "finished", frames[-1].error
                    announced.append(
                        [
                            f.event
                            for f in frames
                            if isinstance(f, EventFrame) and isinstance(f.event, AgentsMd)
                        ]
                    )
    finally:
        assert await trio.to_thread.run_sync(daemon.stop) == 0
    assert [[e.paths for e in each] for each in announced] == [
        [[str(project / "AGENTS.md")]],
        [],
    ]
    journal = [e for e in await aimock.journal() if e["response"]["status"] == 200]
    assert len(journal) == 2
    prompts = []
    for entry in journal:
        first, *rest = entry["body"]["messages"]
        assert first["role"] == "system"
        assert all(m["role"] != "system" for m in rest)
        prompts.append(first["content"])
    prompt = prompts[0]
    assert prompts[1] == prompt
    assert prompt.startswith("You are the agent of agentrio")
    assert f"Working directory: {project}\n" in prompt
    assert f"## Project instructions ({project / 'AGENTS.md'})" in prompt
    assert RULE in prompt
    assert prompt.endswith("Answer in French.")
    assert "- run_command: " in prompt


def test_the_repl_shows_the_agents_md_path_once(tmp_path: Path) -> None:
    """Issue 31 (2): the REPL, in a session whose daemon works in a project with an
    AGENTS.md, prints "≡ instructions read from <path>" with the first task only."""
    project = _project(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    daemon = DaemonProcess(home, cwd=project)
    tmux = Tmux()
    line = agents_md_line([str(project / "AGENTS.md")])
    try:
        command = (
            f"cd {project} && AGENTRIO_HOME={home} PYTHONPATH={ROOT} {sys.executable} -m "
            "agentrio.repl; echo REPL-EXITED $?; sleep 60"
        )
        tmux("new-session", "-d", "-s", "repl", "-x", "160", "-y", "40", command)
        wait_for(lambda: "connected to agentrio daemon" in tmux.screen(), "REPL connected")

        def shown() -> list[str]:
            whole = tmux("capture-pane", "-p", "-S", "-", "-t", "repl")
            return [row.rstrip() for row in whole.splitlines()]

        answered = HELP_TEXT.splitlines()[0]  # the builtin model's reply to plain text
        tmux("send-keys", "-t", "repl", "hello", "Enter")
        wait_for(lambda: shown().count(answered) == 1, "the first reply")
        tmux("send-keys", "-t", "repl", "hello again", "Enter")
        wait_for(lambda: shown().count(answered) == 2, "the second reply")
        assert shown().count(line) == 1
        assert shown().index(line) < shown().index(answered)
        tmux("send-keys", "-t", "repl", "/quit", "Enter")
        wait_for(lambda: "REPL-EXITED 0" in tmux.lines(), "the REPL to exit")
    finally:
        tmux("kill-server")
        assert daemon.stop() == 0
