"""``/compact`` in the engine (issue 31 items 3, 7): the session's exchanges folded on
request, and the summary's tokens counted in the session's usage."""

from __future__ import annotations

from collections.abc import Callable

import attrs
import trio.testing

from agentrio.engine.assembly import open_engine
from agentrio.engine.compaction import budget, compact_session
from agentrio.engine.config import Config
from agentrio.engine.models.base import ModelReply, Usage
from agentrio.engine.models.scripted import ScriptedModel
from agentrio.protocol.events import TokenUsage

SESSION = "cli-compact"


async def test_compact_on_request_folds_the_exchanges_and_counts_the_summary(
    config: Config, autojump_clock: trio.testing.MockClock, wall_clock: Callable[[], float]
) -> None:
    """Issue 31 (3, 7): after one task, ``compact_session`` folds its exchange into the
    stored summary (the model's words), counts the summary call in the session's
    usage, and a second call finds nothing left to fold."""
    model = ScriptedModel(
        [
            ModelReply(text="Hello, Ada.", usage=Usage(input_tokens=20, output_tokens=4)),
            ModelReply(
                text="Ada introduced herself.", usage=Usage(input_tokens=50, output_tokens=5)
            ),
        ]
    )
    async with open_engine(config, model=model, clock=wall_clock) as engine:
        run = await engine.start_task(SESSION, "I am Ada")
        assert (await run.wait_done()).status == "finished"
        session = engine.session(SESSION)
        assert session.usage == TokenUsage(input_tokens=20, output_tokens=4, calls=1)
        assert await compact_session(engine.services, SESSION, session) == 1
        stored = await engine.store.conversation(SESSION, limit=10)
        assert stored.summary is not None
        assert (stored.summary.text, stored.exchanges) == ("Ada introduced herself.", [])
        assert session.usage == TokenUsage(input_tokens=70, output_tokens=9, calls=2)
        assert await compact_session(engine.services, SESSION, session) == 0
    assert len(model.calls) == 2  # nothing to fold: the model is not asked


async def test_a_summary_keeps_to_its_share_of_the_budget(
    config: Config, autojump_clock: trio.testing.MockClock, wall_clock: Callable[[], float]
) -> None:
    """Issue 31 (3): the stored summary is in every later task's input, so it stays
    within a quarter of the budget (in bytes, ~4 a token) -- a model's long answer is
    clamped with the elision marker, and a model that gives no summary, compacted
    again and again, does not grow the plain list of requests without end."""
    config = attrs.evolve(config, model=attrs.evolve(config.model, context_tokens=4096))
    limit = budget(config.model)
    long_answer = ModelReply(text="s" * (5 * limit))
    replies = [ModelReply(text="ok"), long_answer]
    for _ in range(12):
        replies += [ModelReply(text="ok"), ModelReply(text="")]  # no summary given
    model = ScriptedModel(replies)
    async with open_engine(config, model=model, clock=wall_clock) as engine:
        run = await engine.start_task(SESSION, "first")
        assert (await run.wait_done()).status == "finished"
        await compact_session(engine.services, SESSION, engine.session(SESSION))
        stored = await engine.store.conversation(SESSION, limit=10)
        assert stored.summary is not None
        assert "bytes elided]" in stored.summary.text
        assert len(stored.summary.text.encode()) <= limit + 64
        for index in range(12):
            await trio.sleep(1)  # each exchange ends after the summary it follows
            run = await engine.start_task(SESSION, f"request {index} " + "r" * 150)
            assert (await run.wait_done()).status == "finished"
            await compact_session(engine.services, SESSION, engine.session(SESSION))
        stored = await engine.store.conversation(SESSION, limit=10)
        assert stored.summary is not None
        assert "request 11 " in stored.summary.text  # the newest request is kept
        assert len(stored.summary.text.encode()) <= limit + 64
