"""Shared asks in the pending registry (SPEC R99, issue 31 item 8): the asks of a task
started with ``share_asks`` (``agentrio exec``) go to the session's other listeners
first; the window that started the task takes one only when none of them can, or
when the one that had it went away.
"""

from __future__ import annotations

import trio
import trio.testing

from agentrio.engine.pending import AskReply, Offered, PendingRegistry
from tests.engine.test_pending import entry_of, notice_now, request, start_producer


async def test_with_nobody_else_the_window_takes_its_shared_ask() -> None:
    """R99: no other listener of the session (a script of another prefix, another
    session's subscriber): the ask is offered to the window that started its task,
    whose policy answers it; it is no windowed ask (R78 does not hold it back)."""
    registry = PendingRegistry()
    req = request("cli-s1", window_hash="w_exec", shared=True)
    assert req.windowed is False
    others = [registry.listen("chat-"), registry.listen("", passive=True, session_id="cli-s2")]
    window = registry.listen("cli-", windows={"w_exec"})
    async with trio.open_nursery() as nursery:
        producer = await start_producer(nursery, registry, req)
        for other in others:
            assert await notice_now(other) is None
        assert await notice_now(window) == Offered(entry_of(producer))
        registry.resolve(entry_of(producer).id, AskReply(approve=False), by=window)
    assert producer.reply == AskReply(approve=False)


async def test_a_prefix_listener_takes_a_shared_ask_before_its_window() -> None:
    """R99: a script that sent ``listen("cli-")`` is offered the ask; the window is
    not, and the script's answer is the one the task gets."""
    registry = PendingRegistry()
    window = registry.listen("cli-", windows={"w_exec"})
    script = registry.listen("cli-")
    req = request("cli-s1", window_hash="w_exec", shared=True)
    async with trio.open_nursery() as nursery:
        producer = await start_producer(nursery, registry, req)
        assert await notice_now(window) is None
        assert await notice_now(script) == Offered(entry_of(producer))
        assert await notice_now(window) is None  # claimed: the window never sees it
        registry.resolve(entry_of(producer).id, AskReply(approve=True), by=script)
    assert producer.reply == AskReply(approve=True)


async def test_a_shared_ask_goes_back_to_its_window_when_its_listener_leaves() -> None:
    """R99, R6: the script that was shown the ask goes away unanswered: the ask is not
    failed (nor approved) but offered to the window, whose policy answers it."""
    registry = PendingRegistry()
    window = registry.listen("cli-", windows={"w_exec"})
    script = registry.listen("")
    req = request("cli-s1", window_hash="w_exec", shared=True)
    async with trio.open_nursery() as nursery:
        producer = await start_producer(nursery, registry, req)
        assert await notice_now(script) == Offered(entry_of(producer))
        script.close()
        assert producer.done is False
        assert await notice_now(window) == Offered(entry_of(producer))
        registry.resolve(entry_of(producer).id, AskReply(approve=False), by=window)
    assert (producer.reply, producer.error) == (AskReply(approve=False), None)


async def test_a_subscriber_answers_a_shared_ask_and_its_leaving_hands_it_back() -> None:
    """R99, R8 B: a session subscriber (passive) counts as a listener, so the window
    holds back; the subscriber may answer it (``by=None``, refused for a windowed
    ask). When the subscriber leaves first, the window is offered the ask."""
    registry = PendingRegistry()
    window = registry.listen("cli-", windows={"w_exec"})
    page = registry.listen("", passive=True, session_id="cli-s1")
    req = request("cli-s1", window_hash="w_exec", shared=True)
    async with trio.open_nursery() as nursery:
        answered = await start_producer(nursery, registry, req)
        assert await notice_now(window) is None
        registry.resolve(entry_of(answered).id, AskReply(approve=True), by=None)
        left = await start_producer(nursery, registry, req)
        assert await notice_now(window) is None
        page.close()
        assert await notice_now(window) == Offered(entry_of(left))
        registry.resolve(entry_of(left).id, AskReply(approve=False), by=window)
    assert answered.reply == AskReply(approve=True)
    assert left.reply == AskReply(approve=False)


async def test_when_the_window_closes_its_shared_ask_fails_closed() -> None:
    """R6: the window that started the task closes while a script holds the ask: the
    script's leaving then fails it (no window to fall back to), never approving."""
    registry = PendingRegistry()
    window = registry.listen("cli-", windows={"w_exec"})
    script = registry.listen("cli-")
    req = request("cli-s1", window_hash="w_exec", shared=True)
    async with trio.open_nursery() as nursery:
        producer = await start_producer(nursery, registry, req)
        assert await notice_now(script) == Offered(entry_of(producer))
        window.close()
        script.close()
        await trio.testing.wait_all_tasks_blocked()
    assert producer.reply is None
    assert producer.error is not None
