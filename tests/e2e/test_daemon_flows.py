"""End-to-end flows on the real daemon: confirm, cancel / pause / abort, stale cancel,
concurrent resumes, a ``chat-`` script listener (R5, R8, R37, R40, R41, R46, R60)."""

from __future__ import annotations

import os
from pathlib import Path

import attrs
import httpx
import trio

from agentrio.protocol.causes import Cause
from agentrio.protocol.codec import decode
from agentrio.protocol.events import Done, ToolCall, ToolResult
from agentrio.protocol.frames import (
    Accepted,
    Ask,
    Cancel,
    DoneFrame,
    EventFrame,
    LegList,
    Listen,
    ListLegs,
    Reply,
    Run,
    ServerFrame,
    Subscribe,
)
from agentrio.protocol.frames import Withdrawn as WithdrawnFrame
from agentrio.protocol.http import HistoryList, PendingTasks, SendStarted
from agentrio.transport import FrameConnection, open_frame_connection
from tests.e2e.conftest import Daemon


def client(daemon: Daemon) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=daemon.base_url, headers={"Authorization": f"Bearer {daemon.token}"}
    )


async def until(conn: FrameConnection, kind: type[ServerFrame]) -> ServerFrame:
    while True:
        frame = await conn.receive()
        if isinstance(frame, kind):
            return frame


async def until_done(conn: FrameConnection, request_id: str) -> list[ServerFrame]:
    """Frames up to and including the ``done`` of ``request_id``."""
    frames: list[ServerFrame] = []
    while True:
        frames.append(await conn.receive())
        last = frames[-1]
        if isinstance(last, DoneFrame) and last.request_id == request_id:
            return frames


async def pending(http: httpx.AsyncClient, session_id: str) -> list[str]:
    response = await http.get(f"/v1/session/{session_id}/task")
    return [t.task_hash for t in decode(response.content, PendingTasks).tasks]


async def history(http: httpx.AsyncClient, session_id: str) -> list[tuple[str, str]]:
    response = await http.get(f"/v1/session/{session_id}/task/history")
    return [(t.task_hash, t.status) for t in decode(response.content, HistoryList).tasks]


async def test_run_confirm_result_done(daemon: Daemon, tmp_path: Path) -> None:
    """R5, R60, §8: ``run: touch`` needs confirmation; the ``ask`` arrives on the
    starting connection; approving it gives a tool result, ``done finished``, the file."""
    target = tmp_path / "x"
    with trio.fail_after(20):
        async with open_frame_connection(daemon.ws_url, daemon.token) as conn:
            await conn.send(
                Run(
                    request_id="r1",
                    session_id="cli-e2e",
                    input=f"run: touch {target}",
                    window_hash="w1",
                )
            )
            ask = await until(conn, Ask)
            assert isinstance(ask, Ask)
            assert (ask.kind, ask.tool_name, ask.tool_args) == (
                "tool_confirm",
                "run_command",
                {"command": f"touch {target}", "cwd": os.path.realpath(os.getcwd())},
            )
            await conn.send(Reply(id=ask.id, approve=True))
            frames = await until_done(conn, "r1")
    events = [f.event for f in frames if isinstance(f, EventFrame)]
    assert [e.ok for e in events if isinstance(e, ToolResult)] == [True]
    assert isinstance(events[-1], Done)
    done = frames[-1]
    assert isinstance(done, DoneFrame)
    assert (done.status, done.error) == ("finished", "")
    assert target.exists()


async def start_sleep(conn: FrameConnection, request_id: str, session_id: str) -> str:
    """Start ``run: sleep 30`` (allow-all) and wait until the command runs."""
    await conn.send(
        Run(request_id=request_id, session_id=session_id, input="run: sleep 30", allow_all=True)
    )
    accepted = await until(conn, Accepted)
    assert isinstance(accepted, Accepted)
    while True:
        frame = await until(conn, EventFrame)
        assert isinstance(frame, EventFrame)
        if isinstance(frame.event, ToolCall):
            return accepted.task_hash


async def test_cancel_pause_and_abort(daemon: Daemon, tmp_path: Path) -> None:
    """R40, R41, R45: cancel removes the task (history: canceled); pause and "Abort
    task" in a confirmation keep it listed as pending."""
    with trio.fail_after(30):
        async with (
            client(daemon) as http,
            open_frame_connection(daemon.ws_url, daemon.token) as conn,
        ):
            canceled = await start_sleep(conn, "c", "cli-cpa")
            await conn.send(Cancel(task_hash=canceled, cause=Cause.USER_CANCELED))
            done = (await until_done(conn, "c"))[-1]
            assert attrs.evolve(done, stopped=None) == DoneFrame(  # stopped: issue 34
                request_id="c", task_hash=canceled, status="canceled"
            )
            assert await pending(http, "cli-cpa") == []
            assert await history(http, "cli-cpa") == [(canceled, "canceled")]

            paused = await start_sleep(conn, "p", "cli-cpa")
            await conn.send(Cancel(task_hash=paused, cause=Cause.PAUSED))
            done = (await until_done(conn, "p"))[-1]
            assert attrs.evolve(done, stopped=None) == DoneFrame(  # stopped: issue 34
                request_id="p", task_hash=paused, status="paused"
            )
            assert await pending(http, "cli-cpa") == [paused]

            await conn.send(
                Run(request_id="a", session_id="cli-cpa", input=f"run: touch {tmp_path}/a")
            )
            ask = await until(conn, Ask)
            assert isinstance(ask, Ask)
            await conn.send(Reply(id=ask.id, approve=False, stop=Cause.USER_ABORTED))
            done = (await until_done(conn, "a"))[-1]
            assert isinstance(done, DoneFrame)
            assert done.status == "aborted"
            assert sorted(await pending(http, "cli-cpa")) == sorted([paused, done.task_hash])
            assert await history(http, "cli-cpa") == [(canceled, "canceled")]
    assert not (tmp_path / "a").exists()


async def test_stale_cancel(daemon: Daemon) -> None:
    """§7: cancelling a task that does not run here answers ``stale``."""
    async with client(daemon) as http:
        response = await http.post("/v1/session/chat-stale/cancel/0123456789abcdef0123456789abcdef")
    assert (response.status_code, response.json()) == (200, {"cancelled": False, "stale": True})


async def test_concurrent_resumes_one_wins(daemon: Daemon) -> None:
    """R37: of eight concurrent HTTP resumes of a paused task one gets 202, the rest 409
    ``[Conflict] pending task: running``."""
    with trio.fail_after(30):
        async with (
            client(daemon) as http,
            open_frame_connection(daemon.ws_url, daemon.token) as conn,
        ):
            task_hash = await start_sleep(conn, "p", "cli-race")
            await conn.send(Cancel(task_hash=task_hash, cause=Cause.PAUSED))
            await until_done(conn, "p")
            responses: list[httpx.Response] = []

            async def resume() -> None:
                responses.append(
                    await http.post(f"/v1/session/cli-race/task/{task_hash}/resume", json={})
                )

            async with trio.open_nursery() as nursery:
                for _ in range(8):
                    nursery.start_soon(resume)
            assert sorted(r.status_code for r in responses) == [202] + [409] * 7
            conflicts = {r.json()["error"]["message"] for r in responses if r.status_code == 409}
            assert conflicts == {"[Conflict] pending task: running"}
            assert await pending(http, "cli-race") == []


async def test_chat_script_listener_answers_a_send_task(daemon: Daemon, tmp_path: Path) -> None:
    """R2, R8, §8: a script that ``listen``s for ``chat-`` answers the confirmation of a
    task started with POST /v1/send."""
    target = tmp_path / "chat"
    with trio.fail_after(20):
        async with (
            client(daemon) as http,
            open_frame_connection(daemon.ws_url, daemon.token, client="script") as script,
            open_frame_connection(daemon.ws_url, daemon.token) as watcher,
        ):
            await watcher.send(Subscribe(session_id="chat-e2e"))
            await script.send(Listen(prefix="chat-"))
            await script.send(ListLegs(session_id="chat-e2e"))
            await until(script, LegList)  # the listener is registered by now
            response = await http.post(
                "/v1/send", json={"input": f"run: touch {target}", "session_id": "chat-e2e"}
            )
            assert response.status_code == 202
            task_hash = decode(response.content, SendStarted).task_hash
            ask = await until(script, Ask)
            assert isinstance(ask, Ask)
            assert (ask.session_id, ask.task_hash) == ("chat-e2e", task_hash)
            await script.send(Reply(id=ask.id, approve=True))
            frame = await until(watcher, EventFrame)
            while not (isinstance(frame, EventFrame) and isinstance(frame.event, Done)):
                frame = await until(watcher, EventFrame)
            assert frame.task_hash == task_hash
            assert await history(http, "chat-e2e") == [(task_hash, "finished")]
    assert target.exists()


async def test_pausing_withdraws_the_question_as_paused(daemon: Daemon, tmp_path: Path) -> None:
    """Issue 33 item 8, R3, R41: pausing a task at its confirmation withdraws the ask
    saying the task was paused (it used to say "task canceled"); cancelling says
    canceled. The command never runs."""
    target = tmp_path / "never"
    with trio.fail_after(20):
        async with open_frame_connection(daemon.ws_url, daemon.token) as conn:
            reasons = []
            for request_id, cause in (("p", Cause.PAUSED), ("c", Cause.USER_CANCELED)):
                await conn.send(
                    Run(request_id=request_id, session_id="cli-wd", input=f"run: touch {target}")
                )
                ask = await until(conn, Ask)
                assert isinstance(ask, Ask)
                await conn.send(Cancel(task_hash=ask.task_hash, cause=cause))
                withdrawn = await until(conn, WithdrawnFrame)
                assert isinstance(withdrawn, WithdrawnFrame)
                assert withdrawn.id == ask.id
                reasons.append(withdrawn.reason)
                await until_done(conn, request_id)
    assert reasons == ["task paused", "task canceled"]
    assert not target.exists()
