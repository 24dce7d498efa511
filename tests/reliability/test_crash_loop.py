"""Crash loop: ``kill -9`` the real daemon at seeded random moments and restart it,
over and over, on one home (R27, R41, R43, R50, R51, R53, R72).

One iteration: the running daemon gets tasks in every state — running commands
(``run: tail -f /dev/null``, one more than a session's slots so one is queued), parked
questions (``ask:``), a paused task (interrupted, with a snapshot), a ``cli-`` task
waiting on a confirmation it will never get, and a ``cli-`` task that starts two
background legs (one with a grandchild). Meanwhile a killer picks one of three moments:
at a random time during the launch, a random time after it, or a random time after a
SIGTERM (while the shutdown writes every interrupted snapshot). Then a new daemon
starts on the same home, and every time:

- the store loads and passes ``PRAGMA integrity_check``;
- every task the old daemon accepted (this iteration's and every earlier one's) is in
  exactly one place: the resumable tasks or the history — never lost, never both;
- every stored task of the iteration is listed as resumable once its marker expired,
  and one of them is resumed (202);
- background state is cleared: no ``background/`` folder, no legs, no job;
- no process started by the killed daemon is still running (`agentrio.engine.processes.orphans`);
- the command that waited for a confirmation never ran (R6, R43: fail closed).
"""

from __future__ import annotations

import os
import random
import sqlite3
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from agentrio import ClientError
from agentrio.engine.processes.orphans import find_orphans
from agentrio.engine.sessions import MAX_SESSION_TASKS
from agentrio.protocol.causes import Cause
from agentrio.protocol.codec import decode
from agentrio.protocol.events import ToolCall
from agentrio.protocol.frames import Accepted, Ask, Cancel, DoneFrame, EventFrame, Run
from agentrio.protocol.http import PendingTasks, ResumeAccepted, SendStarted
from agentrio.transport import open_frame_connection
from tests.e2e.conftest import Daemon, DaemonProcess
from tests.reliability.conftest import client, seed, size

ITERATIONS = size(20, 200)
#: Short markers so a killed task turns resumable quickly (engine/markers.py).
TTL_S = 1.0
MARKERS = {"AGENTRIO_MARKER_TTL_S": str(TTL_S), "AGENTRIO_MARKER_REFRESH_S": "0.3"}
#: Running commands per iteration: every slot of the session, plus one queued (R50).
RUNNERS = MAX_SESSION_TASKS + 1
FOREVER = "tail -f /dev/null"  # allowlisted (R60): runs without a confirmation
MODES = ("during_launch", "after_launch", "during_shutdown")


class Launch:
    """What one iteration started, as the daemon acknowledged it."""

    def __init__(self, iteration: int, home: Path) -> None:
        self.prefix = f"c{iteration}"
        self.accepted: dict[str, str] = {}  # task hash -> session id
        self.submitted = 0
        #: Set before the daemon is signalled: connection errors are expected from then.
        self.dying = False
        self.killed = trio.Event()
        self.done = trio.Event()
        self.never = home.parent / f"never-{iteration}"

    def sessions(self) -> list[str]:
        p = self.prefix
        return [
            f"chat-{p}-run",
            f"chat-{p}-ask",
            f"cli-{p}-pause",
            f"cli-{p}-confirm",
            f"cli-{p}-bg",
        ]


async def _guard(launch: Launch, coro: Any, *args: Any) -> None:
    """Run one submitter; connection errors are expected only once the daemon is dead."""
    try:
        await coro(*args)
    except (httpx.HTTPError, ClientError, OSError):
        if not launch.dying:
            raise


async def _send(http: httpx.AsyncClient, launch: Launch, session_id: str, text: str) -> None:
    launch.submitted += 1
    response = await http.post("/v1/send", json={"input": text, "session_id": session_id})
    assert response.status_code == 202, response.text
    launch.accepted[decode(response.content, SendStarted).task_hash] = session_id


async def _ws_run(
    daemon: Daemon, launch: Launch, session_id: str, text: str, until: str, allow_all: bool
) -> None:
    """Run ``text`` over ``/v1/ws``; hold the connection open until the kill. ``until``:
    ``accepted``, ``ask`` (a confirmation shown, never answered) or ``pause``."""
    async with open_frame_connection(daemon.ws_url, daemon.token) as conn:
        launch.submitted += 1
        await conn.send(
            Run(
                request_id="r",
                session_id=session_id,
                input=text,
                window_hash=f"w-{session_id}",
                allow_all=allow_all,
            )
        )
        frame = await conn.receive()
        assert isinstance(frame, Accepted), frame
        launch.accepted[frame.task_hash] = session_id
        if until == "ask":
            while not isinstance(frame := await conn.receive(), Ask):
                pass
        elif until == "pause":
            while not (isinstance(frame, EventFrame) and isinstance(frame.event, ToolCall)):
                frame = await conn.receive()
            await conn.send(Cancel(task_hash=launch_hash(launch, session_id), cause=Cause.PAUSED))
            while not isinstance(frame := await conn.receive(), DoneFrame):
                pass
            assert frame.status == "paused"
        await launch.killed.wait()  # a REPL stays connected: its runs stay bound to it


def launch_hash(launch: Launch, session_id: str) -> str:
    return next(h for h, s in launch.accepted.items() if s == session_id)


async def _launch_all(daemon: Daemon, launch: Launch) -> None:
    p = launch.prefix
    async with client(daemon) as http, trio.open_nursery() as nursery:
        for _ in range(RUNNERS):
            nursery.start_soon(
                _guard, launch, _send, http, launch, f"chat-{p}-run", f"run: {FOREVER}"
            )
        for question in ("Pick | a, b", "Why?"):
            nursery.start_soon(
                _guard, launch, _send, http, launch, f"chat-{p}-ask", f"ask: {question}"
            )
        for session, text, until, allow_all in (
            (f"cli-{p}-pause", "run: sleep 60", "pause", True),
            (f"cli-{p}-confirm", f"run: touch {launch.never}", "ask", False),
            (f"cli-{p}-bg", f"bg: {FOREVER} ;; sleep 60 & sleep 60", "accepted", True),
        ):
            nursery.start_soon(
                _guard, launch, _ws_run, daemon, launch, session, text, until, allow_all
            )
        await _all_started(http, launch)
        launch.done.set()
        await launch.killed.wait()
        nursery.cancel_scope.cancel()


async def _all_started(http: httpx.AsyncClient, launch: Launch) -> None:
    """Wait until everything launched is in its state: both legs running, the parked
    and paused tasks stored, the runners and the confirmation running."""
    state: tuple[int, int, int] | None = None
    with trio.move_on_after(30):
        while state != (2, 3, RUNNERS + 1):
            await trio.sleep(0.05)
            try:
                health = (await http.get("/v1/health")).json()
                resumable = 0
                for session in (f"chat-{launch.prefix}-ask", f"cli-{launch.prefix}-pause"):
                    got = await http.get(f"/v1/session/{session}/task")
                    resumable += len(decode(got.content, PendingTasks).tasks)
            except httpx.HTTPError:
                if launch.dying:
                    return
                raise
            # The bg task itself may still run, ending on its own (R25).
            state = (health["legs"], resumable, min(health["tasks"], RUNNERS + 1))
        return
    raise AssertionError(f"launch did not settle: (legs, resumable, tasks) = {state}")


def _store_rows(home: Path) -> tuple[dict[str, str], dict[str, str]]:
    """(task hash -> session) of pending tasks and (task hash -> session) of history."""
    with sqlite3.connect(home / "agentrio.db") as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        tasks = dict(db.execute("SELECT task_hash, session_id FROM tasks").fetchall())
        history = dict(db.execute("SELECT task_hash, session_id FROM history").fetchall())
    db.close()
    return tasks, history


async def _wait_resumable(daemon: Daemon, session_id: str, expected: set[str]) -> None:
    """Every stored task of ``session_id`` listed as resumable (after marker expiry)."""
    async with client(daemon) as http:
        with trio.fail_after(TTL_S + 10):
            while True:
                got = await http.get(f"/v1/session/{session_id}/task")
                listed = {t.task_hash for t in decode(got.content, PendingTasks).tasks}
                if listed == expected:
                    return
                assert listed < expected, (session_id, listed - expected)
                await trio.sleep(0.05)


def _restart(home: Path) -> DaemonProcess:
    """A new daemon on ``home``; a failed start shows the end of its log."""
    try:
        return DaemonProcess(home, MARKERS)
    except AssertionError as exc:
        log = (home / "stdout.log").read_text(errors="replace")[-4000:]
        raise AssertionError(f"{exc}; its log ends:\n{log}") from None


# A send cut off by the kill leaves httpx's request-body generator unfinished; trio
# reports it when it is collected. That is the kill working, not a leak of ours.
@pytest.mark.filterwarnings(
    "ignore:Exception ignored in. <async_generator object ByteStream.__aiter__"
    ":pytest.PytestUnraisableExceptionWarning"
)
# Likewise a request of this test's HTTP client that the kill cuts off mid-connection
# leaves its socket to the collector (the daemon's own sockets are judged elsewhere).
@pytest.mark.filterwarnings(
    "ignore:Exception ignored in. <socket.socket:pytest.PytestUnraisableExceptionWarning"
)
async def test_crash_loop(tmp_path: Path) -> None:
    """R27, R41, R43, R50, R51, R53, R72: ``kill -9`` at seeded random moments of a
    loaded daemon (also mid-shutdown, while snapshots are written), restart on the same
    home, every time: the store loads, no accepted task is lost or duplicated, every
    stored task turns resumable once its marker expires and can be resumed, background
    state is cleared and no process of the killed daemon survives."""
    rng = random.Random(seed("crash_loop"))
    home = tmp_path / "home"
    tracked: dict[str, str] = {}  # every accepted task hash -> its session
    orphans_seen = 0
    unacknowledged = 0
    modes_seen = {mode: 0 for mode in MODES}
    process = DaemonProcess(home, MARKERS)
    try:
        for iteration in range(ITERATIONS):
            mode = rng.choice(MODES)
            modes_seen[mode] += 1
            launch = Launch(iteration, home)
            with trio.fail_after(60):
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(_launch_all, process.info, launch)
                    if mode == "during_launch":
                        await trio.sleep(rng.uniform(0.2, 1.5))
                    else:
                        await launch.done.wait()
                        await trio.sleep(rng.uniform(0.0, 0.2))
                    launch.dying = True
                    if mode == "during_shutdown":
                        process.process.terminate()
                        await trio.sleep(rng.uniform(0.0, 0.15))
                    process.process.kill()
                    process.process.wait(timeout=5)
                    process.close()
                    launch.killed.set()
            killed_at = time.monotonic()
            orphans_seen += len(find_orphans(home))
            tracked.update(launch.accepted)

            process = _restart(home)
            daemon = process.info
            # No process of the killed daemon is left (it ran before daemon.json).
            assert find_orphans(home) == set(), iteration
            assert not list(home.glob("sessions/*/background")), iteration
            async with client(daemon) as http:
                health = (await http.get("/v1/health")).json()
            assert (health["legs"], health["tasks"]) == (0, 0), health

            tasks, history = _store_rows(home)
            assert not set(tasks) & set(history), iteration  # never both
            lost = {h for h in tracked if h not in tasks and h not in history}
            assert lost == set(), (iteration, mode, lost)
            for task_hash, session in launch.accepted.items():
                if not session.endswith("-bg"):  # only the bg task can have finished
                    assert task_hash in tasks, (iteration, session)
            mine = {h: s for h, s in tasks.items() if s in launch.sessions()}
            # Stored but never acknowledged: the kill came between the write and the
            # answer. Such a task is kept like any other (and tracked from now on).
            unacknowledged += sum(1 for h in mine if h not in tracked)
            tracked.update(mine)
            for session in launch.sessions():
                expected = {h for h, s in mine.items() if s == session}
                await _wait_resumable(daemon, session, expected)
            assert not launch.never.exists(), iteration  # the confirmation was never given

            candidates = sorted(h for h, s in mine.items() if s in launch.sessions())
            if candidates:
                chosen = rng.choice(candidates)
                session = tracked[chosen]
                async with client(daemon) as http:
                    response = await http.post(
                        f"/v1/session/{session}/task/{chosen}/resume", json={"answers": ["a"]}
                    )
                assert response.status_code == 202, response.text
                moved = decode(response.content, ResumeAccepted).task_hash
                if moved != chosen:  # R36: the task moved to a new hash
                    del tracked[chosen]
                    tracked[moved] = session
            print(
                f"iteration {iteration}: {mode}, {len(launch.accepted)}/{launch.submitted} "
                f"accepted, restart in {time.monotonic() - killed_at:.2f}s"
            )
    finally:
        code = process.stop()
    assert code == 0
    tasks, history = _store_rows(home)
    assert {h for h in tracked if h not in tasks and h not in history} == set()
    assert find_orphans(home) == set()
    assert not any(home.parent.glob("never-*"))
    print(
        f"crash loop: {ITERATIONS} iterations, modes {modes_seen}, {len(tracked)} tasks "
        f"tracked ({unacknowledged} stored but never acknowledged), {orphans_seen} orphaned "
        "process groups ended, 0 failures"
    )
    # The loop really killed the daemon under load: the killed daemons left processes
    # behind that the restarts ended (a test that never saw one would prove nothing).
    assert orphans_seen > 0
    assert os.path.exists(home / "agentrio.db")
