"""engine/system_prompt.py: what a run's model is told about where it is (R87; issue 31
item 2): the content of a task's, a sub-agent's and a background sub-agent's prompt,
``AGENTS.md`` discovery (up to the repository root, never into a hidden place), its
size clamp, and the ``agents_md`` announcement once per session.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Callable, Sequence
from pathlib import Path

import attrs
import pytest
import trio
import trio.testing

from agentrio.engine.agent_config import AgentConfig
from agentrio.engine.assembly import open_engine
from agentrio.engine.config import Config
from agentrio.engine.models.base import Message, ModelReply, ToolCallRequest, ToolSpec
from agentrio.engine.models.scripted import ScriptedModel
from agentrio.engine.processes.hidden import Hidden
from agentrio.engine.runs import RunOrigin
from agentrio.engine.snapshot import clamp
from agentrio.engine.system_prompt import (
    AGENTS_MD_BYTES,
    GUIDANCE,
    LEG_IDENTITY,
    RULE_ALLOW_ALL,
    RULE_NO_SANDBOX,
    RULE_UNASKED,
    RULES,
    AgentsFile,
    Surroundings,
    find_agents_files,
    system_prompt,
)
from agentrio.engine.tools import file_reach
from agentrio.protocol.events import AgentsMd
from tests.engine.conftest import EPOCH

NOWHERE = Hidden(places=())


@pytest.fixture
def tmp_is_shared(monkeypatch: pytest.MonkeyPatch) -> None:
    """Let reads reach all of ``/tmp``: ``tmp_path`` lies there, and the sandbox (so
    ``read_file``, so AGENTS.md discovery) sees only the working directory of it; the
    tests of a search up several directories need the rest too
    (`test_under_tmp_only_the_working_directorys_own_is_read` keeps the real rule)."""
    monkeypatch.setattr(file_reach, "PRIVATE_ROOTS", ())


def _project(root: Path) -> Path:
    """A repository at ``root`` with ``AGENTS.md`` at its root and in ``src/app``."""
    (root / ".git").mkdir(parents=True)
    (root / "AGENTS.md").write_text("Run the tests with make check.\n")
    app = root / "src" / "app"
    app.mkdir(parents=True)
    (app / "AGENTS.md").write_text("This package is the app; keep it small.\n")
    return app


def _system(messages: Sequence[Message]) -> str:
    assert messages[0].role == "system"
    return messages[0].content


async def test_a_tasks_prompt_says_where_it_is_every_rule_and_every_tool(
    tmp_path: Path,
    autojump_clock: trio.testing.MockClock,
    wall_clock: Callable[[], float],
    monkeypatch: pytest.MonkeyPatch,
    tmp_is_shared: None,
) -> None:
    """R87, issue 31 (2): a task's first message is the system prompt: agentrio, the
    OS, today's date, the working directory, the origin, each rule, each tool it is
    offered with when to use it, the AGENTS.md files (root first) and ``[agent]
    instructions``; the paths are announced once per session (``agents_md``)."""
    app = _project(tmp_path / "repo")
    monkeypatch.chdir(app)
    config = Config(
        home=str(tmp_path / "home"), agent=AgentConfig(instructions="Answer in French.")
    )
    model = ScriptedModel([ModelReply(text="one"), ModelReply(text="two")])
    async with open_engine(config, model=model, clock=wall_clock) as engine:
        first = await engine.start_task(
            "cli-where", "hello", origin=RunOrigin("c", "w"), cwd=str(app)
        )
        await first.wait_done()
        second = await engine.start_task("cli-where", "again", origin=RunOrigin("c", "w"))
        await second.wait_done()
        offered = [t.name for t in engine.toolbox.available(second.tool_context())]
        hub = engine.session("cli-where").hub
        announced = [
            [e for e in hub.events_of(run.task_hash) if isinstance(e, AgentsMd)]
            for run in (first, second)
        ]
    prompt = _system(model.calls[0])
    assert _system(model.calls[1]) == prompt
    assert prompt.startswith("You are the agent of agentrio")
    assert f"Operating system: {os.uname().sysname}" in prompt
    assert f"Today: {datetime.datetime.fromtimestamp(EPOCH).astimezone():%Y-%m-%d}" in prompt
    assert f"Working directory: {app}\n" in prompt
    assert "the person's terminal (agentrio's REPL)" in prompt
    for rule in RULES:
        assert rule in prompt
    assert len(offered) == 10  # the 7 of issue 31 and the file tools of issue 32
    for name in offered:
        assert f"- {name}: {GUIDANCE[name]}" in prompt
    root_md, app_md = tmp_path / "repo" / "AGENTS.md", app / "AGENTS.md"
    assert prompt.index(f"({root_md})") < prompt.index(f"({app_md})")
    assert "Run the tests with make check." in prompt
    assert "keep it small." in prompt
    assert prompt.endswith("## The person's instructions\nAnswer in French.")
    assert [m.role for m in model.calls[0]] == ["system", "user"]
    assert [[e.paths for e in each] for each in announced] == [[[str(root_md), str(app_md)]], []]


async def test_every_shipped_tool_has_guidance(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, wall_clock: Callable[[], float]
) -> None:
    """Issue 31 (2): a tool shipped without an entry in GUIDANCE fails here, so the
    prompt cannot forget to say when to use it; an unknown tool (an MCP server's) is
    listed with its own description's first sentence."""
    async with open_engine(Config(home=str(tmp_path / "home")), clock=wall_clock) as engine:
        shipped = {tool.name for tool in engine.toolbox}
    assert shipped == set(GUIDANCE)

    class Weather:
        name = "mcp__wx__forecast"

        def spec(self) -> ToolSpec:
            return ToolSpec(
                name=self.name, description="Tell the forecast. Uses the net.", parameters={}
            )

    place = Surroundings(cwd="/w", origin="chat-", os_name="Linux", today="2026-12-02")
    prompt = system_prompt(place, [Weather()])  # type: ignore[list-item]
    assert "- mcp__wx__forecast: Tell the forecast.\n" in prompt + "\n"
    assert "agentrio's web page or an HTTP client" in prompt


def test_the_prompt_follows_the_run() -> None:
    """R30, R75, R80: a background sub-agent is told it can ask nobody; an in-process
    sub-agent its label; no sandbox means every command asks; allow-all is said."""
    place = Surroundings(cwd="/w", origin="tg-", os_name="Linux", today="2026-12-02", sandbox=False)
    leg = system_prompt(place, [], leg=True)
    assert leg.startswith(LEG_IDENTITY)
    assert RULE_NO_SANDBOX in leg
    assert RULE_UNASKED not in leg
    assert "## Your tools" not in leg
    assert "a Telegram chat" in leg
    sub = system_prompt(place, [], subagent="sub-agent 1/2: count files")
    assert sub.startswith("You are sub-agent 1/2: count files, one of several sub-agents")
    assert RULE_ALLOW_ALL in system_prompt(place, [], allow_all=True)
    assert RULE_ALLOW_ALL not in sub


async def test_a_subagent_gets_the_prompt_with_its_objective(
    tmp_path: Path,
    autojump_clock: trio.testing.MockClock,
    wall_clock: Callable[[], float],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """R80, issue 31 (2): an in-process sub-agent's first call starts with the system
    prompt naming it, with the working directory, the AGENTS.md text and its own
    tools, then its objective."""
    app = _project(tmp_path / "repo")
    monkeypatch.chdir(app)
    sub_calls: list[list[Message]] = []

    async def turn(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelReply:
        if "one of several sub-agents" in messages[0].content:
            sub_calls.append(list(messages))
            return ModelReply(text="3 files")
        if messages[-1].role == "tool":
            return ModelReply(text="done")
        call = ToolCallRequest(id="s", name="subagents", args={"objectives": ["count files"]})
        return ModelReply(tool_calls=[call])

    model = ScriptedModel([turn, turn, turn])  # type: ignore[list-item]
    config = Config(home=str(tmp_path / "home"))
    async with open_engine(config, model=model, clock=wall_clock) as engine:
        run = await engine.start_task("cli-subp", "split it", cwd=str(app))
        assert (await run.wait_done()).text == "done"
    [messages] = sub_calls
    assert [m.role for m in messages] == ["system", "user"]
    assert messages[1].content == "count files"
    prompt = messages[0].content
    assert prompt.startswith("You are sub-agent 1/1: count files")
    assert f"Working directory: {app}\n" in prompt
    assert "keep it small." in prompt
    assert "- run_command: " in prompt
    assert "- subagents: " not in prompt
    assert "- background_command: " not in prompt


# -- AGENTS.md discovery -----------------------------------------------------------


def test_agents_md_from_the_cwd_up_to_the_repository_root(
    tmp_path: Path, tmp_is_shared: None
) -> None:
    """Issue 31 (2): the files from the working directory up to the directory holding
    ``.git`` (a worktree's ``.git`` file counts), root first; none above the root."""
    (tmp_path / "AGENTS.md").write_text("above the repository\n")
    repo = tmp_path / "repo"
    app = _project(repo)
    found = find_agents_files(str(app), NOWHERE, home=str(tmp_path))
    assert found == [
        AgentsFile(path=str(repo / "AGENTS.md"), text="Run the tests with make check.\n"),
        AgentsFile(path=str(app / "AGENTS.md"), text="This package is the app; keep it small.\n"),
    ]
    (repo / ".git").rmdir()
    (repo / ".git").write_text("gitdir: /elsewhere\n")
    assert len(find_agents_files(str(app), NOWHERE, home=str(tmp_path))) == 2


def test_without_a_repository_the_search_stops_at_home(tmp_path: Path, tmp_is_shared: None) -> None:
    """Issue 31 (2): no ``.git`` on the way: up to the user's home, not above it."""
    home = tmp_path / "home"
    work = home / "notes" / "day"
    work.mkdir(parents=True)
    (tmp_path / "AGENTS.md").write_text("outside the home\n")
    (home / "AGENTS.md").write_text("home rules\n")
    found = find_agents_files(str(work), NOWHERE, home=str(home))
    assert [f.text for f in found] == ["home rules\n"]


def test_an_agents_md_leading_into_a_hidden_place_is_not_read(tmp_path: Path) -> None:
    """Issue 29 (1, 2), issue 31 (2): an AGENTS.md that is a symlink into a hidden place (an
    agentrio home), or a directory link there, is not read and its text is not
    included; a hidden file with a second name closes reading altogether; a FIFO is
    not a file (and does not hang)."""
    secret_home = tmp_path / "agentrio-home"
    secret_home.mkdir()
    (secret_home / "token").write_text("TOKEN-abc123\n")
    hidden = Hidden(places=(str(secret_home),))
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "AGENTS.md").symlink_to(secret_home / "token")
    assert find_agents_files(str(repo), hidden, home=str(tmp_path)) == []
    (repo / "AGENTS.md").unlink()
    (repo / "inside").symlink_to(secret_home)
    (secret_home / "AGENTS.md").write_text("TOKEN-abc123\n")
    assert find_agents_files(str(repo / "inside"), hidden, home=str(tmp_path)) == []
    (repo / "AGENTS.md").write_text("fine\n")
    linked = attrs.evolve(hidden, linked="the token has another name")
    assert find_agents_files(str(repo), linked, home=str(tmp_path)) == []
    assert find_agents_files(str(repo), hidden, home=str(tmp_path))[0].text == "fine\n"
    (repo / "AGENTS.md").unlink()
    os.mkfifo(repo / "AGENTS.md")
    assert find_agents_files(str(repo), hidden, home=str(tmp_path)) == []


def test_under_tmp_only_the_working_directorys_own_is_read(tmp_path: Path) -> None:
    """Issue 31 (2), issue 32 (2): AGENTS.md is read as ``read_file`` reads: the
    sandbox's ``/tmp`` is private but for the working directory, so under ``/tmp`` the
    repository root's file above it is not read, the working directory's is."""
    app = _project(tmp_path / "repo")
    assert str(app).startswith("/tmp/")
    found = find_agents_files(str(app), NOWHERE, home=str(tmp_path))
    assert [f.path for f in found] == [str(app / "AGENTS.md")]


def test_a_huge_agents_md_is_clamped_with_the_elision_marker(
    tmp_path: Path, tmp_is_shared: None
) -> None:
    """Issue 31 (2): a file beyond the limit is read at its head and tail only and
    gives exactly what clamping the whole would (the marker counts the bytes left
    out); two files share the limit."""
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    body = "".join(f"line {n}\n" for n in range(400_000))
    (repo / "AGENTS.md").write_text(body)
    [found] = find_agents_files(str(repo), NOWHERE, home=str(tmp_path))
    assert found.text == clamp(body, AGENTS_MD_BYTES)
    assert f"...[{len(body) - AGENTS_MD_BYTES} bytes elided]..." in found.text
    sub = repo / "sub"
    sub.mkdir()
    (sub / "AGENTS.md").write_text("x" * AGENTS_MD_BYTES)
    both = find_agents_files(str(sub), NOWHERE, home=str(tmp_path))
    assert [f.text for f in both] == [
        clamp(body, AGENTS_MD_BYTES // 2),
        clamp("x" * AGENTS_MD_BYTES, AGENTS_MD_BYTES // 2),
    ]
