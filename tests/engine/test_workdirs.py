"""A session's working directory (R86, issue 31 item 1): how it is resolved, where
commands run, and what a ``cd`` does -- through the in-process engine, with real
subprocesses and the real SQLite store.

Every path is compared as a real path; a refused ``cwd`` asserts that no task started
and nothing was stored, a refused ``cd`` that the directory did not move.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from agentrio.engine.assembly import open_engine
from agentrio.engine.config import AgentConfig, Config
from agentrio.engine.errors import BadRequest
from agentrio.engine.models.base import ModelReply, ToolCallRequest
from agentrio.engine.models.scripted import ScriptedModel
from agentrio.engine.store.sqlite import open_store
from agentrio.engine.tools.cd import is_cd
from agentrio.engine.tools.workdir import Workdir, WorkdirError, resolve_workdir
from agentrio.engine.workdirs import default_workdir, start_workdir
from agentrio.protocol import events as ev
from tests.engine.tools.test_gate import _approve, _calls, _tool_results, gate

DEADLINE_S = 30


@attrs.frozen
class _Eng:
    store: Any
    config: Config


SESSION = "chat-place"


@pytest.fixture
def place(tmp_path: Path) -> Path:
    """A real directory with ``sub/`` and ``link -> sub`` (a symlink)."""
    base = Path(os.path.realpath(tmp_path)) / "place"
    (base / "sub").mkdir(parents=True)
    (base / "link").symlink_to(base / "sub")
    (base / "file").write_text("")
    return base


# ------------------------------------------------------------------ resolution


def test_a_relative_cwd_is_taken_from_the_base_and_judged_by_its_real_path(place: Path) -> None:
    """R85, R86: ``None`` is the base itself, a relative path is taken from the base
    (never the daemon's directory), a symlink resolves to its target, ``..`` too."""
    assert resolve_workdir(None, str(place)) == str(place)
    assert resolve_workdir("sub", str(place)) == str(place / "sub")
    assert resolve_workdir("link", str(place)) == str(place / "sub")
    assert resolve_workdir("link/..", str(place)) == str(place)  # the target's parent
    assert resolve_workdir(str(place / "link"), "/") == str(place / "sub")
    assert resolve_workdir(None, str(place / "link")) == str(place / "sub")


@pytest.mark.parametrize(
    ("cwd", "why"),
    [
        ("missing", "'missing' does not exist"),
        ("file", "'file' is not a directory"),
        ("", "'' is not a path"),
        ("a\x00b", "is not a path"),
    ],
)
def test_an_unusable_cwd_is_a_clear_error(place: Path, cwd: str, why: str) -> None:
    """R86: a directory that does not exist, a file, an empty or NUL path: each a
    `WorkdirError` naming it, the text the model reads."""
    with pytest.raises(WorkdirError, match=why):
        resolve_workdir(cwd, str(place))


def test_a_relative_base_is_refused() -> None:
    """The base is the session's directory, always absolute: a relative one would be
    taken from the daemon's own directory, so it is a programming error."""
    with pytest.raises(ValueError, match="not absolute"):
        resolve_workdir(None, "relative")


def test_the_default_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """R86 and docs/configuration.md: ``[agent] cwd`` (``~`` expanded, a relative one
    from ``$HOME``), else the parent of a home other than the default one, else
    ``$HOME``."""
    monkeypatch.setenv("HOME", str(tmp_path / "me"))
    monkeypatch.delenv("AGENTRIO_HOME", raising=False)
    custom = Config(home=str(tmp_path / "homes" / "agentrio"))
    assert default_workdir(custom) == str(tmp_path / "homes")
    assert default_workdir(Config()) == str(tmp_path / "me")  # the default home
    default_home = str(tmp_path / "me" / ".config" / "agentrio")
    assert default_workdir(Config(home=default_home)) == str(tmp_path / "me")
    given = attrs.evolve(custom, agent=AgentConfig(cwd="~/src"))
    assert default_workdir(given) == str(tmp_path / "me" / "src")
    relative = attrs.evolve(custom, agent=AgentConfig(cwd="src"))
    assert default_workdir(relative) == str(tmp_path / "me" / "src")


async def test_where_a_session_starts(place: Path, tmp_path: Path) -> None:
    """R86: a new session starts in the default; a ``cwd`` becomes the session's (a
    relative one from where it was); a bad one refuses with the reason and stores
    nothing; a stored directory that is gone gives way to the default."""
    config = Config(home=str(tmp_path / "home"), agent=AgentConfig(cwd=str(place)))
    async with open_store(tmp_path / "w.db") as store:
        assert await start_workdir(_Eng(store, config), SESSION, None) == str(place)
        assert await store.session_workdir(SESSION) is None
        assert await start_workdir(_Eng(store, config), SESSION, str(place / "link")) == str(
            place / "sub"
        )
        assert await store.session_workdir(SESSION) == str(place / "sub")
        assert await start_workdir(_Eng(store, config), SESSION, None) == str(place / "sub")
        assert await start_workdir(_Eng(store, config), SESSION, "..") == str(place)
        with pytest.raises(BadRequest, match="cwd: the working directory 'nope' does not exist"):
            await start_workdir(_Eng(store, config), SESSION, "nope")
        assert await store.session_workdir(SESSION) == str(place)
        await store.put_session_workdir(SESSION, str(place / "gone"))
        assert await start_workdir(_Eng(store, config), SESSION, None) == str(place)
        broken = attrs.evolve(config, agent=AgentConfig(cwd=str(place / "gone")))
        with pytest.raises(BadRequest, match=r"default working directory \(\[agent\] cwd\)"):
            await start_workdir(_Eng(store, broken), "chat-other", None)
        assert await start_workdir(_Eng(store, broken), "chat-other", str(place)) == str(place)


def test_what_counts_as_a_cd() -> None:
    """A ``cd`` given alone, as plain words or an argv, is a move; one inside a shell
    line is an ordinary command."""
    assert is_cd("cd sub")
    assert is_cd(["cd", "a b"])
    assert is_cd("cd")
    assert not is_cd("cd sub && make")
    assert not is_cd("cd $HOME")
    assert not is_cd("echo cd")


def test_a_subagents_directory_moves_alone() -> None:
    """A sub-agent starts where its task is; its own ``cd`` never calls the session's
    mover."""
    parent = Workdir("/srv/a", moved=None)
    child = parent.for_subagent()
    child.path = "/srv/b"
    assert (parent.path, child.moved) == ("/srv/a", None)


# ------------------------------------------------------------------ through the engine


def _cd(target: str | list[str]) -> ModelReply:
    command = target if isinstance(target, list) else f"cd {target}"
    call = ToolCallRequest(id="cd", name="run_command", args={"command": command})
    return ModelReply(text="", tool_calls=[call])


async def test_commands_run_in_the_sessions_directory_and_cd_moves_it(
    config: Config, place: Path
) -> None:
    """R86: a task started with ``cwd`` runs ``pwd`` there; ``cd link`` (a symlink)
    moves the task and the session to the real ``sub``, says so with one ``workdir``
    event and is stored; the next ``pwd`` and a relative ``cwd`` argument are taken
    from there; the session's next task starts there without naming it."""
    turns = [
        _calls("pwd"),
        _cd("link"),
        _calls("pwd"),
        _calls("pwd", cwd=Path("..")),
        ModelReply(text="done"),
        _calls("pwd"),
        ModelReply(text="again"),
    ]
    with trio.fail_after(DEADLINE_S):
        async with gate(config, turns, _approve()) as (engine, model, _asked):
            run = await engine.start_task(SESSION, "go", cwd=str(place))
            assert (await run.wait_done()).status == "finished"
            results = [_tool_results(model, turn)[-1] for turn in range(1, 5)]
            assert results == [
                f"exit 0\n{place}\n",
                f"the working directory is now {place / 'sub'}",
                f"exit 0\n{place / 'sub'}\n",
                f"exit 0\n{place}\n",
            ]
            moves = [e for e in engine.session(SESSION).hub.events_of(run.task_hash)]
            assert [e.path for e in moves if isinstance(e, ev.Workdir)] == [str(place / "sub")]
            assert run.workdir.path == str(place / "sub")
            assert await engine.store.session_workdir(SESSION) == str(place / "sub")
            second = await engine.start_task(SESSION, "more")
            assert (await second.wait_done()).status == "finished"
            assert _tool_results(model, 6)[-1] == f"exit 0\n{place / 'sub'}\n"


async def test_a_cd_that_cannot_be_made_moves_nothing(config: Config, place: Path) -> None:
    """R86: ``cd`` into a directory that does not exist, into a file, or with two
    directories is a tool error naming where the task still is; no ``workdir`` event,
    nothing stored."""
    turns = [_cd("missing"), _cd("file"), _cd(["cd", "sub", "link"]), ModelReply(text="done")]
    with trio.fail_after(DEADLINE_S):
        async with gate(config, turns) as (engine, model, asked):
            run = await engine.start_task(SESSION, "go", cwd=str(place))
            assert (await run.wait_done()).status == "finished"
            results = [_tool_results(model, turn)[-1] for turn in range(1, 4)]
            still = f"the working directory is still {place}"
            assert results == [
                f"not run: the working directory 'missing' does not exist; {still}",
                f"not run: the working directory 'file' is not a directory; {still}",
                f"not run: cd takes exactly one directory (cd DIR); {still}",
            ]
            events = engine.session(SESSION).hub.events_of(run.task_hash)
            assert not [e for e in events if isinstance(e, ev.Workdir)]
            assert await engine.store.session_workdir(SESSION) == str(place)
            assert asked == []


async def test_a_bad_cwd_starts_no_task(config: Config, place: Path) -> None:
    """R86: a ``cwd`` that is not a directory refuses the task (`BadRequest`) before
    anything runs: no run, no stored task, the model never called."""
    model = ScriptedModel([_calls(f"touch {place / 'MARK'}"), ModelReply(text="done")])
    with trio.fail_after(DEADLINE_S):
        async with open_engine(config, model=model) as engine:
            with pytest.raises(BadRequest, match="/missing' does not exist"):
                await engine.start_task(SESSION, "go", cwd=str(place / "missing"))
            assert engine.session(SESSION).runs == {}
            assert await engine.store.list_tasks(SESSION) == []
    assert model.calls == []
    assert not (place / "MARK").exists()
