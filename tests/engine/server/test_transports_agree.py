"""HTTP and WebSocket agree: each shared command, sent over both transports to one
daemon, has the same outcome and the same error code (§7, §8, R35, R37, R40, R41,
R44, R46, R71, R76).

Both transports call one command layer (`agentrio.engine.server.commands`); these tests hold
them to it from the outside. A WebSocket frame is sent with a ``request_id``, so its
outcome is the one frame naming it (``ok``, a list frame, or an ``error``); ``run``
and ``pending`` report failures in their ``done``, whose message must equal the HTTP
error's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from agentrio.engine.runs import TaskRun
from agentrio.protocol import unstructure
from agentrio.protocol.causes import Cause
from agentrio.protocol.events import Canceled, Confirm, ToolCall
from agentrio.protocol.frames import (
    Accepted,
    AllowedList,
    BackgroundCancel,
    Cancel,
    ClientFrame,
    DoneFrame,
    ErrorFrame,
    EventFrame,
    ForgetAllowed,
    LegList,
    ListAllowed,
    ListLegs,
    ListPending,
    Ok,
    PendingFrame,
    PendingList,
    Reply,
    Run,
    Steer,
    Subscribe,
)
from agentrio.transport import FrameConnection
from tests.engine.server.conftest import Served, receive_type

HASH = "0123456789abcdef0123456789abcdef"
S = "chat-agree"


@attrs.frozen
class Outcome:
    """What a request came to: ``code`` is "" on success; ``result`` is the payload
    both transports carry (a list), else None."""

    code: str
    result: Any = None


def agree(a: Outcome, b: Outcome) -> bool:
    """Same code, and the same payload where both transports carry one."""
    return a.code == b.code and (a.result is None or b.result is None or a.result == b.result)


async def over_http(served: Served, method: str, path: str, body: Any = None) -> Outcome:
    response = await served.http.request(method, path, json=body)
    if response.status_code >= 400:
        return Outcome(code=response.json()["error"]["code"])
    data = response.json() if response.content else {}
    for key in ("tasks", "legs", "rules"):
        if key in data:
            return Outcome(code="", result=data[key])
    return Outcome(code="")


async def over_ws(conn: FrameConnection, frame: Any, request_id: str = "agree") -> Outcome:
    """Send ``frame`` (a control frame) with ``request_id``; the answer naming it."""
    await conn.send(attrs.evolve(frame, request_id=request_id))
    while True:
        answer = await conn.receive()
        match answer:
            case ErrorFrame(ref=ref, code=code) if ref == request_id:
                return Outcome(code=code)
            case Ok(request_id=rid) if rid == request_id:
                return Outcome(code="")
            case PendingList(tasks=items, request_id=rid) if rid == request_id:
                return Outcome(code="", result=unstructure(items))
            case LegList(legs=items, request_id=rid) if rid == request_id:
                return Outcome(code="", result=unstructure(items))
            case AllowedList(rules=items, request_id=rid) if rid == request_id:
                return Outcome(code="", result=unstructure(items))


SESSION = f"/v1/session/{S}"
#: (what, HTTP request, WebSocket frame, expected code: "" for success)
CASES: list[tuple[str, tuple[str, str, Any], ClientFrame, str]] = [
    (
        "stale pause",
        ("POST", f"{SESSION}/pause/{HASH}", None),
        Cancel(session_id=S, task_hash=HASH, cause=Cause.PAUSED),
        "",
    ),
    (
        "cancel, malformed hash",
        ("POST", f"{SESSION}/cancel/xyz", None),
        Cancel(session_id=S, task_hash="xyz"),
        "bad_request",
    ),
    (
        "cancel, bad session",
        ("POST", f"/v1/session/a.b/cancel/{HASH}", None),
        Cancel(session_id="a.b", task_hash=HASH),
        "bad_request",
    ),
    (
        "steer, not running",
        ("POST", "/v1/send", {"input": "x", "session_id": S, "pending_task": HASH}),
        Steer(session_id=S, task_hash=HASH, input="x"),
        "not_found",
    ),
    (
        "steer, malformed hash",
        ("POST", "/v1/send", {"input": "x", "session_id": S, "pending_task": "xyz"}),
        Steer(session_id=S, task_hash="xyz", input="x"),
        "bad_request",
    ),
    (
        "answer, gone",
        ("POST", f"{SESSION}/confirm/{HASH}", {"approve": True}),
        Reply(id=HASH, approve=True),
        "gone",
    ),
    (
        "answer, malformed id",
        ("POST", f"{SESSION}/confirm/xyz", {"approve": True}),
        Reply(id="xyz", approve=True),
        "bad_request",
    ),
    ("pending tasks", ("GET", f"{SESSION}/task", None), ListPending(session_id=S), ""),
    (
        "pending, bad session",
        ("GET", "/v1/session/a.b/task", None),
        ListPending(session_id="a.b"),
        "bad_request",
    ),
    ("pending by origin", ("GET", "/v1/pending?origin=cli-", None), ListPending(origin="cli-"), ""),
    (
        "pending, bad origin",
        ("GET", "/v1/pending?origin=x-", None),
        ListPending(origin="x-"),
        "bad_request",
    ),
    ("pending, no origin", ("GET", "/v1/pending", None), ListPending(), "bad_request"),
    ("legs", ("GET", f"{SESSION}/legs", None), ListLegs(session_id=S), ""),
    (
        "cancel leg, unknown",
        ("POST", f"{SESSION}/legs/cmd_1a2b3c4d/cancel", None),
        BackgroundCancel(session_id=S, leg_id="cmd_1a2b3c4d"),
        "not_found",
    ),
    (
        "cancel leg, malformed",
        ("POST", f"{SESSION}/legs/xyz/cancel", None),
        BackgroundCancel(session_id=S, leg_id="xyz"),
        "bad_request",
    ),
    (
        "cancel every leg",
        ("POST", f"{SESSION}/legs/all/cancel", None),
        BackgroundCancel(session_id=S, leg_id="all"),
        "",
    ),
    ("allowed", ("GET", f"{SESSION}/allowed", None), ListAllowed(session_id=S), ""),
    (
        "forget, unknown",
        ("DELETE", f"{SESSION}/allowed/rule_1a2b3c4d", None),
        ForgetAllowed(session_id=S, rule_id="rule_1a2b3c4d"),
        "not_found",
    ),
    (
        "forget, malformed",
        ("DELETE", f"{SESSION}/allowed/xyz", None),
        ForgetAllowed(session_id=S, rule_id="xyz"),
        "bad_request",
    ),
    (
        "forget all",
        ("DELETE", f"{SESSION}/allowed/all", None),
        ForgetAllowed(session_id=S, rule_id="all"),
        "",
    ),
]


@pytest.mark.parametrize(
    ("http", "frame", "code"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
async def test_same_request_same_outcome(
    served: Served, http: tuple[str, str, Any], frame: ClientFrame, code: str
) -> None:
    """§7, §8, R35, R44, R71, R76: a request about nothing running — queries, stale
    pauses, unknown or malformed ids — succeeds or fails alike over both transports,
    with the same error code and the same list."""
    by_http = await over_http(served, *http)
    async with served.connect() as conn:
        by_ws = await over_ws(conn, frame)
    assert agree(by_http, by_ws), (by_http, by_ws)
    assert by_http.code == code


async def test_stale_cancel_records_the_same_event(served: Served) -> None:
    """§7, R40: a cancel of a task that does not run here is a stale cancel over both
    transports — no error, and one ``canceled`` event (``user_canceled``, not kept)
    in the named session."""
    by_http = await over_http(served, "POST", f"/v1/session/chat-stale-h/cancel/{HASH}")
    async with served.connect() as conn:
        by_ws = await over_ws(conn, Cancel(session_id="chat-stale-w", task_hash=HASH))
    assert by_http == by_ws == Outcome(code="")

    def recorded(session_id: str) -> list[tuple[str, bool]]:
        events = served.engine.session(session_id).hub.events_of(HASH)
        return [(e.cause, e.kept) for e in events if isinstance(e, Canceled)]

    assert recorded("chat-stale-h") == recorded("chat-stale-w") == [("user_canceled", False)]


async def start_sleep_http(served: Served, session_id: str) -> str:
    response = await served.http.post(
        "/v1/send", json={"input": "run: sleep 30", "session_id": session_id, "allow_all": True}
    )
    assert response.status_code == 202
    task_hash: str = response.json()["task_hash"]
    return task_hash


async def start_sleep_ws(conn: FrameConnection, session_id: str, request_id: str) -> str:
    await conn.send(
        Run(request_id=request_id, session_id=session_id, input="run: sleep 30", allow_all=True)
    )
    accepted = await receive_type(conn, Accepted)
    assert isinstance(accepted, Accepted)
    return accepted.task_hash


async def tool_called(served: Served, session_id: str) -> None:
    """Wait until the session's task has called its tool: a steer sent before its
    first turn would be that turn's input (the builtin model answers it and ends)."""
    with trio.fail_after(10):
        while True:
            with served.engine.session(session_id).hub.subscribe() as subscription:
                while True:
                    try:
                        _, event = subscription.receive_nowait()
                    except trio.WouldBlock:
                        break
                    if isinstance(event, ToolCall):
                        return
            await trio.sleep(0.01)


def run_of(served: Served, session_id: str, task_hash: str) -> TaskRun:
    run = served.engine.find_run(task_hash, session_id)
    assert run is not None
    return run


@pytest.mark.parametrize("pause", [False, True], ids=["cancel", "pause"])
async def test_cancel_and_pause_of_a_running_task_agree(served: Served, pause: bool) -> None:
    """R40, R41, R46: cancelling (or pausing) a running task — over WebSocket from the
    connection that started it — succeeds over both, ends both runs alike, and leaves
    the same resumable list (empty after a cancel, the task after a pause)."""
    verb = "pause" if pause else "cancel"
    cause = Cause.PAUSED if pause else Cause.USER_CANCELED
    async with served.connect() as conn:
        on_http = await start_sleep_http(served, "chat-run-h")
        on_ws = await start_sleep_ws(conn, "chat-run-w", "r")
        runs = [run_of(served, "chat-run-h", on_http), run_of(served, "chat-run-w", on_ws)]
        by_http = await over_http(served, "POST", f"/v1/session/chat-run-h/{verb}/{on_http}")
        by_ws = await over_ws(conn, Cancel(session_id="chat-run-w", task_hash=on_ws, cause=cause))
        assert by_http == by_ws == Outcome(code="")
        statuses = {(await run.wait_done()).status for run in runs}
        assert statuses == {"paused" if pause else "canceled"}
        listed_http = await over_http(served, "GET", "/v1/session/chat-run-h/task")
        listed_ws = await over_ws(conn, ListPending(session_id="chat-run-w"), "list")
    assert [t["task_hash"] for t in listed_http.result] == ([on_http] if pause else [])
    assert [t["task_hash"] for t in listed_ws.result] == ([on_ws] if pause else [])


async def test_steer_of_a_running_task_agrees(served: Served) -> None:
    """R35: steering a running task succeeds over both transports and reaches the run;
    empty steer text is ``bad_request`` over both."""
    async with served.connect() as conn:
        on_http = await start_sleep_http(served, "chat-steer-h")
        on_ws = await start_sleep_ws(conn, "chat-steer-w", "r")
        for session_id in ("chat-steer-h", "chat-steer-w"):
            await tool_called(served, session_id)
        body = {"input": "more", "session_id": "chat-steer-h", "pending_task": on_http}
        by_http = await over_http(served, "POST", "/v1/send", body)
        by_ws = await over_ws(conn, Steer(session_id="chat-steer-w", task_hash=on_ws, input="more"))
        assert by_http == by_ws == Outcome(code="")
        for session_id, task_hash in (("chat-steer-h", on_http), ("chat-steer-w", on_ws)):
            run = served.engine.find_run(task_hash, session_id)
            assert run is not None
            assert list(run.steers) == ["more"]
        empty_http = await over_http(served, "POST", "/v1/send", {**body, "input": ""})
        empty_ws = await over_ws(
            conn, Steer(session_id="chat-steer-w", task_hash=on_ws, input=""), "empty"
        )
        assert empty_http == empty_ws == Outcome(code="bad_request")
        for session_id, task_hash in (("chat-steer-h", on_http), ("chat-steer-w", on_ws)):
            await over_ws(conn, Cancel(session_id=session_id, task_hash=task_hash), "c" + task_hash)


async def next_confirm(conn: FrameConnection, task_hash: str) -> str:
    while True:
        frame = await receive_type(conn, EventFrame)
        assert isinstance(frame, EventFrame)
        if frame.task_hash == task_hash and isinstance(frame.event, Confirm):
            return frame.event.confirm_hash


async def test_answering_a_confirmation_agrees(served: Served, tmp_path: Path) -> None:
    """R1, R8 B: a confirmation of a subscribed session is answered alike over both
    transports (the call runs), and answering it again is ``gone`` over both."""
    session = "chat-answer"
    async with served.connect() as conn:
        assert await over_ws(conn, Subscribe(session_id=session), "sub") == Outcome(code="")
        hashes: list[str] = []
        asks: list[str] = []
        runs: list[TaskRun] = []
        for name in ("h", "w"):
            body = {"input": f"run: touch {tmp_path / name}", "session_id": session}
            response = await served.http.post("/v1/send", json=body)
            hashes.append(response.json()["task_hash"])
            runs.append(run_of(served, session, hashes[-1]))
            asks.append(await next_confirm(conn, hashes[-1]))
        path = f"/v1/session/{session}/confirm/"
        by_http = await over_http(served, "POST", path + asks[0], {"approve": True})
        by_ws = await over_ws(conn, Reply(id=asks[1], approve=True), "answer")
        assert by_http == by_ws == Outcome(code="")
        assert {(await run.wait_done()).status for run in runs} == {"finished"}
        again_http = await over_http(served, "POST", path + asks[1], {"approve": True})
        again_ws = await over_ws(conn, Reply(id=asks[0], approve=True), "again")
    assert again_http == again_ws == Outcome(code="gone")
    assert (tmp_path / "h").exists()
    assert (tmp_path / "w").exists()


async def failed_start(conn: FrameConnection, frame: Run | PendingFrame) -> tuple[str, str]:
    """The code and message a ``run``/``pending`` that cannot start comes to: a bad
    field is refused by an ``error`` naming the request (and no ``done``, §8); a
    well-formed request that cannot be carried out ends in ``done{failed}``. Either
    way no ``accepted`` comes first."""
    await conn.send(frame)
    while True:
        answer = await conn.receive()
        assert not isinstance(answer, Accepted)
        match answer:
            case ErrorFrame(ref=ref, code=code, message=message) if ref == frame.request_id:
                return code, message
            case DoneFrame(request_id=rid, status=status, error=error) if rid == frame.request_id:
                assert status == "failed"
                return "done", error


async def test_start_and_resume_failures_agree(served: Served) -> None:
    """R35, R37, R71, §8: a start or resume that cannot happen fails with the same
    message over both transports (HTTP error body; over WS an ``error`` frame for a
    bad field, else the ``done`` of ``run``/``pending``): empty input, a bad session
    id, a malformed task hash, an unknown pending task, a task a run holds."""
    async with served.connect() as conn:
        running = await start_sleep_ws(conn, "chat-fail", "sleep")
        cases: list[tuple[tuple[str, str, Any], Run | PendingFrame, str]] = [
            (
                ("POST", "/v1/send", {"input": " ", "session_id": "chat-fail"}),
                Run(request_id="1", session_id="chat-fail", input=" "),
                "bad_request",
            ),
            (
                ("POST", "/v1/send", {"input": "hi", "session_id": "a.b"}),
                Run(request_id="2", session_id="a.b", input="hi"),
                "bad_request",
            ),
            (
                ("POST", "/v1/session/chat-fail/task/xyz/resume", {}),
                PendingFrame(request_id="2b", session_id="chat-fail", task_hash="xyz"),
                "bad_request",
            ),
            (
                ("POST", f"/v1/session/chat-fail/task/{HASH}/resume", {}),
                PendingFrame(request_id="3", session_id="chat-fail", task_hash=HASH),
                "not_found",
            ),
            (
                ("POST", f"/v1/session/chat-fail/task/{running}/resume", {}),
                PendingFrame(request_id="4", session_id="chat-fail", task_hash=running),
                "conflict",
            ),
        ]
        for (method, path, body), frame, code in cases:
            response = await served.http.request(method, path, json=body)
            error = response.json()["error"]
            assert error["code"] == code
            by_ws = (code if code == "bad_request" else "done", error["message"])
            assert await failed_start(conn, frame) == by_ws
        await over_ws(conn, Cancel(task_hash=running), "stop")
