"""Events that belong to a window but to no live request reach that window's
connection: late leg events of an ended run and a background job's follow-up (R26,
R5), exactly once each."""

from __future__ import annotations

import trio

from agentrio.protocol.events import Done, JobSettled, LegFinished, TaskStarted
from agentrio.protocol.frames import EventFrame, Run
from tests.engine.server.conftest import Served, receive_until_done


async def test_follow_up_and_late_leg_events_reach_the_window(served: Served) -> None:
    """R26: `bg: sleep 1 ;; echo x` ends its task at once; the sleep leg's end and the
    job's follow-up task still stream to the window that started it, none twice."""
    async with served.connect() as conn:
        await conn.send(
            Run(
                request_id="r1",
                session_id="cli-late",
                input="bg: sleep 1 ;; echo quick",
                window_hash="w-late",
                allow_all=True,
            )
        )
        frames = await receive_until_done(conn, "r1")
        started = next(f for f in frames if isinstance(f, EventFrame))
        task_hash = started.task_hash
        seen: list[EventFrame] = [f for f in frames if isinstance(f, EventFrame)]
        followup_done = job_settled = False
        with trio.fail_after(20):  # the follow-up may end before or after job_settled
            while not (followup_done and job_settled):
                frame = await conn.receive()
                if not isinstance(frame, EventFrame):
                    continue
                seen.append(frame)
                if frame.task_hash != task_hash and isinstance(frame.event, Done):
                    followup_done = True
                job_settled = job_settled or isinstance(frame.event, JobSettled)
    finished = [f.event for f in seen if isinstance(f.event, LegFinished)]
    assert sorted(e.leg_id for e in finished) == sorted({e.leg_id for e in finished})
    assert len(finished) == 2
    settled = [f.event for f in seen if isinstance(f.event, JobSettled)]
    assert len(settled) == 1
    followups = [f for f in seen if isinstance(f.event, TaskStarted) and f.task_hash != task_hash]
    assert [f.task_hash for f in followups] == [settled[0].followup_task]
    assert followups[0].event.input.startswith("[Resumed Task — background group finished]")
    seqs = [f.event.seq for f in seen]
    assert seqs == sorted(set(seqs))  # in order, none twice
