"""MCP servers in an engine (issue 32 section 3): ``[mcp.NAME]`` configuration, start in
the background with a state each, process groups ended (R48), the SDK never imported
without a table, and what a confirmation and an elicitation show.

Real processes throughout: the reference server from node_modules, ``sleep`` as a
server that never answers, a missing program as one that never starts.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from agentrio.engine.assembly import open_engine
from agentrio.engine.config import Config, McpServerConfig, load_config
from agentrio.engine.errors import ConfigError
from agentrio.engine.mcp.elicit import KeptForms, content_of, questions_of
from agentrio.engine.mcp.servers import tool_name_for
from agentrio.engine.mcp.tool import HINTS, confirm_args
from agentrio.engine.mcp.transport import server_env
from agentrio.engine.processes.groups import group_alive
from agentrio.engine.snapshot import QA
from agentrio.repl.parts_view import mcp_lines
from tests.sources import ROOT

EVERYTHING = ROOT / "node_modules" / "@modelcontextprotocol" / "server-everything"
EVERYTHING_JS = EVERYTHING / "dist" / "index.js"
needs_npm = pytest.mark.skipif(not EVERYTHING_JS.exists(), reason="npm ci has not run")


def _load(tmp_path: Path, text: str) -> Config:
    (tmp_path / "config.toml").write_text(text)
    return load_config(tmp_path)


def test_mcp_tables_load_stdio_and_http_servers(tmp_path: Path) -> None:
    """Issue 32 §3: ``[mcp.NAME]`` with command/args/env, or url with headers named
    by environment variable or stored secret."""
    config = _load(
        tmp_path,
        '[mcp.fs]\ncommand = "node"\nargs = ["a.js", "/data"]\nenv = ["FS_TOKEN"]\n'
        '[mcp.web]\nurl = "https://mcp.example/mcp"\n'
        'headers_env = { Authorization = "WEB_AUTH" }\nheaders_secret = { X-Key = "web" }\n',
    )
    assert config.mcp["fs"] == McpServerConfig(
        command="node", args=["a.js", "/data"], env=["FS_TOKEN"]
    )
    assert config.mcp["web"].headers_env == {"Authorization": "WEB_AUTH"}
    assert config.mcp["web"].headers_secret == {"X-Key": "web"}
    assert config.mcp["web"].transport == "http"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '[mcp.w]\nurl = "https://a"\nheaders = { Authorization = "Bearer s3cret" }\n',
            "config.toml:3: mcp.w.headers: header values never go in config.toml",
        ),
        (
            '[mcp.w]\ncommand = "a"\nurl = "https://a"\n',
            "config.toml:2: mcp.w.command: give either",
        ),
        ("[mcp.w]\n", "mcp.w.command: give either command (stdio) or url"),
        ('[mcp.a__b]\ncommand = "x"\n', "mcp.a__b: a server name is letters"),
        ('[mcp.w]\nurl = "ftp://a"\n', "mcp.w.url: expected an http(s) URL"),
        ('[mcp.w]\ncommand = "x"\nheaders_env = { A = "B" }\n', "headers are for url servers"),
    ],
)
def test_a_bad_mcp_table_is_one_line_naming_it(tmp_path: Path, text: str, message: str) -> None:
    """Issue 32 §3 (and issue 30's one-line errors): a header value in the file is
    refused (secrets never in config.toml), as are ambiguous or unusable tables."""
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, text)
    assert message in str(caught.value)
    assert "s3cret" not in str(caught.value)


def test_a_stdio_server_gets_only_the_variables_named() -> None:
    """Issue 32 §3: ``env`` names what passes; the daemon's other variables (its
    credentials) never reach a server; the owner tag does (orphans, R27)."""
    environ = {"PATH": "/bin", "FS_TOKEN": "t", "OPENAI_API_KEY": "sk-x", "AGENTRIO_OWNER": "/h"}
    env = server_env(McpServerConfig(command="x", env=["FS_TOKEN", "UNSET"]), environ)
    assert env == {"PATH": "/bin", "FS_TOKEN": "t", "AGENTRIO_OWNER": "/h"}


def test_tool_names_are_what_models_accept() -> None:
    """Issue 32 §3: ``mcp__NAME__TOOL``, other characters made ``_``, at most 64."""
    assert tool_name_for("fs", "read_file") == "mcp__fs__read_file"
    assert tool_name_for("fs", "a.b/c d") == "mcp__fs__a_b_c_d"
    assert len(tool_name_for("fs", "x" * 100)) == 64


class _Notes:
    def __init__(self, **hints: Any) -> None:
        self.read_only_hint = hints.get("read_only")
        self.destructive_hint = hints.get("destructive")


class _Tool:
    def __init__(self, name: str, notes: _Notes | None) -> None:
        self.name = name
        self.annotations = notes


def test_a_confirmation_shows_every_argument_and_hints_never_hide_one() -> None:
    """Issue 32 §3: server, tool and every argument (even ones named like the shown
    keys) are shown; annotations only add a hint line."""
    args = {"path": "/etc/passwd", "server": "evil", "content": "a\nb"}
    shown = confirm_args("fs", _Tool("write_file", _Notes(destructive=True)), args)
    assert shown == {
        "server": "fs",
        "tool": "write_file",
        "hint": HINTS["destructive"],
        "arguments.path": "/etc/passwd",
        "arguments.server": "evil",
        "arguments.content": "a\nb",
    }
    assert "hint" not in confirm_args("fs", _Tool("x", None), {})
    assert confirm_args("fs", _Tool("x", _Notes(read_only=True)), {})["hint"] == HINTS["read_only"]


class _Form:
    mode = "form"
    message = "Please provide inputs"
    requested_schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "title": "Name", "description": "Your name"},
            "check": {"type": "boolean", "title": "Agree"},
            "count": {"type": "integer", "default": 42},
            "friend": {"type": "string", "enum": ["Monica", "Joey"]},
            "tools": {"type": "array", "items": {"type": "string", "enum": ["Guitar", "Bass"]}},
        },
    }


def test_an_elicitation_form_becomes_questions_and_typed_answers() -> None:
    """Issue 32 §3: each field a question (yes/no, enum options, a multiple choice);
    the answers go back typed by the schema; an empty one is left out."""
    questions = questions_of("every", _Form())
    assert questions[0].text == "MCP server every asks: Please provide inputs\nName: Your name"
    assert [q.options for q in questions[1:4]] == [["yes", "no"], [], ["Monica", "Joey"]]
    assert questions[2].text == "count (empty: 42)"
    assert questions[4].multi
    content = content_of(_Form(), ["Ada", "yes", "", "Joey", "Guitar, Bass"])
    assert content == {"name": "Ada", "check": True, "friend": "Joey", "tools": ["Guitar", "Bass"]}
    with pytest.raises(ValueError, match="invalid literal for int"):
        content_of(_Form(), ["Ada", "no", "many"])


def test_a_parked_forms_answers_answer_one_identical_request_only() -> None:
    """Issue 32 §3 (R12): the answers a resume brought answer the first request asking
    exactly the parked questions, once; a different form, or answers to other
    questions, are not used (the person is asked, or the task parks again)."""
    questions = questions_of("every", _Form())
    answered = [QA(question="other", answer="x")]
    answered += [
        QA(question=q.text, answer=a) for q, a in zip(questions[:2], ["Ada", "yes"], strict=True)
    ]
    ctx: Any = attrs.make_class("Ctx", ["session_id", "task_hash", "answered"])(
        "chat-s", "t1", answered
    )
    kept = KeptForms()
    assert kept.take(ctx, questions) is None  # five questions, two answers
    assert kept.take(ctx, questions[:2]) == ["Ada", "yes"]
    assert kept.take(ctx, questions[:2]) is None  # spent
    assert kept.take(ctx, questions[1:3]) is None  # not what was asked last
    answered.append(QA(question=questions[0].text, answer="Bo"))  # a later resume
    assert kept.take(ctx, questions[:1]) == ["Bo"]


def test_mcp_lines_say_each_state() -> None:
    """Issue 32 §3: the lines of ``/mcp`` and ``agentrio status``."""
    lines = mcp_lines(
        [
            {"name": "fs", "transport": "stdio", "state": "ready", "pid": 7, "tools": 3},
            {
                "name": "w",
                "transport": "http",
                "state": "restarting",
                "retry_in_s": 4.0,
                "restarts": 1,
                "reason": "ConnectError: refused",
            },
            {"name": "x", "transport": "stdio", "state": "failed", "reason": "no such program"},
        ]
    )
    assert lines == [
        "fs ready (stdio, pid 7), 3 tools",
        "w restarting (http), again in 4 s, 1 restart: ConnectError: refused",
        "x failed (stdio): no such program",
    ]
    assert mcp_lines([]) == ["none configured ([mcp.NAME] in config.toml, docs/mcp.md)"]


def test_without_mcp_tables_the_sdk_is_never_imported(tmp_path: Path) -> None:
    """Issue 32 §3: the daemon's cold start does not pay for MCP when none is set."""
    code = (
        "import sys, trio\n"
        "from agentrio.engine.assembly import open_engine\n"
        "from agentrio.engine.config import Config\n"
        "async def main():\n"
        f"    async with open_engine(Config(home={str(tmp_path)!r})) as engine:\n"
        "        assert engine.mcp is None\n"
        "trio.run(main)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('mcp', 'mcp_types')"
        " or m.startswith('agentrio.engine.mcp.') and m != 'agentrio.engine.mcp.config'))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"


def _gone(pgid: int) -> bool:
    """No process of the group runs (a zombie runs nothing: `group_alive`)."""
    return not group_alive(pgid)


async def test_a_server_that_never_answers_times_out_and_its_group_is_ended(
    tmp_path: Path,
) -> None:
    """Issue 32 §3, R48: a start not done within ``start_timeout_s`` fails with that
    reason, the server's process group (leader and child) ends, and the engine served
    all along; with ``max_restarts = 0`` it stays failed. (10 s: on a loaded machine a
    shell may take a second to start.)"""
    pid_file = tmp_path / "pid"
    script = f'echo $$ > "{pid_file}"; sleep 300 & sleep 300'
    server = McpServerConfig(command="sh", args=["-c", script], start_timeout_s=10, max_restarts=0)
    config = Config(home=str(tmp_path), mcp={"mute": server})
    async with open_engine(config) as engine:
        assert engine.mcp is not None
        with trio.fail_after(30):
            state = await engine.mcp.wait_state("mute", "failed")
        pid = int(pid_file.read_text())
        assert state.reason == "TimeoutError: not ready within 10 s"
        assert _gone(pid)
        [info] = engine.mcp.infos()
        assert (info.state, info.tools, info.pid) == ("failed", 0, None)


async def test_shutdown_during_a_start_ends_the_servers_group(tmp_path: Path) -> None:
    """Issue 32 §3, R48: the engine's end cancels a start in progress (cause
    ``shutdown``) and no process of the server's group survives it."""
    server = McpServerConfig(command="sh", args=["-c", "sleep 300 & sleep 300"])
    config = Config(home=str(tmp_path), mcp={"mute": server})
    async with open_engine(config) as engine:
        assert engine.mcp is not None
        state = engine.mcp.states["mute"]
        with trio.fail_after(10):
            while state.pid is None:
                await trio.sleep(0.01)
        pid = state.pid
    assert _gone(pid)


async def test_a_missing_program_restarts_with_back_off_then_fails(tmp_path: Path) -> None:
    """Issue 32 §3: a failed start is ``restarting`` (reason, when next) until
    ``max_restarts`` restarts are used up, then ``failed`` with the reason."""
    server = McpServerConfig(command="no-such-mcp-x", max_restarts=2, restart_backoff_s=0.05)
    config = Config(home=str(tmp_path), mcp={"gone": server})
    async with open_engine(config) as engine:
        assert engine.mcp is not None
        with trio.fail_after(10):
            state = await engine.mcp.wait_state("gone", "restarting")
            assert state.reason == "cannot start: no-such-mcp-x: no such program"
            assert engine.mcp.infos()[0].retry_in_s is not None
            await engine.mcp.wait_state("gone", "failed")
        assert state.restarts == 2


@needs_npm
async def test_the_reference_servers_tools_arrive_and_go(tmp_path: Path) -> None:
    """Issue 32 §3: a ready server's tools are in the toolbox as ``mcp__NAME__TOOL``
    (never offered to legs: they always ask); the engine's end removes nothing it
    did not add and ends the server's group."""
    server = McpServerConfig(command="node", args=[str(EVERYTHING_JS)])
    config = Config(home=str(tmp_path), mcp={"every": server})
    async with open_engine(config) as engine:
        assert engine.mcp is not None
        with trio.fail_after(30):
            state = await engine.mcp.wait_state("every", "ready")
        names = {tool.name for tool in engine.toolbox}
        assert "mcp__every__echo" in names
        assert "mcp__every__trigger-long-running-operation" in names
        echo = engine.toolbox.get("mcp__every__echo")
        assert echo is not None
        assert not echo.reach.in_legs
        assert not echo.reach.unasked
        pid = state.pid
        assert pid is not None
    assert _gone(pid)


@needs_npm
async def test_a_streamable_http_server_gets_its_headers_from_the_environment(
    tmp_path: Path,
) -> None:
    """Issue 32 §3: an ``url`` server (the reference server over streamable HTTP, its
    header's value taken from the variable ``headers_env`` names) becomes ready and its
    tools arrive; a header whose variable is unset fails the start with that reason
    (no empty header is sent)."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "PORT": str(port)}
    process = await trio.lowlevel.open_process(
        ["node", str(EVERYTHING_JS), "streamableHttp"], env=env, start_new_session=True
    )
    try:
        url = f"http://127.0.0.1:{port}/mcp"
        web = McpServerConfig(url=url, headers_env={"X-Bench": "MCP_TEST_HEADER"})
        missing = McpServerConfig(url=url, headers_env={"X-Gone": "NO_SUCH_VAR"}, max_restarts=0)
        os.environ["MCP_TEST_HEADER"] = "hello"
        config = Config(home=str(tmp_path), mcp={"web": web, "missing": missing})
        async with open_engine(config) as engine:
            assert engine.mcp is not None
            with trio.fail_after(30):
                state = await engine.mcp.wait_state("missing", "failed")
                assert state.reason == (
                    "LookupError: header X-Gone: environment variable NO_SUCH_VAR is not set"
                )
                # (the node server may still be binding its port: a restart then)
                await engine.mcp.wait_state("web", "ready")
            assert "mcp__web__echo" in {tool.name for tool in engine.toolbox}
            [web_info, _] = engine.mcp.infos()
            assert (web_info.transport, web_info.pid) == ("http", None)
    finally:
        os.environ.pop("MCP_TEST_HEADER", None)
        process.kill()
        await process.wait()


async def test_the_engine_serves_while_the_sdk_is_imported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 32 §3: servers start in the background and never delay the daemon. The
    SDK's import (a second quiet, many under load) runs in a worker thread: held there,
    the engine is open, its Trio thread runs and no server has started; let go, the
    servers start. (An import on the Trio thread kept a loaded daemon from writing
    daemon.json within the tests' 15 s.)"""
    import threading

    import trio.testing

    from agentrio.engine.mcp import servers as servers_module

    gate, imported = threading.Event(), threading.Event()

    def held_import() -> None:
        gate.wait(30)
        imported.set()

    monkeypatch.setattr(servers_module, "_import_sdk", held_import)
    server = McpServerConfig(command="sh", args=["-c", "sleep 300"], max_restarts=0)
    config = Config(home=str(tmp_path), mcp={"mute": server})
    with trio.fail_after(30):
        async with open_engine(config) as engine:
            assert engine.mcp is not None
            await trio.testing.wait_all_tasks_blocked()  # the Trio thread runs meanwhile
            assert not imported.is_set()
            assert [info.pid for info in engine.mcp.infos()] == [None]
            gate.set()
            state = await engine.mcp.wait_state("mute", "starting")
            while state.pid is None:
                await trio.sleep(0.01)
            assert imported.is_set()
