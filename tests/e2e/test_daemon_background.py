"""Background legs end to end on the real daemon (R21-R23, R26, R44, R48, §8).

A ``cli-`` script runs ``bg: …`` over the WebSocket ``run`` frame and watches the
session through ``subscribe``. Waits are on frames; the only polls are for files a
subprocess writes, bounded by the test's deadline.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TypeVar

import trio

from agentrio.engine.processes.groups import group_alive
from agentrio.protocol import events as ev
from agentrio.protocol.frames import (
    Ask,
    BackgroundCancel,
    DoneFrame,
    EventFrame,
    LegList,
    ListLegs,
    Reply,
    Run,
    ServerFrame,
    Subscribe,
)
from agentrio.transport import FrameConnection, open_frame_connection
from tests.e2e.conftest import Daemon

SESSION = "cli-e2e-bg"
E = TypeVar("E", bound=ev.Event)


async def next_event(conn: FrameConnection, kind: type[E]) -> tuple[str, E]:
    """``(task_hash, event)`` of the next ``event`` frame carrying a ``kind`` (others
    skipped)."""
    while True:
        frame: ServerFrame = await conn.receive()
        if isinstance(frame, EventFrame) and isinstance(frame.event, kind):
            return frame.task_hash, frame.event


async def until_file(path: Path) -> str:
    while not path.exists() or not path.read_text().strip():
        await trio.sleep(0.01)
    return path.read_text().strip()


def running(pid: int) -> bool:
    """True while ``pid`` runs; a zombie (nobody reaps orphans here) counts as gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return raw[raw.rfind(b")") + 2 :].split()[0] not in (b"Z", b"X")


async def test_bg_command_job_file_logs_and_follow_up(daemon: Daemon) -> None:
    """R21, R23, R26, R60: ``bg: sleep 1 ;; echo done`` asks to confirm ``sleep``, starts
    two legs in one job file, logs while they run, removes the logs when they end, and
    the held reports reach one follow-up task once both legs finished."""
    background = daemon.home / "sessions" / SESSION / "background"
    with trio.fail_after(30):
        async with (
            open_frame_connection(daemon.ws_url, daemon.token) as conn,
            open_frame_connection(daemon.ws_url, daemon.token) as watch,
        ):
            await watch.send(Subscribe(session_id=SESSION))
            await conn.send(
                Run(
                    request_id="r1",
                    session_id=SESSION,
                    input="bg: sleep 1 ;; echo done",
                    window_hash="w1",
                )
            )
            ask = await conn.receive()
            while not isinstance(ask, Ask):
                ask = await conn.receive()
            here = os.path.realpath(os.getcwd())
            assert (ask.tool_name, ask.tool_args) == (
                "background_command",
                {"command": "sleep 1", "cwd": here},
            )
            await conn.send(Reply(id=ask.id, approve=True))
            _, sleeper = await next_event(watch, ev.LegStarted)
            _, echo = await next_event(watch, ev.LegStarted)
            assert [sleeper.label, echo.label] == ["sleep 1", "echo done"]
            sleep_leg: str = sleeper.leg_id
            job_id: str = sleeper.job_id
            await until_file(background / f"{job_id}.json")
            log = background / f"{sleep_leg}.log"
            while not log.exists():  # the leg opens its log as it starts
                await trio.sleep(0.01)
            frame = await conn.receive()
            while not isinstance(frame, DoneFrame):
                frame = await conn.receive()
            assert frame.status == "finished"
            _, first = await next_event(watch, ev.LegFinished)
            _, second = await next_event(watch, ev.LegFinished)
            finished = {first.leg_id: first, second.leg_id: second}
            assert finished[sleep_leg].result == "exit 0"
            assert not log.exists()
            # (a ".job_…" file is an atomic write in flight: the job file itself)
            names = sorted(p.name for p in background.iterdir() if not p.name.startswith("."))
            assert names == [f"{job_id}.json"]
            # The follow-up may say done before job_settled is sent: take both in any order.
            settled: ev.JobSettled | None = None
            dones: dict[str, ev.Done] = {}
            while settled is None or settled.followup_task not in dones:
                frame = await watch.receive()
                if isinstance(frame, EventFrame) and isinstance(frame.event, ev.JobSettled):
                    settled = frame.event
                    assert settled.followup_task is not None
                elif isinstance(frame, EventFrame) and isinstance(frame.event, ev.Done):
                    dones[frame.task_hash] = frame.event
            followup = settled.followup_task
            done = dones[followup]
            text = done.text
            assert text.startswith('The background work for "sleep 1;')
            # Each leg's output was reported as it ended; the follow-up names each leg.
            assert all(f"- {leg} (" in text for leg in finished)
            data = json.loads((background / f"{job_id}.json").read_text())
            assert data["settled"] is True
            assert data["followup_task"] == followup
            assert [leg["state"] for leg in data["legs"]] == ["finished", "finished"]


async def test_cancel_leg_with_grandchild_leaves_nothing_running(
    daemon: Daemon, tmp_path: Path
) -> None:
    """R44, R48, §8: ``background_cancel`` of a leg whose command forked a grandchild
    ends the whole process group; the leg finishes ``canceled`` and leaves the list."""
    child_pid, grandchild_pid = tmp_path / "child.pid", tmp_path / "grandchild.pid"
    command = f"sh -c 'sleep 300 & echo $! > {grandchild_pid}; echo $$ > {child_pid}; wait'"
    with trio.fail_after(30):
        async with open_frame_connection(daemon.ws_url, daemon.token) as conn:
            await conn.send(Subscribe(session_id=SESSION))
            await conn.send(
                Run(
                    request_id="r1",
                    session_id=SESSION,
                    input=f"bg: {command}",
                    window_hash="w1",
                    allow_all=True,
                )
            )
            _, started = await next_event(conn, ev.LegStarted)
            leg_id: str = started.leg_id
            child, grandchild = (
                int(await until_file(child_pid)),
                int(await until_file(grandchild_pid)),
            )
            pgid = os.getpgid(grandchild)
            assert running(child)
            assert running(grandchild)
            await conn.send(ListLegs(session_id=SESSION))
            listed = await conn.receive()
            while not isinstance(listed, LegList):
                listed = await conn.receive()
            assert [(leg.leg_id, leg.state) for leg in listed.legs] == [(leg_id, "running")]
            await conn.send(BackgroundCancel(session_id=SESSION, leg_id=leg_id))
            _, finished = await next_event(conn, ev.LegFinished)
            assert (finished.leg_id, finished.status) == (leg_id, "canceled")
            assert not running(child)
            assert not running(grandchild)
            assert not group_alive(pgid)
            _, settled = await next_event(conn, ev.JobSettled)
            assert settled.followup_task is None
            await conn.send(ListLegs(session_id=SESSION))
            listed = await conn.receive()
            while not isinstance(listed, LegList):
                listed = await conn.receive()
            assert listed.legs == []
