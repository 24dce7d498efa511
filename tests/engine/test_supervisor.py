"""The supervisor's shutdown: nothing started after it runs on (R53)."""

from __future__ import annotations

import trio

from agentrio.engine.nursery_tasks import Status, Supervisor, TaskHandle
from agentrio.protocol.causes import Cause


async def test_work_started_after_cancel_all_starts_cancelled_with_its_cause() -> None:
    """R53: a start already under way when shutdown cancelled everything (a follow-up
    awaiting the store) is cancelled with the shutdown's cause as it starts, its exit
    path runs, and the nursery ends instead of waiting for it forever."""
    exits: list[str] = []

    async def forever(name: str, *, task_status: trio.TaskStatus[None]) -> None:
        task_status.started()
        try:
            await trio.sleep_forever()
        finally:
            exits.append(name)

    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            supervisor = Supervisor(nursery)
            early = await supervisor.start(forever, "early", handle=TaskHandle("early"))
            assert supervisor.cancel_all(Cause.SHUTDOWN) == 1
            late = await supervisor.start(forever, "late", handle=TaskHandle("late"))
            await late.wait_finished()
    assert (early.cause, late.cause) == (Cause.SHUTDOWN, Cause.SHUTDOWN)
    assert (early.status, late.status) == (Status.CANCELLED, Status.CANCELLED)
    assert sorted(exits) == ["early", "late"]
