"""Fixtures for in-process engine tests: a temp home, a mock-clock wall clock."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
import trio

from engine.config import Config
from engine.models.base import Message, ModelReply, TextSink, ToolSpec

#: Wall time at mock-clock zero, so stored times look like real Unix times.
EPOCH = 1_800_000_000.0


def mock_wall_clock() -> float:
    return EPOCH + trio.current_time()


@pytest.fixture
def config(tmp_path: Path) -> Config:
    return Config(home=str(tmp_path / "home"))


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
    ) -> ModelReply:
        self.calls += 1
        self.entered.set()
        await trio.sleep_forever()
        raise AssertionError("unreachable")


@pytest.fixture
def wall_clock() -> Callable[[], float]:
    return mock_wall_clock
