"""A server's questions in the 2026-07-28 protocol (``input_required`` results, the
multi round-trip requests) through the real daemon (issue 32 section 3).

No server installed here speaks that revision (``server-everything`` and
``server-filesystem`` are built on the TypeScript SDK 1.32, whose newest revision is
2025-11-25), so the server is ``examples/mcp_tickets_server.py``, written with the
official ``mcp`` SDK (2.3), configured with ``protocol = "auto"``. A ``tee`` in front
of its stdin keeps what agentrio sent it: the retried ``tools/call`` carrying
``inputResponses`` and the echoed ``requestState``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
import tomli_w
import trio

from agentrio import Decision
from agentrio.protocol.events import Pending, ToolResult
from agentrio.testing import RunningDaemon
from tests.e2e.conftest import ROOT
from tests.e2e.test_mcp_e2e import _call, _outcome, _wait_ready

SERVER = ROOT / "examples" / "mcp_tickets_server.py"
TOOL = "mcp__tickets__file_ticket"
QUESTIONS = [
    "MCP server tickets asks: Triage the ticket 'printer jams'\nPriority: How urgent it is",
    "Owner: Who takes it",
]


@pytest.fixture
def agentrio_daemon_home(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """A home whose model calls the tool ``request.param`` times, then says done."""
    files = tmp_path / "files"
    files.mkdir()
    turns = [_call(TOOL, {"summary": "printer jams"}, i) for i in range(request.param)]
    (tmp_path / "script.toml").write_text(tomli_w.dumps({"turns": [*turns, {"text": "done"}]}))
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    tee = f'tee -a "{tmp_path}/stdin.log" | exec "{sys.executable}" "{SERVER}" "{files}"'
    config = {
        "model": {"provider": "scripted", "script": str(tmp_path / "script.toml")},
        "mcp": {"tickets": {"command": "sh", "args": ["-c", tee], "protocol": "auto"}},
    }
    (home / "config.toml").write_text(tomli_w.dumps(config))
    return home


def _sent(tmp_path: Path) -> list[dict[str, Any]]:
    """The ``tools/call`` requests agentrio sent the server, in order."""
    lines = (tmp_path / "stdin.log").read_text().splitlines()
    frames = [json.loads(line) for line in lines if line.strip()]
    return [f for f in frames if f.get("method") == "tools/call"]


@pytest.mark.parametrize("agentrio_daemon_home", [1], indirect=True)
async def test_input_required_is_asked_inline_and_the_call_retried_with_the_answers(
    agentrio_daemon: RunningDaemon, tmp_path: Path
) -> None:
    """Issue 32 §3 (R10): from a REPL window the server's ``input_required`` result
    is one ``ask_user`` ask (both fields of its form, naming the server); agentrio
    calls the tool again with the person's answers as ``inputResponses`` and the
    server's ``requestState`` unchanged, and that call's result is the tool's."""
    await _wait_ready(agentrio_daemon, "tickets")
    asks: list[Any] = []

    def person(ask: Any) -> Decision:
        asks.append(ask)
        return Decision.allow() if ask.kind == "tool_confirm" else Decision.answer("high", "Ada")

    async with agentrio_daemon.connect() as client:
        run = await client.run("cli-mrtr", "go", window_hash="w-mrtr", on_ask=person)
        done = await run.wait_done()
    assert done.status == "finished"
    assert [ask.kind for ask in asks] == ["tool_confirm", "ask_user"]
    assert [q.text for q in asks[1].questions] == QUESTIONS
    assert asks[1].questions[0].options == ["low", "high"]
    result = _outcome(run)
    assert isinstance(result, ToolResult)
    assert result.output == "filed printer-jams (high, Ada) over 2026-07-28"
    ticket = (tmp_path / "files" / "printer-jams.txt").read_text()
    assert ticket == "printer jams\npriority: high\nowner: Ada\nprotocol: 2026-07-28\n"
    first, retry = _sent(tmp_path)
    assert "inputResponses" not in first["params"]
    [key] = retry["params"]["inputResponses"]
    assert retry["params"]["inputResponses"][key] == {
        "action": "accept",
        "content": {"priority": "high", "owner": "Ada"},
    }
    assert retry["params"]["requestState"]
    assert retry["params"]["arguments"] == first["params"]["arguments"]
    assert retry["id"] != first["id"]


@pytest.mark.parametrize("agentrio_daemon_home", [2], indirect=True)
async def test_input_required_of_a_chat_task_parks_it_and_the_resume_answers_the_server(
    agentrio_daemon: RunningDaemon, tmp_path: Path
) -> None:
    """Issue 32 §3 (R11, R12): from a ``chat-`` session the ``input_required`` result
    parks the task on the form's questions and nothing is filed (the engine answers
    nothing for the person); resumed with the person's answers, the model's new call
    gets the same questions from the server, answered with those answers."""
    await _wait_ready(agentrio_daemon, "tickets")

    async def approve(ask: Any) -> Decision:
        if ask.kind != "tool_confirm":  # the parked questions, offered: left for later
            await trio.sleep_forever()
        return Decision.allow()

    async with agentrio_daemon.connect() as client:
        await client.listen("chat-")
        run = await client.run("chat-mrtr", "go", on_ask=approve)
        done = await run.wait_done()
        assert done.status == "parked", done
        assert os.listdir(tmp_path / "files") == []
        [pending] = [e for e in run.events_so_far if isinstance(e, Pending)]
        assert [q.text for q in pending.questions] == QUESTIONS
        resumed = await client.resume("chat-mrtr", run.task_hash, ["low", "Grace"], on_ask=approve)
        done = await resumed.wait_done()
    assert done.status == "finished", done
    result = _outcome(resumed)
    assert isinstance(result, ToolResult)
    assert result.output == "filed printer-jams (low, Grace) over 2026-07-28"
    ticket = (tmp_path / "files" / "printer-jams.txt").read_text()
    assert "priority: low\nowner: Grace\n" in ticket
    sent = _sent(tmp_path)
    assert [("inputResponses" in f["params"]) for f in sent] == [False, False, True]
