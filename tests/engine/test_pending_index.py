"""The registry's index of unclaimed entries (engine/pending.py, SPEC R2, R6, R11).

`pick_next` scans only the entries nobody has claimed; these tests pin that the index
keeps "oldest first" when a closed listener gives parked entries back, and that it
never offers what it should not.
"""

from __future__ import annotations

import trio
import trio.testing

from agentrio.engine.errors import AskFailed
from agentrio.engine.pending import AskReply, AskRequest, PendingRegistry

TASK = "0" * 32


def request(session_id: str) -> AskRequest:
    return AskRequest(kind="ask_user", session_id=session_id, task_hash=TASK)


async def test_released_parked_entry_keeps_its_age() -> None:
    """R2/R11: a parked entry given back by a closed claimer is offered before newer
    unclaimed entries, and the others keep their order."""
    registry = PendingRegistry()
    claimer = registry.listen("chat-")
    oldest = registry.offer_parked(request("chat-1"))
    middle = registry.offer_parked(request("chat-2"))
    newest = registry.offer_parked(request("chat-3"))
    assert registry.pick_next(claimer) is oldest
    assert registry.pick_next(claimer) is middle
    claimer.close()
    taker = registry.listen("chat-")
    assert [registry.pick_next(taker) for _ in range(4)] == [oldest, middle, newest, None]
    assert {oldest.claimed_by, middle.claimed_by, newest.claimed_by} == {taker}


async def test_claimed_entries_are_never_offered_again_until_released() -> None:
    """R2: once claimed an entry is out of every other listener's reach; resolved or
    failed entries leave the pool for good (R1, R6)."""
    registry = PendingRegistry()
    first = registry.listen("cli-")
    second = registry.listen("")
    parked = [registry.offer_parked(request(f"cli-{i}")) for i in range(3)]
    assert registry.pick_next(first) is parked[0]
    assert registry.pick_next(second) is parked[1]
    registry.resolve(parked[2].id, AskReply(answers=["x"]))
    assert registry.pick_next(first) is None
    assert registry.pick_next(second) is None
    second.close()
    assert registry.pick_next(first) is parked[1]
    assert registry.statistics().claimed == 2


async def test_closing_the_only_listener_fails_unclaimed_live_asks() -> None:
    """R6: live asks nobody claimed and nobody else can take fail when the last
    listener that could take them closes; claimed ones of other listeners stay."""
    registry = PendingRegistry()
    closing = registry.listen("cli-")
    other = registry.listen("cli-keep")
    outcomes: dict[str, object] = {}

    async def producer(session_id: str) -> None:
        try:
            outcomes[session_id] = await registry.ask(request(session_id))
        except AskFailed as exc:
            outcomes[session_id] = str(exc)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(producer, "cli-keep")
        await trio.testing.wait_all_tasks_blocked()
        kept = registry.pick_next(other)
        assert kept is not None
        nursery.start_soon(producer, "cli-lost")
        await trio.testing.wait_all_tasks_blocked()
        closing.close("gone")
        await trio.testing.wait_all_tasks_blocked()
        assert outcomes == {"cli-lost": "gone"}
        registry.resolve(kept.id, AskReply(approve=True), by=other)
    assert outcomes == {"cli-lost": "gone", "cli-keep": AskReply(approve=True)}
