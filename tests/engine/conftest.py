"""Fixtures for in-process engine tests: a temp home, a mock-clock wall clock."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
import trio

from agentrio.engine import system_prompt, workdirs
from agentrio.engine.config import AgentConfig, Config
from agentrio.engine.models.base import Message, ModelReply, RetrySink, TextSink, ToolSpec
from agentrio.engine.store.sqlite import SqliteStore
from agentrio.engine.tools.workdir import resolve_workdir

#: Wall time at mock-clock zero, so stored times look like real Unix times.
EPOCH = 1_800_000_000.0


def first_input(messages: Sequence[Message]) -> str:
    """The first message a model call was sent after its system messages (the system
    prompt and any summary): a run's first input, which the tests' models tell runs
    apart by."""
    return next(m.content for m in messages if m.role != "system")


def mock_wall_clock() -> float:
    return EPOCH + trio.current_time()


@pytest.fixture
def config(tmp_path: Path) -> Config:
    """A temp home; sessions that name no directory work in the test's working
    directory (``[agent] cwd``, R86), as `agentrio.testing.allow_commands` expects."""
    return Config(home=str(tmp_path / "home"), agent=AgentConfig(cwd=os.getcwd()))


class HangingModel:
    """A model whose calls never return until cancelled: a run that stays busy."""

    name = "hanging"

    def __init__(self) -> None:
        self.calls = 0
        self.entered = trio.Event()

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        *,
        on_text: TextSink | None = None,
        on_retry: RetrySink | None = None,
    ) -> ModelReply:
        self.calls += 1
        self.entered.set()
        await trio.sleep_forever()
        raise AssertionError("unreachable")


@pytest.fixture
def wall_clock() -> Callable[[], float]:
    return mock_wall_clock


@pytest.fixture(autouse=True)
def _store_inline_under_mock_clock(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under ``autojump_clock`` every store the test opens runs inline on the Trio
    thread: the mock clock jumps whenever all tasks wait, and a task waiting on the
    store's worker thread counts as waiting — a 60 s marker TTL could pass during one
    write on a loaded machine."""
    if "autojump_clock" not in request.fixturenames:
        return
    original = SqliteStore.open.__func__  # type: ignore[attr-defined]

    async def open_inline(cls: type[SqliteStore], path: object, *, inline: bool = True) -> object:
        return await original(cls, path, inline=inline)

    monkeypatch.setattr(SqliteStore, "open", classmethod(open_inline))

    async def inline(fn: Callable[[], object]) -> object:
        return fn()

    # A run's system prompt reads the file system (AGENTS.md) the same way.
    monkeypatch.setattr(system_prompt, "in_thread", inline)

    async def resolve_inline(cwd: str | None, base: str) -> str:
        return resolve_workdir(cwd, base)

    # So does a task's start, resolving its session's directory (R86).
    monkeypatch.setattr(workdirs, "real_workdir", resolve_inline)
