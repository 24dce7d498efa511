"""The client's bounded inboxes (`agentrio.inbox`): the reader task never waits, a full
inbox drops its oldest item and counts it (DESIGN "Every queue is bounded and exposes
its statistics")."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from agentrio.inbox import Inbox, InboxStatistics, Limits, RecentSeqs


async def test_a_full_inbox_drops_its_oldest_and_counts() -> None:
    """Drop-oldest: the newest items survive, the drops and the peak are counted."""
    inbox: Inbox[int] = Inbox(3)
    for item in range(5):
        inbox.put(item)
    assert inbox.statistics() == InboxStatistics(
        buffered=3, max_buffer=3, peak_buffered=3, dropped=2, closed=False
    )
    assert [await inbox.receive() for _ in range(3)] == [2, 3, 4]
    assert inbox.statistics().buffered == 0


async def test_close_ends_after_the_rest_is_read() -> None:
    """A closed inbox hands out what it holds, then ends; later puts are dropped."""
    inbox: Inbox[str] = Inbox(10)
    inbox.put("a")
    inbox.put("b")
    inbox.close()
    inbox.put("late")
    assert [item async for item in inbox] == ["a", "b"]
    with pytest.raises(trio.EndOfChannel):
        await inbox.receive()
    with pytest.raises(trio.EndOfChannel):
        inbox.receive_nowait()
    assert inbox.statistics().closed


async def test_receive_waits_wakes_and_a_cancelled_receive_takes_nothing() -> None:
    """A waiting consumer is woken by `put`; a cancelled `receive` loses no item, and
    `receive` is a checkpoint even when an item is there."""
    inbox: Inbox[int] = Inbox(10)
    with pytest.raises(trio.WouldBlock):
        inbox.receive_nowait()
    got: list[int] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_take, inbox, got)
        await trio.testing.wait_all_tasks_blocked()
        inbox.put(1)
    assert got == [1]
    inbox.put(2)
    with trio.CancelScope() as scope:
        scope.cancel()
        await inbox.receive()
    assert scope.cancelled_caught
    assert inbox.receive_nowait() == 2
    inbox.put(3)
    with trio.testing.assert_checkpoints():
        assert await inbox.receive() == 3


async def _take(inbox: Inbox[int], got: list[int]) -> None:
    got.append(await inbox.receive())


def test_limits_and_sizes_are_checked() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        Limits(notices=0)
    with pytest.raises(ValueError, match="at least 1"):
        Inbox(0)


def test_recent_seqs_forget_the_oldest() -> None:
    """Copies of an event are dropped while it is among the last ``size`` seen."""
    recent = RecentSeqs(2)
    assert [recent.add(seq) for seq in (1, 1, 2, 3)] == [True, False, True, True]
    assert recent.add(1)  # forgotten: 2 and 3 are the last two
    assert not recent.add(3)
