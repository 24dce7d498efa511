"""The HTTP routes of SPEC §7 against an in-process daemon (R35-R37, R40, R45, R70, R71)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
import trio

from agentrio.protocol.causes import Cause
from agentrio.protocol.codec import decode
from agentrio.protocol.events import Canceled
from agentrio.protocol.http import (
    ErrorBody,
    Health,
    HistoryList,
    HistoryRecord,
    PendingTasks,
    Questions,
    ResumeAccepted,
    SendStarted,
)
from tests.engine.server.conftest import Served

HASH = "0123456789abcdef0123456789abcdef"


def error_of(response: httpx.Response) -> tuple[int, str, str]:
    body = decode(response.content, ErrorBody)
    return response.status_code, body.error.code, body.error.message


async def wait_run(served: Served, session_id: str, task_hash: str) -> None:
    run = served.engine.find_run(task_hash, session_id)
    if run is not None:
        await run.wait_done()


async def test_health_needs_no_token(served: Served) -> None:
    """§7: GET /v1/health answers without a token, with engine statistics."""
    async with httpx.AsyncClient(base_url=served.server.base_url) as anonymous:
        response = await anonymous.get("/v1/health")
    assert response.status_code == 200
    health = decode(response.content, Health)
    assert health.ok is True
    assert health.version == "9.9.9"
    assert (health.tasks, health.legs) == (0, 0)
    assert health.statistics["sessions"] == 0
    assert health.statistics["pending"]["entries"] == 0


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/v1/send"),
        ("POST", f"/v1/session/chat-a/cancel/{HASH}"),
        ("POST", f"/v1/session/chat-a/confirm/{HASH}"),
        ("GET", "/v1/session/chat-a/task"),
        ("GET", f"/v1/session/chat-a/task/{HASH}/questions"),
        ("POST", f"/v1/session/chat-a/task/{HASH}/resume"),
        ("DELETE", f"/v1/session/chat-a/task/{HASH}"),
        ("GET", "/v1/session/chat-a/task/history"),
        ("GET", f"/v1/session/chat-a/task/{HASH}/history"),
        ("GET", "/v1/session/chat-a/events"),
    ],
)
async def test_every_route_but_health_needs_the_token(
    served: Served, method: str, path: str
) -> None:
    """R70: no token or a wrong token gets 401 ``unauthorized`` on every other route."""
    async with httpx.AsyncClient(base_url=served.server.base_url) as anonymous:
        missing = await anonymous.request(method, path, content=b'{"input": "x"}')
        wrong = await anonymous.request(
            method, path, headers={"Authorization": "Bearer nope"}, content=b"{}"
        )
    for response in (missing, wrong):
        status, code, message = error_of(response)
        assert (status, code) == (401, "unauthorized")
        assert served.token not in message
    assert missing.headers["www-authenticate"] == "Bearer"


async def test_send_runs_a_task_to_history(served: Served) -> None:
    """R35, §7: POST /v1/send starts a task (202), which ends in the history list and
    its record."""
    response = await served.http.post(
        "/v1/send", json={"input": "run: echo hello", "session_id": "chat-h"}
    )
    assert response.status_code == 202
    started = decode(response.content, SendStarted)
    assert started.session_id == "chat-h"
    await wait_run(served, "chat-h", started.task_hash)
    history = decode(
        (await served.http.get("/v1/session/chat-h/task/history")).content, HistoryList
    )
    assert [(e.task_hash, e.status, e.objective) for e in history.tasks] == [
        (started.task_hash, "finished", "run: echo hello")
    ]
    record = await served.http.get(f"/v1/session/chat-h/task/{started.task_hash}/history")
    assert "hello" in decode(record.content, HistoryRecord).content
    none = await served.http.get("/v1/session/chat-h/task/history", params={"keyword": "zzz"})
    assert decode(none.content, HistoryList).tasks == []
    pending = await served.http.get("/v1/session/chat-h/task")
    assert decode(pending.content, PendingTasks).tasks == []


async def test_send_without_session_makes_a_chat_session(served: Served) -> None:
    """§7: without ``session_id`` a ``chat-`` session id is made."""
    response = await served.http.post("/v1/send", json={"input": "hello"})
    started = decode(response.content, SendStarted)
    assert response.status_code == 202
    assert started.session_id.startswith("chat-")
    await wait_run(served, started.session_id, started.task_hash)


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        (b'{"input": 5}', 400, "$.input: expected a string, got a number"),
        (b'{"input": "x", "extra": 1}', 400, "extra"),
        (b"{not json", 400, "$: invalid JSON"),
        (b"[]", 400, "$: expected an object, got an array"),
        (b"{}", 400, "$.input: required field missing"),
        (b'{"input": "x", "session_id": "../etc"}', 400, "invalid session id"),
        (b'{"input": "   "}', 400, "input is empty"),
    ],
)
async def test_bad_send_bodies(served: Served, body: bytes, status: int, message: str) -> None:
    """R71, §7: bad bodies get 400 naming the field (413 over 1 MiB); nothing starts."""
    response = await served.http.post("/v1/send", content=body)
    got_status, code, got_message = error_of(response)
    assert got_status == status
    assert code == ("too_large" if status == 413 else "bad_request")
    assert message in got_message
    assert served.engine.task_count == 0


async def raw_request(served: Served, head: str, body: bytes) -> tuple[int, bytes]:
    """Send a request over a plain socket (httpx cannot be stopped half-way through an
    upload without leaking its body iterator); return status and body."""
    stream = await trio.open_tcp_stream("127.0.0.1", served.server.port)
    async with stream:
        await stream.send_all(head.encode() + b"\r\n\r\n" + body)
        data = b""
        while b"\r\n\r\n" not in data:
            data += await stream.receive_some(65536)
        header, _, rest = data.partition(b"\r\n\r\n")
        length = next(
            int(line.split(b":", 1)[1])
            for line in header.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        while len(rest) < length:
            rest += await stream.receive_some(65536)
    return int(header.split(b" ")[1]), rest


@pytest.mark.parametrize("declared", [True, False])
async def test_body_over_1_mib_is_413(served: Served, declared: bool) -> None:
    """R71, §7: a body over 1 MiB is refused with 413 without being buffered, whether
    its ``Content-Length`` says so up front or it is streamed in chunks."""
    auth = f"Authorization: Bearer {served.token}"
    big = b'{"input": "' + b"x" * (1024 * 1024) + b'"}'
    if declared:
        head = f"POST /v1/send HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}\r\nContent-Length: {len(big)}"
        status, body = await raw_request(served, head, big[:1000])
    else:
        head = f"POST /v1/send HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}\r\nTransfer-Encoding: chunked"
        chunk = b"%x\r\n%s\r\n" % (len(big), big)
        status, body = await raw_request(served, head, chunk + b"0\r\n\r\n")
    error = decode(body, ErrorBody).error
    assert (status, error.code) == (413, "too_large")
    assert error.message == "request body larger than 1048576 bytes"
    assert served.engine.task_count == 0


async def test_bad_paths(served: Served) -> None:
    """R71: malformed session ids and hashes in paths are refused with 400; unknown
    routes and methods get JSON errors."""
    cases = [
        ("GET", "/v1/session/bad.id/task", 400),
        ("GET", "/v1/session/chat-a/task/NOTAHASH/questions", 400),
        ("POST", "/v1/session/chat-a/confirm/xyz", 400),
        ("GET", "/v1/session/chat-a/task/history?limit=abc", 400),
        ("GET", "/v1/session/chat-a/task/history?limit=0", 400),
        ("GET", "/v1/nothing", 404),
        ("PUT", "/v1/send", 405),
    ]
    for method, path, status in cases:
        response = await served.http.request(method, path)
        assert error_of(response)[0] == status, path


async def test_unknown_tasks_are_404_and_unknown_confirms_410(served: Served) -> None:
    """§7: resume, delete, questions and history of an unknown task are 404; a confirm
    of an unknown ask is 410."""
    for method, path in [
        ("POST", f"/v1/session/chat-a/task/{HASH}/resume"),
        ("DELETE", f"/v1/session/chat-a/task/{HASH}"),
        ("GET", f"/v1/session/chat-a/task/{HASH}/questions"),
        ("GET", f"/v1/session/chat-a/task/{HASH}/history"),
    ]:
        assert error_of(await served.http.request(method, path))[:2] == (404, "not_found")
    response = await served.http.post(f"/v1/session/chat-a/confirm/{HASH}", json={"approve": True})
    assert error_of(response)[:2] == (410, "gone")


async def test_stale_cancel_records_a_canceled_event(served: Served) -> None:
    """§7: cancelling a task that does not run here answers stale and records a
    ``canceled`` event."""
    response = await served.http.post(f"/v1/session/chat-s/cancel/{HASH}")
    assert response.status_code == 200
    assert response.json() == {"cancelled": False, "stale": True}
    events = served.engine.session("chat-s").hub.events_of(HASH)
    assert [(type(e), e.cause, e.kept) for e in events if isinstance(e, Canceled)] == [
        (Canceled, "user_canceled", False)
    ]


async def test_cancel_deletes_the_pending_task(served: Served) -> None:
    """R40, R45: an HTTP cancel is ``user_canceled``: the task goes to history as
    canceled and leaves no pending entry."""
    response = await served.http.post(
        "/v1/send", json={"input": "run: sleep 30", "session_id": "chat-c", "allow_all": True}
    )
    started = decode(response.content, SendStarted)
    run = served.engine.find_run(started.task_hash, "chat-c")
    assert run is not None
    cancel = await served.http.post(f"/v1/session/chat-c/cancel/{started.task_hash}")
    body = cancel.json()
    # The reply says what the stop ended (issue 34): at least the call in flight.
    assert body.pop("stopped")["cause"] == "user_canceled"
    assert body == {"cancelled": True, "stale": False}
    outcome = await run.wait_done()
    assert (outcome.status, outcome.cause) == ("canceled", Cause.USER_CANCELED)
    pending = await served.http.get("/v1/session/chat-c/task")
    assert decode(pending.content, PendingTasks).tasks == []
    history = await served.http.get("/v1/session/chat-c/task/history")
    assert [e.status for e in decode(history.content, HistoryList).tasks] == ["canceled"]


async def pending_hashes(served: Served, session_id: str) -> list[str]:
    response = await served.http.get(f"/v1/session/{session_id}/task")
    return [t.task_hash for t in decode(response.content, PendingTasks).tasks]


async def park(served: Served, session_id: str) -> str:
    response = await served.http.post(
        "/v1/send", json={"input": "ask: Which branch? | main, release", "session_id": session_id}
    )
    started = decode(response.content, SendStarted)
    await wait_run(served, session_id, started.task_hash)
    return started.task_hash


async def test_parked_task_questions_resume_and_conflicts(served: Served) -> None:
    """R11, R37, §7: a parked chat task is listed with its questions; of five
    concurrent resumes exactly one gets 202 and the others 409."""
    task_hash = await park(served, "chat-p")
    listed = decode((await served.http.get("/v1/session/chat-p/task")).content, PendingTasks)
    assert [(t.task_hash, t.has_questions) for t in listed.tasks] == [(task_hash, True)]
    questions = decode(
        (await served.http.get(f"/v1/session/chat-p/task/{task_hash}/questions")).content,
        Questions,
    )
    assert [(q.text, q.options) for q in questions.questions] == [
        ("Which branch?", ["main", "release"])
    ]
    responses: list[httpx.Response] = []

    async def resume() -> None:
        responses.append(
            await served.http.post(
                f"/v1/session/chat-p/task/{task_hash}/resume", json={"answers": ["release"]}
            )
        )

    async with trio.open_nursery() as nursery:
        for _ in range(5):
            nursery.start_soon(resume)
    statuses = sorted(r.status_code for r in responses)
    assert statuses == [202, 409, 409, 409, 409]
    for response in responses:
        if response.status_code == 409:
            assert error_of(response)[1:] == ("conflict", "[Conflict] pending task: running")
    winner = next(r for r in responses if r.status_code == 202)
    await wait_run(served, "chat-p", decode(winner.content, ResumeAccepted).task_hash)
    assert (
        decode((await served.http.get("/v1/session/chat-p/task")).content, PendingTasks).tasks == []
    )


async def test_delete_drops_a_pending_task(served: Served) -> None:
    """§7: DELETE drops a pending task (204), then it is unknown (404)."""
    task_hash = await park(served, "chat-d")
    response = await served.http.delete(f"/v1/session/chat-d/task/{task_hash}")
    assert response.status_code == 204
    assert response.content == b""
    assert (
        decode((await served.http.get("/v1/session/chat-d/task")).content, PendingTasks).tasks == []
    )
    again = await served.http.delete(f"/v1/session/chat-d/task/{task_hash}")
    assert error_of(again)[0] == 404


async def test_confirm_of_another_session_is_refused(served: Served, tmp_path: Path) -> None:
    """R71: a confirm hash is answered only under its own session id."""
    async with served.connect() as conn:
        from agentrio.protocol.frames import Ask, Run

        await conn.send(Run(request_id="r", session_id="cli-x", input=f"run: touch {tmp_path}/f"))
        ask = None
        while ask is None:
            frame = await conn.receive()
            ask = frame if isinstance(frame, Ask) else None
        response = await served.http.post(
            f"/v1/session/chat-other/confirm/{ask.id}", json={"approve": True}
        )
        assert error_of(response)[:2] == (404, "not_found")
        assert served.engine.registry.get(ask.id) is not None
        assert not (tmp_path / "f").exists()
