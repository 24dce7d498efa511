"""``/compact`` in the engine (issue 31 items 3, 7): the session's exchanges folded on
request, and the summary's tokens counted in the session's usage."""

from __future__ import annotations

from collections.abc import Callable

import trio.testing

from agentrio.engine.assembly import open_engine
from agentrio.engine.compaction import compact_session
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
