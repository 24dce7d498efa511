"""Unit tests of the pending ask registry (engine/pending.py, SPEC R1-R6, R8 B, R11, R73).

Producers run as real Trio tasks; `trio.testing.wait_all_tasks_blocked` brings every
task to rest ("parked") before each assertion, so no test depends on timing.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from agentrio.engine.errors import AlreadyResolved, AskFailed, Forbidden
from agentrio.engine.pending import (
    AskReply,
    AskRequest,
    Entry,
    Listener,
    Notice,
    Offered,
    PendingRegistry,
    RegistryStatistics,
    Withdrawn,
)
from agentrio.protocol.events import Question

TASK = "0" * 32


def request(session_id: str = "cli-s1", window_hash: str = "", **kw: Any) -> AskRequest:
    return AskRequest(
        kind=kw.pop("kind", "tool_confirm"),
        session_id=session_id,
        task_hash=kw.pop("task_hash", TASK),
        window_hash=window_hash,
        tool_name=kw.pop("tool_name", "shell"),
        **kw,
    )


class Producer:
    """One task blocked in `ask`; records how it ended."""

    def __init__(self, registry: PendingRegistry, req: AskRequest) -> None:
        self.registry = registry
        self.request = req
        self.scope = trio.CancelScope()
        self.entry: Entry | None = None
        self.reply: AskReply | None = None
        self.error: BaseException | None = None
        self.cancelled = False
        self.done = False

    def _registered(self, entry: Entry) -> None:
        self.entry = entry

    async def run(self) -> None:
        with self.scope:
            try:
                self.reply = await self.registry.ask(self.request, on_registered=self._registered)
            except AskFailed as exc:
                self.error = exc
        self.cancelled = self.scope.cancelled_caught
        self.done = True


async def start_producer(
    nursery: trio.Nursery, registry: PendingRegistry, req: AskRequest
) -> Producer:
    producer = Producer(registry, req)
    nursery.start_soon(producer.run)
    await trio.testing.wait_all_tasks_blocked()
    assert producer.entry is not None
    return producer


def entry_of(producer: Producer) -> Entry:
    assert producer.entry is not None
    return producer.entry


async def notice_now(listener: Listener) -> Notice | None:
    """The notice ``listener`` has for us right now, or None where next_notice would
    wait; never blocks, so a regression fails instead of hanging."""
    got: list[Notice] = []

    async def take() -> None:
        got.append(await listener.next_notice())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(take)
        await trio.testing.wait_all_tasks_blocked()
        nursery.cancel_scope.cancel()
    return got[0] if got else None


# -- R1 ------------------------------------------------------------------------------


async def test_ask_suspends_until_exactly_one_reply() -> None:
    """R1: the producer waits until a reply; the second reply gets "already resolved"."""
    registry = PendingRegistry()
    async with trio.open_nursery() as nursery:
        producer = await start_producer(nursery, registry, request())
        entry = entry_of(producer)
        assert producer.done is False
        assert registry.get(entry.id) is entry
        reply = AskReply(approve=True, reason="ok")
        assert registry.resolve(entry.id, reply) is entry
        with pytest.raises(AlreadyResolved) as info:
            registry.resolve(entry.id, AskReply(approve=False))
        assert str(info.value) == f"ask {entry.id} is already resolved or gone"
        with pytest.raises(AlreadyResolved):
            registry.fail(entry.id, "late")
    assert producer.reply is reply
    assert producer.error is None
    assert entry.resolved is True
    assert entry.reply is reply
    assert registry.get(entry.id) is None


async def test_on_registered_runs_before_any_listener_can_answer() -> None:
    """R1: on_registered sees the entry registered but not yet offered to anyone."""
    registry = PendingRegistry()
    listener = registry.listen("cli-")
    seen: list[tuple[bool, frozenset[str], int]] = []

    def on_registered(entry: Entry) -> None:
        seen.append((registry.get(entry.id) is entry, listener.claimed, len(seen)))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: registry.ask(request(), on_registered=on_registered))
        await trio.testing.wait_all_tasks_blocked()
        notice = await notice_now(listener)
        assert isinstance(notice, Offered)
        assert seen == [(True, frozenset(), 0)]
        registry.resolve(notice.entry.id, AskReply(approve=False), by=listener)


async def test_on_registered_error_removes_entry() -> None:
    """R1: if on_registered raises, the entry leaves the registry and the error propagates."""
    registry = PendingRegistry()

    def boom(entry: Entry) -> None:
        raise RuntimeError("emit failed")

    with pytest.raises(RuntimeError, match="emit failed"):
        await registry.ask(request(), on_registered=boom)
    assert registry.entries() == []
    assert registry.statistics().withdrawn_total == 1


async def test_fail_raises_ask_failed_in_producer() -> None:
    """R1/R6: an entry resolved with an error makes the producer raise AskFailed."""
    registry = PendingRegistry()
    async with trio.open_nursery() as nursery:
        producer = await start_producer(nursery, registry, request())
        registry.fail(entry_of(producer).id, "store unavailable")
    assert producer.reply is None
    assert isinstance(producer.error, AskFailed)
    assert str(producer.error) == "store unavailable"
    assert entry_of(producer).error == "store unavailable"


async def test_cancelled_producer_registers_nothing() -> None:
    """R1/R3: a producer that is already cancelled never registers an entry."""
    registry = PendingRegistry()
    calls: list[Entry] = []
    with trio.CancelScope() as scope:
        scope.cancel()
        await registry.ask(request(), on_registered=calls.append)
    assert scope.cancelled_caught is True
    assert calls == []
    assert registry.statistics().asked_total == 0


# -- R2 ------------------------------------------------------------------------------


async def test_pick_next_oldest_first_by_prefix_and_accept() -> None:
    """R2: pick_next takes the oldest unclaimed entry under the prefix that accept takes."""
    registry = PendingRegistry()
    cli = registry.listen("cli-")
    chat = registry.listen("chat-")
    every = registry.listen("")
    async with trio.open_nursery() as nursery:
        a = entry_of(await start_producer(nursery, registry, request("cli-a")))
        b = entry_of(await start_producer(nursery, registry, request("chat-b")))
        c = entry_of(await start_producer(nursery, registry, request("cli-c", kind="ask_user")))
        assert registry.pick_next(cli, accept=lambda e: e.request.kind == "ask_user") is c
        assert c.claimed_by is cli
        assert registry.pick_next(cli) is a
        assert registry.pick_next(cli) is None
        assert registry.pick_next(every) is b
        assert registry.pick_next(chat) is None
        assert registry.pick_next(every) is None
        assert cli.claimed == {a.id, c.id}
        assert every.claimed == {b.id}
        nursery.cancel_scope.cancel()


async def test_listener_is_woken_by_a_matching_entry_only() -> None:
    """R2: a waiting listener wakes when a matching entry arrives; others stay asleep."""
    registry = PendingRegistry()
    cli = registry.listen("cli-")
    chat = registry.listen("chat-")
    got: dict[str, list[object]] = {"cli": [], "chat": []}

    chat_scope = trio.CancelScope()

    async def watch(name: str, listener: Listener) -> None:
        got[name].append(await listener.next_notice())

    async def watch_chat() -> None:
        with chat_scope:
            await watch("chat", chat)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(watch, "cli", cli)
        nursery.start_soon(watch_chat)
        await trio.testing.wait_all_tasks_blocked()
        producer = await start_producer(nursery, registry, request("cli-x"))
        assert got == {"cli": [Offered(entry_of(producer))], "chat": []}
        chat_scope.cancel()
        registry.resolve(entry_of(producer).id, AskReply(approve=True), by=cli)
    assert chat_scope.cancelled_caught is True
    assert producer.reply == AskReply(approve=True)


async def test_cancelling_next_notice_loses_nothing() -> None:
    """R2: a cancelled next_notice claims nothing; the entry is offered on the next call."""
    registry = PendingRegistry()
    listener = registry.listen("cli-")
    async with trio.open_nursery() as nursery:
        producer = await start_producer(nursery, registry, request())
        with trio.CancelScope() as scope:
            scope.cancel()
            await listener.next_notice()
        assert scope.cancelled_caught is True
        assert listener.claimed == frozenset()
        assert await notice_now(listener) == Offered(entry_of(producer))
        nursery.cancel_scope.cancel()


# -- R3 ------------------------------------------------------------------------------


async def test_producer_cancel_withdraws_entry_at_once() -> None:
    """R3: cancelling the producer removes its entry in the same instant and tells the
    claimer "task canceled"; a reply after that is refused."""
    registry = PendingRegistry()
    listener = registry.listen("cli-")
    async with trio.open_nursery() as nursery:
        producer = await start_producer(nursery, registry, request())
        offered = await notice_now(listener)
        assert offered == Offered(entry_of(producer))
        producer.scope.cancel()
        # No checkpoint yet: the producer has not run again, but its entry is gone.
        assert registry.get(entry_of(producer).id) is None
        assert listener.claimed == frozenset()
        with pytest.raises(AlreadyResolved):
            registry.resolve(entry_of(producer).id, AskReply(approve=True), by=listener)
        assert await notice_now(listener) == Withdrawn(entry_of(producer).id, "task canceled")
    assert producer.cancelled is True
    assert producer.reply is None
    assert producer.error is None
    assert entry_of(producer).resolved is True
    stats = registry.statistics()
    assert (stats.entries, stats.withdrawn_total, stats.answered_total) == (0, 1, 0)


async def test_cancel_of_unclaimed_entry_wakes_nobody() -> None:
    """R3: an unclaimed entry whose producer is cancelled is never offered afterwards."""
    registry = PendingRegistry()
    async with trio.open_nursery() as nursery:
        producer = await start_producer(nursery, registry, request())
        producer.scope.cancel()
        await trio.testing.wait_all_tasks_blocked()
        listener = registry.listen("")
        assert registry.pick_next(listener) is None
    assert producer.cancelled is True
    assert registry.entries() == []


async def test_withdrawn_before_offered_is_reported_first() -> None:
    """R3: pending Withdrawn notices come before new offers."""
    registry = PendingRegistry()
    listener = registry.listen("cli-")
    async with trio.open_nursery() as nursery:
        first = await start_producer(nursery, registry, request())
        assert await notice_now(listener) == Offered(entry_of(first))
        second = await start_producer(nursery, registry, request())
        first.scope.cancel()
        assert await notice_now(listener) == Withdrawn(entry_of(first).id, "task canceled")
        assert await notice_now(listener) == Offered(entry_of(second))
        nursery.cancel_scope.cancel()


# -- R4, R8 B ------------------------------------------------------------------------


async def test_has_listener_needs_prefix_and_match() -> None:
    """R4: has_listener is true only for a listener whose prefix matches the session id
    and whose match accepts the request; there is no global flag."""
    registry = PendingRegistry()
    req = request("cli-s1", window_hash="w1")
    assert registry.has_listener("cli-", req) is False
    chat = registry.listen("chat-")
    assert registry.has_listener("cli-", req) is False
    other_window = registry.listen("cli-", windows={"w2"})
    assert registry.has_listener("cli-", req) is False
    own_window = registry.listen("cli-", windows={"w1"})
    assert registry.has_listener("cli-", req) is True
    assert registry.has_listener("cli-s1", req) is True
    assert registry.has_listener("", req) is True
    assert registry.has_listener("chat-", req) is False
    own_window.close()
    assert registry.has_listener("cli-", req) is False
    everyone = registry.listen("")
    assert registry.has_listener("cli-", req) is False  # R78: a window's ask
    assert registry.has_listener("cli-", request("cli-s1")) is True  # no window
    assert registry.has_listener("tg-", request("tg-1")) is True
    for listener in (chat, other_window, everyone):
        listener.close()
    assert registry.statistics().listeners == 0


async def test_passive_listener_counts_but_never_picks() -> None:
    """R8 B: an event subscriber counts for has_listener but never picks; it answers
    over HTTP (by=None)."""
    registry = PendingRegistry()
    with registry.listen("chat-s9", passive=True) as subscriber:
        req = request("chat-s9")
        assert registry.has_listener("chat-", req) is True
        assert registry.has_listener("chat-s9", req) is True
        assert registry.has_listener("chat-", request("chat-other")) is False
        async with trio.open_nursery() as nursery:
            producer = await start_producer(nursery, registry, req)
            assert registry.pick_next(subscriber) is None
            assert await notice_now(subscriber) is None
            registry.resolve(entry_of(producer).id, AskReply(approve=False, reason="no"))
        assert producer.reply == AskReply(approve=False, reason="no")
    assert subscriber.closed is True


# -- R5 ------------------------------------------------------------------------------


async def test_question_from_one_window_never_reaches_another() -> None:
    """R5: each REPL connection matches only the window hashes it started."""
    registry = PendingRegistry()
    conn_a = registry.listen("cli-", windows={"wa"})
    conn_b = registry.listen("cli-", windows={"wb1", "wb2"})
    async with trio.open_nursery() as nursery:
        ask_b = await start_producer(nursery, registry, request("cli-1", window_hash="wb2"))
        ask_a = await start_producer(nursery, registry, request("cli-1", window_hash="wa"))
        ask_none = await start_producer(nursery, registry, request("cli-1", window_hash="wz"))
        assert registry.pick_next(conn_a) is entry_of(ask_a)
        assert registry.pick_next(conn_a) is None
        assert registry.pick_next(conn_b) is entry_of(ask_b)
        assert registry.pick_next(conn_b) is None
        assert entry_of(ask_none).claimed_by is None
        with pytest.raises(Forbidden):
            registry.resolve(entry_of(ask_b).id, AskReply(approve=True), by=conn_a)
        registry.resolve(entry_of(ask_b).id, AskReply(approve=True), by=conn_b)
        registry.resolve(entry_of(ask_a).id, AskReply(approve=False), by=conn_a)
        nursery.cancel_scope.cancel()
    assert ask_b.reply == AskReply(approve=True)
    assert ask_a.reply == AskReply(approve=False)


# -- R6 ------------------------------------------------------------------------------


async def test_close_fails_claimed_asks_never_approves() -> None:
    """R6: closing a connection resolves its claimed asks with "client disconnected";
    the producer raises AskFailed and never sees a reply."""
    registry = PendingRegistry()
    async with trio.open_nursery() as nursery:
        with registry.listen("cli-") as conn:
            producer = await start_producer(nursery, registry, request())
            assert await notice_now(conn) == Offered(entry_of(producer))
            stays = registry.listen("cli-")
            other = await start_producer(nursery, registry, request("cli-2"))
        await trio.testing.wait_all_tasks_blocked()
        assert producer.done is True
        assert producer.reply is None
        assert isinstance(producer.error, AskFailed)
        assert str(producer.error) == "client disconnected"
        assert other.done is False
        assert registry.pick_next(stays) is entry_of(other)
        stays.close("bye")
    assert isinstance(other.error, AskFailed)
    assert str(other.error) == "bye"
    assert registry.statistics().failed_total == 2


async def test_close_fails_unclaimed_asks_left_without_listener() -> None:
    """R6: a live ask the closed listener could take and that no one else can take is
    failed, not left hanging; asks others can still take, or it never matched, stay."""
    registry = PendingRegistry()
    conn = registry.listen("cli-", windows={"w1"})
    registry.listen("chat-")
    async with trio.open_nursery() as nursery:
        orphan = await start_producer(nursery, registry, request("cli-1", window_hash="w1"))
        unrelated = await start_producer(nursery, registry, request("cli-1", window_hash="w9"))
        covered = await start_producer(nursery, registry, request("chat-1"))
        conn.close()
        await trio.testing.wait_all_tasks_blocked()
        assert isinstance(orphan.error, AskFailed)
        assert str(orphan.error) == "client disconnected"
        assert (unrelated.done, covered.done) == (False, False)
        assert [e.id for e in registry.entries()] == [
            entry_of(unrelated).id,
            entry_of(covered).id,
        ]
        nursery.cancel_scope.cancel()


async def test_close_is_idempotent_and_ends_next_notice() -> None:
    """R6: close is idempotent; a waiting or later next_notice raises ClosedResourceError."""
    registry = PendingRegistry()
    listener = registry.listen("")
    raised: list[type[BaseException]] = []

    async def waiter() -> None:
        try:
            await listener.next_notice()
        except trio.ClosedResourceError as exc:
            raised.append(type(exc))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiter)
        await trio.testing.wait_all_tasks_blocked()
        listener.close()
        listener.close("again")
        await trio.testing.wait_all_tasks_blocked()
        assert raised == [trio.ClosedResourceError]
    with pytest.raises(trio.ClosedResourceError):
        await listener.next_notice()
    with pytest.raises(trio.ClosedResourceError):
        registry.pick_next(listener)
    assert registry.statistics().listeners == 0


# -- R11 parked entries -------------------------------------------------------------


async def test_parked_entry_is_offered_and_resolved_by_reply() -> None:
    """R11: a parked entry (no live producer) can be picked; a reply resolves and removes
    it and returns it to the caller, which resumes the task."""
    registry = PendingRegistry()
    listener = registry.listen("chat-")
    questions = [Question(text="Which branch?", options=["main", "dev"])]
    entry = registry.offer_parked(request("chat-7", kind="ask_user", questions=questions))
    assert entry.parked is True
    assert registry.has_listener("chat-", entry.request) is True
    assert await notice_now(listener) == Offered(entry)
    reply = AskReply(answers=["dev"])
    assert registry.resolve(entry.id, reply, by=listener) is entry
    assert entry.reply is reply
    assert registry.entries() == []
    with pytest.raises(AlreadyResolved):
        registry.resolve(entry.id, reply)


async def test_parked_entry_returns_to_pool_when_claimer_closes() -> None:
    """R11/R6: nothing waits on a parked entry, so its claimer's disconnect un-claims it
    instead of failing it; another listener is woken and can take it."""
    registry = PendingRegistry()
    first = registry.listen("chat-")
    second = registry.listen("chat-")
    entry = registry.offer_parked(request("chat-7", kind="ask_user"))
    assert registry.pick_next(first) is entry
    got: list[object] = []

    async def watch() -> None:
        got.append(await second.next_notice())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(watch)
        await trio.testing.wait_all_tasks_blocked()
        assert got == []
        first.close()
        await trio.testing.wait_all_tasks_blocked()
        assert got == [Offered(entry)]
    assert entry.claimed_by is second
    assert (entry.resolved, entry.error) == (False, None)
    second.close()
    assert registry.entries() == [entry]
    assert entry.claimed_by is None


async def test_remove_parked_entry_withdraws_it() -> None:
    """R11: remove drops a parked entry and tells its claimer; it is a no-op once gone,
    and refuses entries with a live producer."""
    registry = PendingRegistry()
    listener = registry.listen("")
    entry = registry.offer_parked(request("dc-1", kind="ask_user"))
    assert await notice_now(listener) == Offered(entry)
    registry.remove(entry.id, "resumed over HTTP")
    assert await notice_now(listener) == Withdrawn(entry.id, "resumed over HTTP")
    registry.remove(entry.id, "again")
    assert registry.statistics().withdrawn_total == 1
    async with trio.open_nursery() as nursery:
        producer = await start_producer(nursery, registry, request())
        with pytest.raises(ValueError, match="live producer"):
            registry.remove(entry_of(producer).id, "no")
        assert registry.get(entry_of(producer).id) is entry_of(producer)
        nursery.cancel_scope.cancel()


# -- who may answer -----------------------------------------------------------------


async def test_only_the_claimer_or_http_may_answer() -> None:
    """R1/R5: another listener gets Forbidden and the entry stays open; an HTTP reply
    (by=None) is accepted and the claimer is told the entry was answered elsewhere."""
    registry = PendingRegistry()
    claimer = registry.listen("cli-")
    intruder = registry.listen("cli-")
    async with trio.open_nursery() as nursery:
        producer = await start_producer(nursery, registry, request())
        entry = entry_of(producer)
        with pytest.raises(Forbidden):
            registry.resolve(entry.id, AskReply(approve=True), by=claimer)
        assert registry.pick_next(claimer) is entry
        with pytest.raises(Forbidden):
            registry.resolve(entry.id, AskReply(approve=True), by=intruder)
        assert registry.get(entry.id) is entry
        registry.resolve(entry.id, AskReply(approve=False, reason="from web"))
        assert await notice_now(claimer) == Withdrawn(entry.id, "answered elsewhere")
    assert producer.reply == AskReply(approve=False, reason="from web")


async def test_fail_tells_the_claimer() -> None:
    """R6: a failed entry is withdrawn from its claimer with the error as reason."""
    registry = PendingRegistry()
    listener = registry.listen("cli-")
    async with trio.open_nursery() as nursery:
        producer = await start_producer(nursery, registry, request())
        assert await notice_now(listener) == Offered(entry_of(producer))
        registry.fail(entry_of(producer).id, "shutdown")
        assert await notice_now(listener) == Withdrawn(entry_of(producer).id, "shutdown")
    assert str(producer.error) == "shutdown"


# -- introspection -------------------------------------------------------------------


async def test_statistics_and_entries() -> None:
    """R1-R6: statistics count open, claimed and parked entries and every outcome."""
    registry = PendingRegistry()
    listener = registry.listen("cli-")
    registry.listen("", passive=True)
    async with trio.open_nursery() as nursery:
        answered = await start_producer(nursery, registry, request("cli-1"))
        cancelled = await start_producer(nursery, registry, request("cli-2"))
        failed = await start_producer(nursery, registry, request("cli-1"))
        waiting = await start_producer(nursery, registry, request("chat-1"))
        parked = registry.offer_parked(request("cli-1", kind="ask_user"))
        assert registry.pick_next(listener) is entry_of(answered)
        assert registry.entries("cli-1") == [entry_of(answered), entry_of(failed), parked]
        assert registry.statistics() == RegistryStatistics(
            entries=5,
            claimed=1,
            parked=1,
            listeners=2,
            asked_total=5,
            answered_total=0,
            withdrawn_total=0,
            failed_total=0,
        )
        registry.resolve(entry_of(answered).id, AskReply(approve=True), by=listener)
        cancelled.scope.cancel()
        registry.fail(entry_of(failed).id, "x")
        await trio.testing.wait_all_tasks_blocked()
        assert registry.entries() == [entry_of(waiting), parked]
        assert registry.statistics() == RegistryStatistics(
            entries=2,
            claimed=0,
            parked=1,
            listeners=2,
            asked_total=5,
            answered_total=1,
            withdrawn_total=1,
            failed_total=1,
        )
        nursery.cancel_scope.cancel()


async def test_entry_time_and_origin(autojump_clock: trio.testing.MockClock) -> None:
    """R1: entries carry their creation time; a request knows its origin."""
    registry = PendingRegistry()
    await trio.sleep(5)
    entry = registry.offer_parked(request("tg-42"))
    assert entry.created_at == trio.current_time()
    assert entry.request.origin == "tg-"
    assert request("weird").origin == ""


def test_reply_repr_hides_password() -> None:
    """R73 (via R7): a password in a reply never shows in its repr."""
    reply = AskReply(approve=True, password="hunter2")
    assert "hunter2" not in repr(reply)
    assert reply.password == "hunter2"


async def test_a_session_listener_counts_only_for_its_session() -> None:
    """R4, R8 B: a passive listener of one session (a subscriber) counts for that
    session's asks and no other's, and never takes one."""
    registry = PendingRegistry()
    subscriber = registry.listen("", session_id="chat-a", passive=True)
    assert registry.has_listener("chat-", request("chat-a"))
    assert not registry.has_listener("chat-", request("chat-b"))
    assert not registry.has_listener("chat-", request("chat-ab"))
    registry.offer_parked(request("chat-a"))
    assert registry.pick_next(subscriber) is None


async def test_posted_notices_come_first_in_order_and_not_after_close() -> None:
    """R1, R3 across daemons: notices posted to a listener (an ask of another
    daemon's task, then what became of it) come out in order, before any entry of
    this registry; a closed listener takes none."""
    registry = PendingRegistry()
    listener = registry.listen("chat-")
    registry.offer_parked(request("chat-local"))
    elsewhere = Entry(request=request("chat-remote"), parked=True)
    listener.post(Offered(elsewhere))
    listener.post(Withdrawn(elsewhere.id, "task canceled"))
    first = await listener.next_notice()
    assert isinstance(first, Offered)
    assert first.entry is elsewhere
    assert await listener.next_notice() == Withdrawn(elsewhere.id, "task canceled")
    local = await listener.next_notice()
    assert isinstance(local, Offered)
    assert local.entry.request.session_id == "chat-local"
    listener.close()
    listener.post(Withdrawn("x" * 32, "late"))
    with pytest.raises(trio.ClosedResourceError):
        await listener.next_notice()
