"""Window isolation and the listener grace of the pending registry (SPEC R5, R78, R79;
issue 17, items 1 and 7).

Time-based behaviour runs under ``trio.testing.MockClock(autojump_threshold=0)``: the
grace's 30 s pass in no real time, and the deadline is checked to the second.
"""

from __future__ import annotations

import pytest
import trio
import trio.testing

from agentrio.engine.errors import AskFailed, Forbidden
from agentrio.engine.pending import AskReply, Offered, PendingRegistry
from tests.engine.test_pending import entry_of, notice_now, request, start_producer

GRACE = 30.0


# -- R5, R78 ---------------------------------------------------------------------------


async def test_prefix_listeners_never_take_a_windowed_cli_ask() -> None:
    """R78: ``listen("cli-")`` and ``listen("")`` (a script with the token) neither
    take nor count for a REPL window's ask; the window's owner takes it."""
    registry = PendingRegistry()
    scripts = [registry.listen("cli-"), registry.listen(""), registry.listen("cli-s1")]
    req = request("cli-s1", window_hash="w1")
    assert registry.has_listener("", req) is False
    window = registry.listen("cli-", windows={"w1"})
    assert registry.has_listener("", req) is True
    async with trio.open_nursery() as nursery:
        producer = await start_producer(nursery, registry, req)
        for script in scripts:
            assert await notice_now(script) is None
        assert await notice_now(window) == Offered(entry_of(producer))
        registry.resolve(entry_of(producer).id, AskReply(approve=True), by=window)
    assert producer.reply == AskReply(approve=True)


async def test_an_unwindowed_cli_ask_goes_to_prefix_listeners() -> None:
    """R4, R78: a ``cli-`` ask without a window (a task started over HTTP) belongs to
    no window, so prefix listeners take it as for any origin; a window does not."""
    registry = PendingRegistry()
    # The REPL's match (agentrio.engine.server.ws): only the windows it started.
    window = registry.listen("cli-", lambda r: r.window_hash == "w1", windows={"w1"})
    script = registry.listen("cli-")
    async with trio.open_nursery() as nursery:
        producer = await start_producer(nursery, registry, request("cli-s1"))
        assert await notice_now(window) is None
        assert await notice_now(script) == Offered(entry_of(producer))
        nursery.cancel_scope.cancel()


async def test_only_the_window_answers_its_ask() -> None:
    """R78, R8 B: neither an HTTP caller nor a session subscriber (both ``by=None``)
    may answer a window's ask, and a subscriber does not count as its listener."""
    registry = PendingRegistry()
    req = request("cli-s1", window_hash="w1")
    with registry.listen("", match=lambda r: r.session_id == "cli-s1", passive=True):
        assert registry.has_listener("cli-s1", req) is False
        window = registry.listen("cli-", windows={"w1"})
        async with trio.open_nursery() as nursery:
            producer = await start_producer(nursery, registry, req)
            entry = entry_of(producer)
            with pytest.raises(Forbidden, match="only that window can answer it"):
                registry.resolve(entry.id, AskReply(approve=True))
            assert registry.get(entry.id) is entry
            assert registry.pick_next(window) is entry
            registry.resolve(entry.id, AskReply(approve=False), by=window)
    assert producer.reply == AskReply(approve=False)


async def test_a_window_has_one_open_owner() -> None:
    """R78: a second connection cannot take over a live window's asks; once the
    window's connection is closed its replacement (the window reconnected) can."""
    registry = PendingRegistry()
    first = registry.listen("cli-", windows={"w1"})
    other = registry.listen("cli-")
    with pytest.raises(Forbidden):
        other.own_window("w1")
    with pytest.raises(Forbidden):
        registry.listen("cli-", windows={"w2", "w1"})
    assert registry.statistics().listeners == 2
    first.own_window("w1")  # idempotent for its owner
    first.close()
    other.own_window("w1")
    assert other.windows == frozenset({"w1"})
    registry.listen("cli-", windows={"w2"}).close()  # w2 was not left owned


async def test_a_window_taken_later_is_offered_its_waiting_ask() -> None:
    """R5: a listener that comes to own a window is woken for the asks already
    waiting for it."""
    registry = PendingRegistry()
    listener = registry.listen("cli-")
    registry.listen("cli-", windows={"w1"})  # keeps the ask askable
    async with trio.open_nursery() as nursery:
        producer = await start_producer(nursery, registry, request("cli-1", window_hash="w9"))
        assert await notice_now(listener) is None
        taken: list[object] = []

        async def take() -> None:
            taken.append(await listener.next_notice())

        nursery.start_soon(take)
        await trio.testing.wait_all_tasks_blocked()
        listener.own_window("w9")
        await trio.testing.wait_all_tasks_blocked()
        assert taken == [Offered(entry_of(producer))]
        nursery.cancel_scope.cancel()


# -- R79 -------------------------------------------------------------------------------


async def run_graces(nursery: trio.Nursery, registry: PendingRegistry) -> None:
    await nursery.start(registry.run_graces)


async def test_a_chat_ask_waits_the_grace_for_a_new_listener(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R79, R6: a ``chat-`` ask whose listener closes is not failed; a listener that
    comes within the grace is offered it again and answers it."""
    registry = PendingRegistry(listener_grace_s=GRACE)
    async with trio.open_nursery() as nursery:
        await run_graces(nursery, registry)
        page = registry.listen("chat-")
        producer = await start_producer(nursery, registry, request("chat-1"))
        assert await notice_now(page) == Offered(entry_of(producer))
        page.close()
        await trio.sleep(GRACE - 1)
        assert (producer.done, registry.statistics().in_grace) == (False, 1)
        reloaded = registry.listen("chat-")
        assert registry.statistics().in_grace == 0
        assert await notice_now(reloaded) == Offered(entry_of(producer))
        await trio.sleep(GRACE * 2)  # the old deadline is gone
        assert producer.done is False
        registry.resolve(entry_of(producer).id, AskReply(approve=True), by=reloaded)
        nursery.cancel_scope.cancel()
    assert producer.reply == AskReply(approve=True)


async def test_without_a_new_listener_the_grace_ends_in_a_denial(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R79, R6: no listener within ``listener_grace_s`` → the ask fails with the
    close's reason, exactly at the deadline; a disconnect never approves."""
    registry = PendingRegistry(listener_grace_s=GRACE)
    async with trio.open_nursery() as nursery:
        await run_graces(nursery, registry)
        bot = registry.listen("tg-")
        producer = await start_producer(nursery, registry, request("tg-42"))
        assert await notice_now(bot) == Offered(entry_of(producer))
        closed_at = trio.current_time()
        bot.close()
        with trio.fail_after(GRACE * 2):
            while not producer.done:
                await trio.sleep(0.5)
        assert trio.current_time() - closed_at == pytest.approx(GRACE, abs=0.5)
        nursery.cancel_scope.cancel()
    assert producer.reply is None
    assert isinstance(producer.error, AskFailed)
    assert str(producer.error) == "client disconnected"
    assert registry.statistics().in_grace == 0


async def test_a_returning_subscriber_ends_the_grace(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R79, R8 B: the web page is a passive subscriber; the reloaded page subscribing
    again keeps the unclaimed ask alive for its HTTP answer."""
    registry = PendingRegistry(listener_grace_s=GRACE)

    def session(r: object) -> bool:
        return getattr(r, "session_id", "") == "chat-p"

    async with trio.open_nursery() as nursery:
        await run_graces(nursery, registry)
        page = registry.listen("", match=session, passive=True)
        producer = await start_producer(nursery, registry, request("chat-p"))
        page.close()
        await trio.sleep(GRACE / 2)
        assert producer.done is False
        registry.listen("", match=session, passive=True)
        await trio.sleep(GRACE * 2)
        assert producer.done is False
        registry.resolve(entry_of(producer).id, AskReply(approve=True))
        nursery.cancel_scope.cancel()
    assert producer.reply == AskReply(approve=True)


async def test_cli_asks_fail_at_once_even_with_a_grace(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R79, R6, R43: a window's ask fails the instant its connection closes; so does
    an ask of a session with no origin. The grace is for chat-/tg-/dc- only."""
    registry = PendingRegistry(listener_grace_s=GRACE)
    async with trio.open_nursery() as nursery:
        await run_graces(nursery, registry)
        window = registry.listen("", windows={"w1"})
        windowed = await start_producer(nursery, registry, request("cli-1", window_hash="w1"))
        plain = await start_producer(nursery, registry, request("other-1"))
        assert await notice_now(window) == Offered(entry_of(windowed))
        assert await notice_now(window) == Offered(entry_of(plain))
        window.close()
        await trio.testing.wait_all_tasks_blocked()
        assert (windowed.done, plain.done) == (True, True)
        nursery.cancel_scope.cancel()
    assert str(windowed.error) == str(plain.error) == "client disconnected"


async def test_a_cancelled_task_ends_its_grace(autojump_clock: trio.testing.MockClock) -> None:
    """R79, R3: a producer cancelled during its grace withdraws its ask at once."""
    registry = PendingRegistry(listener_grace_s=GRACE)
    async with trio.open_nursery() as nursery:
        await run_graces(nursery, registry)
        registry.listen("dc-").close()
        producer = await start_producer(nursery, registry, request("dc-7"))
        with registry.listen("dc-") as bot:
            assert await notice_now(bot) == Offered(entry_of(producer))
        assert registry.statistics().in_grace == 1
        producer.scope.cancel()
        await trio.testing.wait_all_tasks_blocked()
        assert (producer.cancelled, registry.statistics().in_grace) == (True, 0)
        nursery.cancel_scope.cancel()


async def test_no_grace_by_default_in_a_bare_registry() -> None:
    """R6: a registry made without ``listener_grace_s`` fails at once, and its
    `run_graces` returns at once."""
    registry = PendingRegistry()
    async with trio.open_nursery() as nursery:
        await run_graces(nursery, registry)
        with registry.listen("chat-") as page:
            producer = await start_producer(nursery, registry, request("chat-1"))
            assert await notice_now(page) == Offered(entry_of(producer))
        await trio.testing.wait_all_tasks_blocked()
        assert producer.done is True
