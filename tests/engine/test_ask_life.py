"""An ask's life (engine/ask_life.py, issue 34 item 1: R97): the registry tells every
change, each is one ``ask_state`` event, and a shown ask not acknowledged within
`ACK_WAIT_S` says so (``late``) — under a mock clock, no sleeps for timing."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from agentrio.engine.ask_life import AskLife, answer_word
from agentrio.engine.asks import TASK_CANCELED
from agentrio.engine.pending import AskReply, Offered, PendingRegistry
from agentrio.protocol.asks import ACK_WAIT_S, Answer, frontend_name
from agentrio.protocol.causes import Cause
from tests.engine.test_pending import request, start_producer


class Recorded:
    """The life of one registry, its events kept as dicts (without the session)."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.registry = PendingRegistry()
        self.life = AskLife(self.emit, trio.current_time)
        self.registry.observe = self.life.changed

    def emit(self, session_id: str, task_hash: str, **fields: Any) -> None:
        self.events.append(fields)

    def states(self) -> list[tuple[str, bool, bool]]:
        return [
            (e["state"], e.get("acknowledged", False), e.get("late", False)) for e in self.events
        ]


async def test_waiting_shown_acknowledged_answered(autojump_clock: trio.testing.MockClock) -> None:
    """R97: an ask waits, is shown on the listener's front-end, acknowledged there, then
    answered through it: four events, and the listing follows them."""
    rec = Recorded()
    async with trio.open_nursery() as nursery:
        producer = await start_producer(nursery, rec.registry, request("chat-a"))
        listener = rec.registry.listen("chat-")
        rec.life.name(listener, "telegram")
        notice = await listener.next_notice()
        assert isinstance(notice, Offered)
        (info,) = rec.life.open("chat-a")
        assert (info.state, info.frontend, info.acknowledged) == ("shown", "telegram", False)
        rec.life.acknowledge(notice.entry, "telegram")
        rec.life.acknowledge(notice.entry, "telegram")  # idempotent: no second event
        assert rec.life.open("chat-a")[0].acknowledged
        rec.registry.resolve(notice.entry.id, AskReply(approve=True), by=listener)
        await trio.testing.wait_all_tasks_blocked()
    assert producer.reply == AskReply(approve=True)
    assert rec.states() == [
        ("waiting", False, False),
        ("shown", False, False),
        ("shown", True, False),
        ("answered", False, False),
    ]
    assert rec.events[-1]["frontend"] == "telegram"
    assert rec.events[-1]["answer"] == "approved"
    assert rec.life.open("chat-a") == []


async def test_an_unacknowledged_ask_says_so_then_an_ack_clears_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R97: shown and not acknowledged for `ACK_WAIT_S`, the ask is ``late`` (an event
    and the listing); acknowledged afterwards it is not late any more. An ask
    acknowledged in time is never late."""
    rec = Recorded()
    async with trio.open_nursery() as nursery:
        await nursery.start(rec.life.run_late)
        slow = await start_producer(nursery, rec.registry, request("chat-s", task_hash="1" * 32))
        listener = rec.registry.listen("chat-")
        rec.life.name(listener, "repl")
        first = await listener.next_notice()
        assert isinstance(first, Offered)
        await trio.sleep(ACK_WAIT_S / 2)
        assert not rec.life.open("chat-s")[0].late
        await trio.sleep(ACK_WAIT_S)
        assert rec.life.open("chat-s")[0].late
        assert rec.states()[-1] == ("shown", False, True)
        rec.life.acknowledge(first.entry, "repl")
        assert rec.states()[-1] == ("shown", True, False)
        prompt = await start_producer(nursery, rec.registry, request("chat-p", task_hash="2" * 32))
        second = await listener.next_notice()
        assert isinstance(second, Offered)
        rec.life.acknowledge(second.entry, "repl")
        await trio.sleep(ACK_WAIT_S * 3)
        assert not rec.life.open("chat-p")[0].late
        slow.scope.cancel()
        prompt.scope.cancel()
        nursery.cancel_scope.cancel()
    late = [e for e in rec.events if e.get("late")]
    assert [e["ask_id"] for e in late] == [first.entry.id]


async def test_withdrawals_say_why_and_are_never_an_answer(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R97, R98: a cancelled task's ask is withdrawn ``task_stopped``, one whose
    listener went away ``listener_gone``, a parked one dropped ``superseded``; none is
    recorded as answered (or denied)."""
    rec = Recorded()
    async with trio.open_nursery() as nursery:
        stopped = await start_producer(nursery, rec.registry, request("cli-x"))
        gone = await start_producer(nursery, rec.registry, request("chat-g"))
        listener = rec.registry.listen("chat-")
        assert isinstance(await listener.next_notice(), Offered)
        stopped.scope.cancel()
        await trio.testing.wait_all_tasks_blocked()
        listener.close()
        await trio.testing.wait_all_tasks_blocked()
        parked = rec.registry.offer_parked(request("tg-p"))
        rec.registry.remove(parked.id, "resumed")
    assert gone.error is not None
    assert stopped.cancelled
    withdrawn = {
        e["ask_id"]: (e["why"], e["reason"]) for e in rec.events if e["state"] == "withdrawn"
    }
    assert withdrawn.pop(parked.id) == ("superseded", "resumed")
    assert withdrawn[stopped.entry.id if stopped.entry else ""] == ("task_stopped", TASK_CANCELED)
    gone_events = [e for e in rec.events if gone.entry and e["ask_id"] == gone.entry.id]
    assert [e["state"] for e in gone_events] == ["waiting", "shown", "withdrawn"]
    assert gone_events[-1]["why"] == "listener_gone"
    assert not any(e["state"] == "answered" for e in rec.events)


def test_answer_words_never_carry_the_answer() -> None:
    """R97, R73: the answer is named by what it was, never by its text or password."""
    assert answer_word("tool_confirm", Answer(approve=True)) == "approved"
    assert answer_word("tool_confirm", Answer(approve=False, reason="no")) == "denied"
    assert answer_word("tool_confirm", Answer()) == "denied"
    assert answer_word("secret", Answer(answers=["hunter2"])) == "answered"
    assert answer_word("ask_user", Answer(approve=False)) == "declined"
    assert answer_word("ask_user", Answer(stop=Cause.USER_CANCELED)) == "stopped"


def test_frontend_names() -> None:
    """R97: an ask's state names the front-end as docs/protocol.md says: a ``hello``'s
    client without ``agentrio-`` and a version; any other name as it is."""
    assert [
        frontend_name(client)
        for client in ("agentrio-repl/0.1.0", "agentrio-telegram/1", "agentrio-client/1", "web")
    ] == ["repl", "telegram", "client", "web"]
