"""A session's last exchanges for a reopened window, and ``/compact`` told to the
session's watchers (issue 31 item 3; R87: the conversation and its compaction).

`agentrio.engine.recent` reads them from the stored conversation, folded or not; the
command layer's ``compact`` makes the session's ``compacted`` event (reason
``request``, no task) as a task's own compaction does.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import trio.testing

from agentrio.engine.assembly import open_engine
from agentrio.engine.config import Config
from agentrio.engine.conversation import Summary, exchange_json
from agentrio.engine.errors import BadRequest
from agentrio.engine.models.base import Message, ModelReply
from agentrio.engine.models.scripted import ScriptedModel
from agentrio.engine.recent import MAX_RECENT, RECENT_TEXT_BYTES, recent_exchanges
from agentrio.engine.server.commands import Commands
from agentrio.engine.store.base import Store
from agentrio.protocol.events import Compacted
from agentrio.protocol.frames import Compact
from agentrio.protocol.http import RecentExchange
from tests.engine.test_store import SESSION, _history, store

__all__ = ["store"]  # the fixture (both backends), imported for these tests


async def test_a_folded_conversation_still_lists_its_exchanges(store: Store) -> None:
    """R87: ``conversation(folded=True)`` also returns the exchanges the summary covers
    (newest ``limit``, oldest first); without it only those after the summary."""
    for index, end_at in enumerate((10.0, 20.0, 30.0)):
        said = [Message(role="user", content=f"q{index}"), Message(role="assistant", content="a")]
        await store.add_history(_history(f"{index:032x}", end_at, exchange=exchange_json(said)))
    await store.put_summary(SESSION, Summary(text="s", upto=20.0))
    after = await store.conversation(SESSION, limit=10)
    assert [e.end_at for e in after.exchanges] == [30.0]
    folded = await store.conversation(SESSION, limit=2, folded=True)
    assert folded.summary == Summary(text="s", upto=20.0)
    assert [e.end_at for e in folded.exchanges] == [20.0, 30.0]


async def test_recent_exchanges_say_the_objective_and_the_last_reply(store: Store) -> None:
    """R87: each exchange reads as the task's objective (not a resume message) and its
    last text; long texts are clamped; the limit is bounded."""
    messages = [
        Message(role="user", content="[Resumed Task — interrupted execution recovered] …"),
        Message(role="assistant", content="first words"),
        Message(role="assistant", content="x" * (3 * RECENT_TEXT_BYTES)),
        Message(role="assistant", content=""),
    ]
    row = _history("a" * 32, 5.0, objective="tidy the logs", exchange=exchange_json(messages))
    await store.add_history(row)
    recent = await recent_exchanges(store, SESSION)
    [only] = recent.exchanges
    assert (only.task_hash, only.end_at, only.input) == ("a" * 32, 5.0, "tidy the logs")
    assert only.reply.startswith("xxx")
    assert "bytes elided]" in only.reply
    assert len(only.reply.encode()) <= RECENT_TEXT_BYTES + 64
    assert (await recent_exchanges(store, SESSION, 0)).exchanges == []
    with pytest.raises(BadRequest):
        await recent_exchanges(store, SESSION, MAX_RECENT + 1)


async def test_compact_on_request_is_a_session_event_and_recent_still_shows(
    config: Config, autojump_clock: trio.testing.MockClock, wall_clock: Callable[[], float]
) -> None:
    """R87, issue 31 (3): ``compact`` folds the session's exchanges and its watchers get
    one ``compacted`` event (reason ``request``, no task hash); the last exchanges are
    still there for a reopened window."""
    model = ScriptedModel(
        [ModelReply(text="Nice to meet you, Ada."), ModelReply(text="Ada said hello.")]
    )
    async with open_engine(config, model=model, clock=wall_clock) as engine:
        commands = Commands(engine)
        run = await engine.start_task(SESSION, "my name is Ada")
        assert (await run.wait_done()).status == "finished"
        with engine.session(SESSION).hub.subscribe(replay=False) as watcher:
            compaction = await commands.compact(Compact(session_id=SESSION))
            task_hash, event = watcher.receive_nowait()
        assert compaction.summarised == 1
        assert task_hash == ""
        assert isinstance(event, Compacted)
        assert (event.summarised, event.elided, event.reason) == (1, 0, "request")
        recent = await commands.recent(SESSION)
    assert recent.exchanges == [
        RecentExchange(
            task_hash=run.task_hash,
            end_at=recent.exchanges[0].end_at,
            input="my name is Ada",
            reply="Nice to meet you, Ada.",
        )
    ]
