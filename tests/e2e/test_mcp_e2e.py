"""MCP servers through the real daemon, against real servers nobody here wrote (issue 32
section 3): ``@modelcontextprotocol/server-everything`` (the protocol's reference
server: tools, progress, long operations) and ``@modelcontextprotocol/server-filesystem``,
both from node_modules (``make test`` installs them with ``npm ci``).

The daemon runs a scripted model whose turns call ``mcp__NAME__TOOL`` tools. The
``tee`` in front of the everything server's stdin keeps what the server was sent, so a
test reads the ``notifications/cancelled`` the server itself received.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
import tomli_w
import trio

from agentrio import Decision
from agentrio.handles import RunHandle
from agentrio.protocol.events import Pending, ToolProgress, ToolResult, ToolSkipped
from agentrio.testing import RunningDaemon
from tests.e2e.conftest import ROOT

MODULES = ROOT / "node_modules" / "@modelcontextprotocol"
EVERYTHING = MODULES / "server-everything" / "dist" / "index.js"
FILESYSTEM = MODULES / "server-filesystem" / "dist" / "index.js"
NOTES_SERVER = ROOT / "examples" / "mcp_notes_server.py"
GROWING_SERVER = ROOT / "examples" / "mcp_growing_server.py"

pytestmark = pytest.mark.skipif(
    not (EVERYTHING.exists() and FILESYSTEM.exists()), reason="npm ci has not run"
)


def _call(tool: str, args: dict[str, Any], index: int = 0) -> dict[str, Any]:
    return {"text": "", "tool_calls": [{"id": f"c{index}", "name": tool, "args": args}]}


#: The model's turns per test: one call, then "done".
SCRIPTS: dict[str, list[dict[str, Any]]] = {
    "approved": [_call("mcp__every__echo", {"message": "hello from mcp"}), {"text": "done"}],
    "denied": [
        _call("mcp__fs__write_file", {"path": "{files}/made.txt", "content": "x"}),
        {"text": "done"},
    ],
    "long": [
        _call("mcp__every__trigger-long-running-operation", {"duration": 60, "steps": 60}),
        {"text": "done"},
    ],
    "elicit": [_call("mcp__notes__new_note", {"text": "milk"}), {"text": "done"}],
    "grow": [
        _call("mcp__grow__unlock", {"word": "plum"}),
        {"text": "done"},
        {
            "text": "",
            "tool_calls": [
                {"id": "c1", "name": "mcp__grow__word", "args": {}},
                {"id": "c2", "name": "mcp__grow__unlock", "args": {"word": "fig"}},
            ],
        },
        {"text": "done"},
    ],
    "killed": [
        _call("mcp__plain__trigger-long-running-operation", {"duration": 60, "steps": 60}),
        {"text": "done"},
    ],
}


def _config(root: Path, script: str) -> str:
    files = root / "files"
    files.mkdir(exist_ok=True)
    turns = json.loads(json.dumps(SCRIPTS[script]).replace("{files}", str(files)))
    (root / "script.toml").write_text(tomli_w.dumps({"turns": turns}))
    node = "node"
    servers = {
        "every": {
            "command": "sh",
            "args": ["-c", f'tee -a "{root}/stdin.log" | exec {node} "{EVERYTHING}"'],
        },
        "plain": {"command": node, "args": [str(EVERYTHING)], "max_restarts": 1},
        "fs": {"command": node, "args": [str(FILESYSTEM), str(files)]},
        "never": {"command": "no-such-mcp-server", "max_restarts": 0},
        "notes": {"command": sys.executable, "args": [str(NOTES_SERVER), str(files)]},
        "grow": {"command": sys.executable, "args": [str(GROWING_SERVER)]},
    }
    return tomli_w.dumps(
        {
            "model": {"provider": "scripted", "script": str(root / "script.toml")},
            "mcp": servers,
        }
    )


@pytest.fixture
def agentrio_daemon_home(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    (home / "config.toml").write_text(_config(tmp_path, request.param))
    return home


def _script(name: str) -> pytest.MarkDecorator:
    return pytest.mark.parametrize("agentrio_daemon_home", [name], indirect=True)


async def _wait_ready(daemon: RunningDaemon, *names: str) -> dict[str, Any]:
    """The daemon's MCP servers once ``names`` are ready (at most 30 s)."""
    async with daemon.connect() as client:
        with trio.fail_after(30):
            while True:
                servers = {s.name: s for s in (await client.health()).mcp}
                if all(servers[n].state == "ready" for n in names):
                    return servers
                await trio.sleep(0.1)


async def _first_progress(run: RunHandle) -> None:
    with trio.fail_after(30):
        while not any(isinstance(e, ToolProgress) for e in run.events_so_far):
            await trio.sleep(0.05)


def _outcome(run: RunHandle) -> ToolResult | ToolSkipped:
    found = [e for e in run.events_so_far if isinstance(e, ToolResult | ToolSkipped)]
    assert len(found) == 1, run.events_so_far
    return found[0]


@_script("approved")
async def test_a_call_asks_showing_server_tool_and_arguments_and_runs_once_approved(
    agentrio_daemon: RunningDaemon,
) -> None:
    """Issue 32 §3: a server that never starts leaves the daemon healthy (its state
    says why); an MCP call asks through the one door, the confirmation shows the server,
    the tool and every argument, and once approved the server's answer is the result."""
    servers = await _wait_ready(agentrio_daemon, "every", "fs")
    assert servers["never"].state == "failed"
    assert "no-such-mcp-server: no such program" in servers["never"].reason
    assert servers["every"].tools > 5
    seen: list[Any] = []

    def approve(ask: Any) -> Decision:
        seen.append(ask)
        return Decision.allow()

    async with agentrio_daemon.connect() as client:
        run = await client.run("cli-mcp", "go", window_hash="w-mcp", on_ask=approve)
        done = await run.wait_done()
    assert done.status == "finished"
    assert len(seen) == 1, "\n".join(repr(e)[:300] for e in run.events_so_far)
    assert seen[0].tool_name == "mcp__every__echo"
    assert seen[0].tool_args == {
        "server": "every",
        "tool": "echo",
        "hint": "the server calls this tool read-only (not verified)",
        "arguments.message": "hello from mcp",
    }
    result = _outcome(run)
    assert isinstance(result, ToolResult)
    assert result.ok
    assert "hello from mcp" in result.output
    assert result.details is not None
    assert result.details.mcp is not None
    assert result.details.mcp.server == "every"


@_script("denied")
async def test_a_denied_call_never_reaches_the_server(
    agentrio_daemon: RunningDaemon, tmp_path: Path
) -> None:
    """Issue 32 §3: a denied write_file of the filesystem server has no side effect:
    the file does not exist, and the model is told it was denied."""
    await _wait_ready(agentrio_daemon, "fs")
    async with agentrio_daemon.connect() as client:
        rule = lambda ask: Decision.deny("not that")  # noqa: E731
        run = await client.run("cli-mcp", "go", window_hash="w-mcp", on_ask=rule)
        done = await run.wait_done()
    assert done.status == "finished"
    skipped = _outcome(run)
    assert isinstance(skipped, ToolSkipped)
    assert "denied by the user: not that" in skipped.reason
    assert not (tmp_path / "files" / "made.txt").exists()
    assert os.listdir(tmp_path / "files") == []


@_script("long")
async def test_cancel_mid_call_cancels_the_request_with_the_tasks_cause(
    agentrio_daemon: RunningDaemon, tmp_path: Path
) -> None:
    """Issue 32 §3: progress notifications arrive as ``tool_progress`` events; a cancel
    of the task mid-call sends the server ``notifications/cancelled`` for that request
    with the task's cause (read from what the server's stdin received), and the task
    ends canceled."""
    await _wait_ready(agentrio_daemon, "every")
    async with agentrio_daemon.connect() as client:
        run = await client.run(
            "cli-mcp", "go", window_hash="w-mcp", on_ask=lambda ask: Decision.allow()
        )
        await _first_progress(run)
        await run.cancel()
        done = await run.wait_done()
    assert done.status == "canceled"
    log = tmp_path / "stdin.log"
    with trio.fail_after(10):
        while "notifications/cancelled" not in log.read_text():
            await trio.sleep(0.05)
    sent = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    call = next(m for m in sent if m.get("method") == "tools/call")
    cancel = next(m for m in sent if m.get("method") == "notifications/cancelled")
    assert cancel["params"] == {"requestId": call["id"], "reason": "user_canceled"}


@_script("killed")
async def test_a_server_killed_mid_call_is_the_calls_error_and_it_restarts(
    agentrio_daemon: RunningDaemon,
) -> None:
    """Issue 32 §3, R48: a server killed mid-call ends the call with an error result
    (the task goes on and finishes); the server is restarted, in a new process group."""
    servers = await _wait_ready(agentrio_daemon, "plain")
    pid = servers["plain"].pid
    assert pid is not None
    assert os.getpgid(pid) == pid  # the leader of its own group
    async with agentrio_daemon.connect() as client:
        run = await client.run(
            "cli-mcp", "go", window_hash="w-mcp", on_ask=lambda ask: Decision.allow()
        )
        await _first_progress(run)
        os.kill(pid, signal.SIGKILL)
        done = await run.wait_done()
    assert done.status == "finished"
    result = _outcome(run)
    assert isinstance(result, ToolResult)
    assert not result.ok
    assert "went away during the call" in result.output
    again = await _wait_ready(agentrio_daemon, "plain")
    assert again["plain"].restarts == 1
    assert again["plain"].pid not in (None, pid)


@_script("elicit")
async def test_an_elicitation_is_asked_inline_and_answered_by_the_person(
    agentrio_daemon: RunningDaemon, tmp_path: Path
) -> None:
    """Issue 32 §3: the example server's ``new_note`` asks for a title by elicitation;
    from a REPL window it is asked inline (an ``ask_user`` ask naming the server), and
    the person's answer, not the engine's, goes back: the note is saved under it."""
    await _wait_ready(agentrio_daemon, "notes")
    asks: list[Any] = []

    def person(ask: Any) -> Decision:
        asks.append(ask)
        return Decision.allow() if ask.kind == "tool_confirm" else Decision.answer("groceries")

    async with agentrio_daemon.connect() as client:
        run = await client.run("cli-mcp", "go", window_hash="w-mcp", on_ask=person)
        done = await run.wait_done()
    assert done.status == "finished"
    assert [ask.kind for ask in asks] == ["tool_confirm", "ask_user"]
    [question] = asks[1].questions
    assert question.text == "MCP server notes asks: What should the note be called?\nTitle"
    result = _outcome(run)
    assert isinstance(result, ToolResult)
    assert result.output == "saved groceries"
    assert (tmp_path / "files" / "groceries.txt").read_text() == "milk"


@_script("elicit")
async def test_an_elicitation_of_a_chat_task_parks_it_and_nothing_is_saved(
    agentrio_daemon: RunningDaemon, tmp_path: Path
) -> None:
    """Issue 32 §3: from a ``chat-`` session the elicitation parks the task on its
    question (the MCP request is cancelled; the engine answers nothing for the
    person), so no note exists."""
    await _wait_ready(agentrio_daemon, "notes")
    offered: list[Any] = []

    async def person(ask: Any) -> Decision:
        if ask.kind == "tool_confirm":
            return Decision.allow()
        offered.append(ask)  # the parked question, offered again: left for later
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    async with agentrio_daemon.connect() as client:
        await client.listen("chat-")
        run = await client.run("chat-mcp", "go", on_ask=person)
        done = await run.wait_done()
    assert done.status == "parked", done
    assert os.listdir(tmp_path / "files") == []
    parked = [e for e in run.events_so_far if isinstance(e, Pending)]
    assert [q.text for q in parked[0].questions] == [
        "MCP server notes asks: What should the note be called?\nTitle"
    ]


@_script("grow")
async def test_a_servers_changed_tool_list_is_the_next_tasks_toolbox(
    agentrio_daemon: RunningDaemon,
) -> None:
    """Issue 32 §3: the example server's ``unlock`` removes itself and adds ``word`` and
    ``lock``, then sends ``notifications/tools/list_changed``; the daemon lists the
    server's tools again (its state counts 2), and the next task calls ``word`` (the
    server answers) while ``unlock`` is no longer in its toolbox (never sent)."""
    servers = await _wait_ready(agentrio_daemon, "grow")
    assert servers["grow"].tools == 1
    allow = lambda ask: Decision.allow()  # noqa: E731
    async with agentrio_daemon.connect() as client:
        first = await client.run("cli-mcp", "go", window_hash="w-mcp", on_ask=allow)
        assert (await first.wait_done()).status == "finished"
        result = _outcome(first)
        assert isinstance(result, ToolResult)
        assert result.output == "unlocked plum"
        with trio.fail_after(30):
            while (await _wait_ready(agentrio_daemon, "grow"))["grow"].tools != 2:
                await trio.sleep(0.05)
        asked: list[str] = []

        def approve(ask: Any) -> Decision:
            asked.append(ask.tool_name)
            return Decision.allow()

        second = await client.run("cli-mcp", "again", window_hash="w-mcp", on_ask=approve)
        assert (await second.wait_done()).status == "finished"
    outcomes = [e for e in second.events_so_far if isinstance(e, ToolResult | ToolSkipped)]
    assert [type(e).__name__ for e in outcomes] == ["ToolResult", "ToolSkipped"]
    assert isinstance(outcomes[0], ToolResult)
    assert outcomes[0].output == "plum"
    assert isinstance(outcomes[1], ToolSkipped)
    assert "not available" in outcomes[1].reason
    assert asked == ["mcp__grow__word"]  # the removed tool was never asked for, nor run
