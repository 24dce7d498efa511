"""Double resume across processes: the daemon and a second process claiming in the same
SQLite file race for each parked task; exactly one claim wins (R37).

Two daemons cannot share a home (the instance lock refuses the second), so the second
contender is a plain process that opens the daemon's store and claims the task the way
a resume does (`tests.reliability.claim_worker`). Each round parks a fresh task
(``ask:`` from a ``chat-`` session, R11), then releases the worker's claims and the
daemon's HTTP resumes at once.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys

import httpx
import trio

from agentrio.engine.messages import CONFLICT_RUNNING
from agentrio.protocol.codec import decode
from agentrio.protocol.events import Pending
from agentrio.protocol.frames import EventFrame, Subscribe
from agentrio.protocol.http import PendingTasks, SendStarted
from agentrio.transport import open_frame_connection
from tests.e2e.conftest import ROOT, Daemon
from tests.reliability.conftest import client, seed, size

ROUNDS = size(20, 300)
#: Concurrent claims per round on each side.
PER_SIDE = 4


async def _park(daemon: Daemon, session: str) -> str:
    async with open_frame_connection(daemon.ws_url, daemon.token) as watch:
        await watch.send(Subscribe(session_id=session))
        async with client(daemon) as http:
            response = await http.post(
                "/v1/send", json={"session_id": session, "input": "ask: Ready? | yes, no"}
            )
        task_hash = decode(response.content, SendStarted).task_hash
        while True:
            frame = await watch.receive()
            if isinstance(frame, EventFrame) and isinstance(frame.event, Pending):
                assert frame.task_hash == task_hash
                return task_hash


class Worker:
    """The second process (see the module doc)."""

    def __init__(self, daemon: Daemon) -> None:
        db = str(daemon.home / "agentrio.db")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.reliability.claim_worker", db, str(PER_SIDE)],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.readline() == "ready"

    def readline(self) -> str:
        assert self.process.stdout is not None
        return self.process.stdout.readline().strip()

    def claim(self, session: str, task_hash: str) -> list[dict[str, str]]:
        """Blocking: PER_SIDE concurrent claims in the worker; their outcomes."""
        assert self.process.stdin is not None
        self.process.stdin.write(f"{session} {task_hash}\n")
        self.process.stdin.flush()
        outcomes: list[dict[str, str]] = json.loads(self.readline())
        return outcomes

    def close(self) -> int:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            return self.process.wait(timeout=10)
        finally:
            assert self.process.stdout is not None
            self.process.stdout.close()


async def _round(
    daemon: Daemon, http: httpx.AsyncClient, worker: Worker, round_: int, delay: float
) -> str:
    """One race; returns the winner (``daemon`` or ``worker``)."""
    session = f"chat-race{round_}"
    task_hash = await _park(daemon, session)
    statuses: list[int] = []
    outcomes: list[dict[str, str]] = []

    async def resume() -> None:
        response = await http.post(
            f"/v1/session/{session}/task/{task_hash}/resume", json={"answers": ["yes"]}
        )
        statuses.append(response.status_code)
        if response.status_code == 409:
            assert response.json()["error"]["message"] == CONFLICT_RUNNING

    async def claim() -> None:
        await trio.sleep(delay)  # a seeded head start for the daemon: both sides win
        outcomes.extend(await trio.to_thread.run_sync(worker.claim, session, task_hash))

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(claim)
            for _ in range(PER_SIDE):
                nursery.start_soon(resume)
    daemon_wins = statuses.count(202)
    worker_wins = sum(1 for o in outcomes if "won" in o)
    assert len(statuses) == len(outcomes) == PER_SIDE
    if worker_wins:
        # The worker's claim holds the task (a live marker): every resume is a 409.
        assert statuses == [409] * PER_SIDE
    else:
        # The daemon's winning run may already have finished (its row went to history)
        # before a losing resume looked: that loser finds no task at all (404).
        assert set(statuses) - {202} <= {404, 409}, statuses
    errors = {o["error"] for o in outcomes if "won" not in o}
    # The same for the worker's losers: a held task is a Conflict, a finished one gone.
    assert errors <= ({"Conflict"} if worker_wins else {"Conflict", "NotFound"}), outcomes
    assert daemon_wins + worker_wins == 1, (round_, statuses, outcomes)
    # Either way nothing of the task is listed as resumable any more.
    listed = await http.get(f"/v1/session/{session}/task")
    assert decode(listed.content, PendingTasks).tasks == []
    return "daemon" if daemon_wins else "worker"


async def test_daemon_and_second_process_race_resumes(daemon: Daemon) -> None:
    """R37: in every round, of 4 HTTP resumes through the daemon and 4 claims from a
    second process on the same store file, exactly one wins. While the winner holds the
    task every loser gets 409 ``[Conflict] pending task: running`` (the worker's
    `Conflict`); once a daemon winner's run has finished, a late loser finds no task
    (404 / `NotFound`). Never two winners, never a resumable leftover."""
    rng = random.Random(seed("double_resume"))
    worker = Worker(daemon)
    wins = {"daemon": 0, "worker": 0}
    try:
        async with client(daemon) as http:
            for round_ in range(ROUNDS):
                delay = rng.uniform(0.0, 0.04)
                wins[await _round(daemon, http, worker, round_, delay)] += 1
    finally:
        code = worker.close()
    print(f"double resume: {ROUNDS} rounds, {PER_SIDE}+{PER_SIDE} contenders each, wins {wins}")
    assert code == 0
    assert sum(wins.values()) == ROUNDS
