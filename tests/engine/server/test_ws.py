"""``/v1/ws`` against an in-process daemon (R5, R6, R8, R37, R40-R43, R46, R70, R71)."""

from __future__ import annotations

import os
from pathlib import Path

import attrs
import pytest
import trio

from agentrio import AuthRefused, Disconnected
from agentrio.engine.pending import Verified
from agentrio.engine.server.ws import verify_frame
from agentrio.protocol.causes import Cause
from agentrio.protocol.codec import decode
from agentrio.protocol.events import Confirm, Done, TaskStarted, ToolResult, ToolSkipped
from agentrio.protocol.frames import (
    Accepted,
    Ask,
    BackgroundCancel,
    Cancel,
    DoneFrame,
    ErrorFrame,
    EventFrame,
    Hello,
    LegList,
    Listen,
    ListLegs,
    ListPending,
    Ok,
    PendingFrame,
    PendingList,
    Reply,
    Run,
    Steer,
    Subscribe,
    Verify,
    Withdrawn,
)
from agentrio.protocol.http import SendStarted
from agentrio.transport import FrameConnection, open_frame_connection, open_websocket
from tests.engine.server.conftest import ALLOWED_ORIGIN, Served, receive_type, receive_until_done

HASH = "0123456789abcdef0123456789abcdef"
#: What the model reads of a confirmation whose listener left undecided (R6, R98).
WITHDRAWN_UNDECIDED = "the confirmation was withdrawn before anyone decided (client disconnected)"


async def next_ask(conn: FrameConnection) -> Ask:
    frame = await receive_type(conn, Ask)
    assert isinstance(frame, Ask)
    return frame


async def next_error(conn: FrameConnection) -> ErrorFrame:
    frame = await conn.receive()
    assert isinstance(frame, ErrorFrame), frame
    return frame


async def test_hello_with_wrong_token_closes_4401(served: Served) -> None:
    """R70, §8: a wrong token closes the socket with 4401."""
    with pytest.raises(AuthRefused, match="wrong token"):
        async with open_frame_connection(served.ws_url, "not-the-token"):
            raise AssertionError("unreachable")


@pytest.mark.parametrize(
    "first",
    [
        '{"type": "list_pending", "session_id": "cli-a"}',
        "not json",
        '{"type": "hello", "token": "%s", "client": "t", "protocol": 2}',
    ],
)
async def test_first_frame_must_be_a_valid_hello(served: Served, first: str) -> None:
    """§8: anything but a valid ``hello`` (right token, protocol 1) first closes 4401."""
    async with open_websocket(served.ws_url) as conn:
        await conn.send_raw(first.replace("%s", served.token))
        with pytest.raises(Disconnected) as info:
            await conn.receive()
    assert info.value.close_code == 4401


def upgrade_headers(origin: str) -> dict[str, str]:
    return {
        "Connection": "Upgrade",
        "Upgrade": "websocket",
        "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
        "Sec-WebSocket-Version": "13",
        "Origin": origin,
    }


async def test_origin_check_on_upgrade(served: Served) -> None:
    """R70: a foreign browser Origin is refused before the upgrade (403); allowed
    origins and the daemon's own address pass."""
    refused = await served.http.get("/v1/ws", headers=upgrade_headers("https://evil.example"))
    assert refused.status_code == 403
    own = f"http://localhost:{served.server.port}"
    for origin in (ALLOWED_ORIGIN, own):
        async with open_frame_connection(served.ws_url, served.token, origin=origin) as conn:
            assert conn.welcome is not None
            assert conn.welcome.daemon_version == "9.9.9"


async def test_run_streams_events_then_one_done(served: Served) -> None:
    """§8: ``run`` → ``accepted``, that task's events in order, exactly one ``done``."""
    async with served.connect() as conn:
        await conn.send(Run(request_id="r1", session_id="cli-a", input="run: echo hello"))
        frames = await receive_until_done(conn, "r1")
    accepted, *events, done = frames
    assert isinstance(accepted, Accepted)
    assert (accepted.request_id, accepted.session_id) == ("r1", "cli-a")
    assert all(isinstance(f, EventFrame) and f.task_hash == accepted.task_hash for f in events)
    kinds = [type(f.event) for f in events if isinstance(f, EventFrame)]
    assert kinds[0] is TaskStarted
    assert kinds[-1] is Done
    assert ToolResult in kinds
    seqs = [f.event.seq for f in events if isinstance(f, EventFrame)]
    assert seqs == sorted(seqs)
    assert done == DoneFrame(request_id="r1", task_hash=accepted.task_hash, status="finished")


async def test_confirmation_goes_to_the_starting_connection(served: Served, tmp_path: Path) -> None:
    """R5, R60, §8: a confirmation is an ``ask`` on the connection that started the run;
    approving runs the command."""
    target = tmp_path / "x"
    async with served.connect() as conn:
        await conn.send(
            Run(request_id="r", session_id="cli-b", input=f"run: touch {target}", window_hash="w1")
        )
        ask = await next_ask(conn)
        assert (ask.kind, ask.session_id, ask.tool_name) == ("tool_confirm", "cli-b", "run_command")
        assert ask.tool_args == {"command": f"touch {target}", "cwd": os.path.realpath(os.getcwd())}
        assert not target.exists()
        await conn.send(Reply(id=ask.id, approve=True))
        frames = await receive_until_done(conn, "r")
    results = [f.event for f in frames if isinstance(f, EventFrame)]
    assert any(isinstance(e, ToolResult) and e.ok for e in results)
    assert isinstance(frames[-1], DoneFrame)
    assert frames[-1].status == "finished"
    assert target.exists()


async def test_cancel_rights_pause_and_resume(served: Served) -> None:
    """R40, R41, R42, R46: only the starting connection may cancel; a cancel of a task
    not running here is a stale cancel, not an error (§7); pause keeps the task listed;
    ``pending`` resumes it on this connection; cancel then deletes it."""
    async with served.connect() as owner, served.connect() as other:
        await owner.send(
            Run(request_id="r", session_id="cli-c", input="run: sleep 30", allow_all=True)
        )
        accepted = await receive_type(owner, Accepted)
        assert isinstance(accepted, Accepted)
        task_hash = accepted.task_hash
        await other.send(Cancel(task_hash=task_hash))
        assert await next_error(other) == ErrorFrame(
            code="forbidden",
            message=f"task {task_hash} was not started by this connection",
            ref=task_hash,
        )
        await other.send(Cancel(task_hash=HASH, request_id="stale"))
        assert await other.receive() == Ok(request_id="stale")
        await owner.send(Cancel(task_hash=task_hash, cause=Cause.PAUSED))
        done = (await receive_until_done(owner, "r"))[-1]
        assert attrs.evolve(done, stopped=None) == DoneFrame(
            request_id="r", task_hash=task_hash, status="paused"
        )
        assert done.stopped is not None
        assert done.stopped.cause == "paused"
        await owner.send(ListPending(session_id="cli-c"))
        listed = await receive_type(owner, PendingList)
        assert isinstance(listed, PendingList)
        assert [t.task_hash for t in listed.tasks] == [task_hash]
        await owner.send(PendingFrame(request_id="p", session_id="cli-c", task_hash=task_hash))
        resumed = await receive_type(owner, Accepted)
        assert isinstance(resumed, Accepted)
        await owner.send(Cancel(task_hash=resumed.task_hash))
        done = (await receive_until_done(owner, "p"))[-1]
        assert attrs.evolve(done, stopped=None) == DoneFrame(
            request_id="p", task_hash=resumed.task_hash, status="canceled"
        )
        await owner.send(ListPending(session_id="cli-c"))
        listed = await receive_type(owner, PendingList)
        assert isinstance(listed, PendingList)
        assert listed.tasks == []
        await owner.send(PendingFrame(request_id="q", session_id="cli-c", task_hash=task_hash))
        gone = await owner.receive()
        assert isinstance(gone, DoneFrame)
        assert (gone.request_id, gone.status) == ("q", "failed")
        assert "no pending task" in gone.error


async def test_bad_frames_get_errors_and_the_connection_lives(served: Served) -> None:
    """R71, §8: every bad frame gets an ``error`` frame with a ``ref`` when one is known;
    a run afterwards works normally."""
    cases = [
        ("{broken", "bad_frame", "$: invalid JSON", ""),
        ('{"type": "nope"}', "bad_frame", "$.type: unknown frame type 'nope'", ""),
        ('{"type": "run", "request_id": 7}', "bad_frame", "$.request_id: expected a string", ""),
        (
            '{"type": "run", "request_id": "r9", "session_id": "cli-a"}',
            "bad_frame",
            "$.input: required field missing",
            "r9",
        ),
        ("[1, 2]", "bad_frame", "$: expected an object", ""),
        ('{"type": "list_pending", "session_id": "../x"}', "bad_request", "invalid session id", ""),
        ('{"type": "reply", "id": "abc", "approve": true}', "bad_request", "invalid ask id", "abc"),
        (f'{{"type": "reply", "id": "{HASH}"}}', "gone", "already resolved", HASH),
        ("x" * (1024 * 1024 + 1), "too_large", "larger than 1048576 bytes", ""),
    ]
    async with served.connect() as conn:
        for text, code, message, ref in cases:
            await conn.send_raw(text)
            error = await next_error(conn)
            assert (error.code, error.ref) == (code, ref), text[:80]
            assert message in error.message
        await conn.send(Hello(token=served.token, client="again", protocol=1))
        assert (await next_error(conn)).message == "$.type: hello was already received"
        await conn.send(Steer(session_id="cli-a", task_hash=HASH, input="more"))
        steer_error = await next_error(conn)
        assert (steer_error.code, steer_error.ref) == ("not_found", HASH)
        await conn.send(ListLegs(session_id="cli-a"))
        assert await conn.receive() == LegList(session_id="cli-a", legs=[])
        await conn.send(BackgroundCancel(session_id="cli-a", leg_id="cmd_1a2b3c4d"))
        leg_error = await next_error(conn)
        assert leg_error.code == "not_found"
        assert "no such leg" in leg_error.message
        await conn.send(Run(request_id="ok", session_id="cli-a", input="run: echo fine"))
        frames = await receive_until_done(conn, "ok")
    assert isinstance(frames[-1], DoneFrame)
    assert frames[-1].status == "finished"


async def test_run_with_a_bad_session_gets_an_error_and_no_done(served: Served) -> None:
    """§8, R71 (issue 17, item 5): a ``run`` with a bad field is refused by one
    ``error`` whose ``ref`` is its ``request_id``: no ``accepted``, no ``done``."""
    async with served.connect() as conn:
        await conn.send(Run(request_id="bad", session_id="no/slash", input="hi"))
        error = await conn.receive()
        await conn.send(Run(request_id="ok", session_id="chat-after", input="hi"))
        frames = await receive_until_done(conn, "ok")
    assert isinstance(error, ErrorFrame)
    assert (error.code, error.ref) == ("bad_request", "bad")
    assert "invalid session id" in error.message
    assert not [f for f in frames if getattr(f, "request_id", "") == "bad"]


async def send_chat(served: Served, session_id: str, text: str) -> str:
    response = await served.http.post("/v1/send", json={"input": text, "session_id": session_id})
    assert response.status_code == 202
    return decode(response.content, SendStarted).task_hash


async def test_listen_makes_a_script_answer_chat_confirmations(
    served: Served, tmp_path: Path
) -> None:
    """R2, R8, §8: a ``listen {prefix: "chat-"}`` connection gets the confirmation of an
    HTTP-started chat task and approves it; the same ask is then gone over HTTP (410)."""
    target = tmp_path / "chat"
    async with served.connect() as script:
        await script.send(Listen(prefix="chat-"))
        await script.send(ListLegs(session_id="chat-l"))  # a round trip: listen is in place
        await receive_type(script, LegList)
        task_hash = await send_chat(served, "chat-l", f"run: touch {target}")
        ask = await next_ask(script)
        assert (ask.task_hash, ask.session_id) == (task_hash, "chat-l")
        await script.send(Reply(id=ask.id, approve=True))
        run = served.engine.find_run(task_hash, "chat-l")
        if run is not None:
            assert (await run.wait_done()).status == "finished"
    assert target.exists()
    response = await served.http.post(f"/v1/session/chat-l/confirm/{ask.id}", json={})
    assert response.status_code == 410


async def test_closing_a_listener_fails_its_asks_closed(served: Served, tmp_path: Path) -> None:
    """R6, R98: when a connection that was shown a confirmation closes, the call is
    not run, and the model is told it was withdrawn undecided ("client
    disconnected"), never that someone denied it."""
    target = tmp_path / "never"
    async with served.connect() as script:
        await script.send(Listen(prefix="chat-"))
        await script.send(ListLegs(session_id="chat-z"))
        await receive_type(script, LegList)
        task_hash = await send_chat(served, "chat-z", f"run: touch {target}")
        await next_ask(script)
        run = served.engine.find_run(task_hash, "chat-z")
        assert run is not None
    assert (await run.wait_done()).status == "finished"
    skipped = [e for e in served.engine.session("chat-z").hub.events_of(task_hash)]
    assert any(isinstance(e, ToolSkipped) and e.reason == WITHDRAWN_UNDECIDED for e in skipped)
    assert not target.exists()


async def test_subscribe_replays_and_answers_confirmations(served: Served, tmp_path: Path) -> None:
    """R8 B, §8: ``subscribe`` replays recent events then streams live ones, and makes
    the connection a listener: it answers the ``confirm`` event with ``reply``."""
    first = await send_chat(served, "chat-sub", "run: echo one")
    run = served.engine.find_run(first, "chat-sub")
    if run is not None:
        await run.wait_done()
    target = tmp_path / "sub"
    async with served.connect() as conn:
        await conn.send(Subscribe(session_id="chat-sub"))
        replayed = await conn.receive()
        assert isinstance(replayed, EventFrame)
        assert (replayed.task_hash, type(replayed.event)) == (first, TaskStarted)
        second = await send_chat(served, "chat-sub", f"run: touch {target}")
        while True:
            frame = await receive_type(conn, EventFrame)
            assert isinstance(frame, EventFrame)
            if isinstance(frame.event, Confirm):
                break
        assert frame.task_hash == second
        await conn.send(Reply(id=frame.event.confirm_hash, approve=True))
        while not (isinstance(frame, EventFrame) and isinstance(frame.event, Done)):
            frame = await conn.receive()
        assert frame.task_hash == second
    assert target.exists()


async def test_reply_to_an_ask_not_shown_is_forbidden(served: Served, tmp_path: Path) -> None:
    """R5, R46: a connection cannot answer another window's ask."""
    async with served.connect() as owner, served.connect() as other:
        await owner.send(Run(request_id="r", session_id="cli-f", input=f"run: touch {tmp_path}/f"))
        ask = await next_ask(owner)
        await other.send(Reply(id=ask.id, approve=True))
        error = await next_error(other)
        assert (error.code, error.ref) == ("forbidden", ask.id)
        await owner.send(Cancel(task_hash=ask.task_hash))
        frames = await receive_until_done(owner, "r")
        if Withdrawn(id=ask.id, reason="task canceled") not in frames:
            # The withdrawal comes from the listener's task, the done from the run's:
            # either may be sent first.
            frames.append(await owner.receive())
    assert Withdrawn(id=ask.id, reason="task canceled") in frames
    assert isinstance(frames[-1], DoneFrame)
    assert frames[-1].status == "canceled"
    assert not (tmp_path / "f").exists()


async def test_disconnect_cancels_runs_and_keeps_them_pending(served: Served) -> None:
    """R43: closing the connection cancels its runs with cause ``disconnected``; their
    pending tasks are kept."""
    async with served.connect() as conn:
        await conn.send(
            Run(request_id="r", session_id="cli-d", input="run: sleep 30", allow_all=True)
        )
        accepted = await receive_type(conn, Accepted)
        assert isinstance(accepted, Accepted)
        run = served.engine.find_run(accepted.task_hash, "cli-d")
        assert run is not None
    outcome = await run.wait_done()
    assert (outcome.status, outcome.cause) == ("aborted", Cause.DISCONNECTED)
    pending = await served.engine.pending_tasks("cli-d")
    assert [t.task_hash for t in pending] == [accepted.task_hash]


def test_verify_frame_of_a_verification_notice() -> None:
    """R7: the registry's password-check notice becomes a ``verify`` frame."""
    notice = Verified(entry_id="a" * 32, ok=False, error="wrong password")
    assert verify_frame(notice) == Verify(id="a" * 32, ok=False, error="wrong password")


async def test_shutdown_closes_connections_with_4001(served: Served) -> None:
    """R53: when the server stops, open connections are closed with 4001."""
    async with served.connect() as conn:
        served.server.context.closing.set()
        with pytest.raises(Disconnected) as info:
            with trio.fail_after(5):
                await conn.receive()
    assert info.value.close_code == 4001
