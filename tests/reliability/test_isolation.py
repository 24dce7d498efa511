"""Auth, isolation and fail-closed against the real daemon (R5, R6, R8, R43, R46, R70,
R71).

Nobody gets in without the token or from a foreign page; one connection cannot cancel,
pause or answer another's task; hostile session ids never reach the file system; and a
confirmation that loses its front-end is never taken as an approval.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
import trio

from agentrio import AuthRefused
from agentrio.protocol.causes import Cause
from agentrio.protocol.codec import decode
from agentrio.protocol.frames import (
    Accepted,
    Ask,
    Cancel,
    DoneFrame,
    ErrorFrame,
    Listen,
    ListPending,
    PendingList,
    Reply,
    Run,
    ServerFrame,
)
from agentrio.protocol.http import PendingTasks, SendStarted
from agentrio.testing import RunningDaemon
from agentrio.transport import FrameConnection, open_frame_connection
from tests.e2e.conftest import Daemon, DaemonProcess
from tests.reliability.conftest import client

#: Every authenticated route, with a method (ids well-formed, so only auth can refuse).
ROUTES = [
    ("POST", "/v1/send"),
    ("POST", "/v1/session/chat-a/cancel/" + "0" * 32),
    ("POST", "/v1/session/chat-a/confirm/" + "0" * 32),
    ("GET", "/v1/session/chat-a/events"),
    ("GET", "/v1/session/chat-a/task"),
    ("GET", "/v1/session/chat-a/task/history"),
    ("DELETE", "/v1/session/chat-a/task/" + "0" * 32),
    ("GET", "/v1/session/chat-a/task/" + "0" * 32 + "/questions"),
    ("POST", "/v1/session/chat-a/task/" + "0" * 32 + "/resume"),
    ("GET", "/v1/session/chat-a/task/" + "0" * 32 + "/history"),
]
HOSTILE_IDS = [
    "../etc",
    "..",
    "%2e%2e",
    "%2e%2e%2f%2e%2e",
    "..%2f..%2fhome",
    "cli-../../x",
    "a" * 129,
    "a" * 5000,
    "cli-ünïcødé",
    "chat-\u202etxt",
    "cli-a b",
    "cli-a\x00b",
]


async def test_no_token_wrong_token_and_foreign_origins_are_refused(daemon: Daemon) -> None:
    """R70: every route refuses a missing, empty, wrong or non-Bearer token with 401 and
    a JSON error; the WebSocket refuses a wrong token (4401) and every foreign Origin
    (403 before the upgrade), and accepts the daemon's own origin."""
    refused = 0
    async with httpx.AsyncClient(base_url=daemon.base_url) as http:
        for method, path in ROUTES:
            for header in (
                None,
                "",
                "Bearer",
                "Bearer wrong",
                f"Basic {daemon.token}",
                f"Bearer {daemon.token}x",
                f"Bearer {daemon.token[:-1]}",
            ):
                headers = {} if header is None else {"Authorization": header}
                response = await http.request(method, path, headers=headers)
                assert response.status_code == 401, (method, path, header)
                assert response.json()["error"]["code"] == "unauthorized"
                assert daemon.token not in response.text
                refused += 1
    for token in ("", "wrong", daemon.token + "x", daemon.token.upper()):
        with pytest.raises(AuthRefused):
            async with open_frame_connection(daemon.ws_url, token):
                raise AssertionError("unreachable")
        refused += 1
    port = daemon.base_url.rsplit(":", 1)[1]
    for origin in (
        "https://evil.example",
        "null",
        f"http://127.0.0.1.evil.example:{port}",
        f"http://127.0.0.1:{int(port) + 1}",
        f"https://127.0.0.1:{port}",
        "http://localhost",
    ):
        headers = {
            "Connection": "Upgrade",
            "Upgrade": "websocket",
            "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
            "Sec-WebSocket-Version": "13",
            "Origin": origin,
        }
        async with httpx.AsyncClient(base_url=daemon.base_url) as http:
            response = await http.get("/v1/ws", headers=headers)
        assert response.status_code == 403, origin
        refused += 1
    async with open_frame_connection(
        daemon.ws_url, daemon.token, origin=f"http://127.0.0.1:{port}"
    ) as own:
        assert own.welcome is not None
    print(f"auth: {refused} unauthenticated attempts refused, 0 let in")


async def _until(conn: FrameConnection, kind: type[ServerFrame]) -> ServerFrame:
    while not isinstance(frame := await conn.receive(), kind):
        pass
    return frame


async def test_one_connection_cannot_cancel_pause_or_answer_anothers_task(
    daemon: Daemon, tmp_path: Path
) -> None:
    """R5, R46: a second connection's ``cancel``, ``cancel`` with pause, and ``reply`` to
    the first connection's task each get an ``error`` frame and change nothing: the
    ask is never shown to it, the task keeps waiting, and its own connection approves
    it to the end."""
    made = tmp_path / "made-by-a"
    with trio.fail_after(30):
        async with (
            open_frame_connection(daemon.ws_url, daemon.token) as a,
            open_frame_connection(daemon.ws_url, daemon.token) as b,
        ):
            await a.send(
                Run(
                    request_id="a1",
                    session_id="cli-iso",
                    input=f"run: touch {made}",
                    window_hash="wa",
                )
            )
            accepted = await _until(a, Accepted)
            assert isinstance(accepted, Accepted)
            ask = await _until(a, Ask)
            assert isinstance(ask, Ask)
            # b even runs in the same session, from its own window.
            await b.send(
                Run(request_id="b1", session_id="cli-iso", input="run: echo b", window_hash="wb")
            )
            done_b = await _until(b, DoneFrame)
            assert isinstance(done_b, DoneFrame)
            assert done_b.status == "finished"
            for frame in (
                Cancel(task_hash=accepted.task_hash),
                Cancel(task_hash=accepted.task_hash, cause=Cause.PAUSED),
                Reply(id=ask.id, approve=True),
                Reply(id=ask.id, stop=Cause.USER_CANCELED),
                Reply(id=ask.id, approve=False, reason="not yours"),
            ):
                await b.send(frame)
                error = await b.receive()
                assert isinstance(error, ErrorFrame), (frame, error)
                assert error.code in ("forbidden", "not_found"), error
            assert not made.exists()
            await a.send(Reply(id=ask.id, approve=True))
            done = await _until(a, DoneFrame)
            assert isinstance(done, DoneFrame)
            assert (done.request_id, done.status) == ("a1", "finished")
    assert made.exists()


async def test_hostile_session_ids_are_refused_and_touch_no_file(daemon: Daemon) -> None:
    """R71: traversal (``../``, ``%2e%2e``), over-long and unicode session ids are
    refused on every HTTP route (4xx JSON error) and in ``run`` frames (an ``error``
    naming the run, §8); nothing is created outside ``<home>/sessions`` or inside it."""
    before = sorted(p.relative_to(daemon.home.parent) for p in daemon.home.parent.rglob("*"))
    checked = 0
    async with client(daemon) as http:
        for session in HOSTILE_IDS:
            encoded = quote(session, safe="%") if "%" in session else quote(session, safe="")
            for method, template in [
                ("GET", "/v1/session/{s}/task"),
                ("GET", "/v1/session/{s}/task/history"),
                ("GET", "/v1/session/{s}/events"),
                ("POST", "/v1/session/{s}/cancel/" + "1" * 32),
                ("POST", "/v1/session/{s}/task/" + "1" * 32 + "/resume"),
                ("DELETE", "/v1/session/{s}/task/" + "1" * 32),
            ]:
                response = await http.request(method, template.replace("{s}", encoded))
                assert 400 <= response.status_code < 500, (session, method, template)
                assert response.json()["error"]["message"]
                checked += 1
            response = await http.post(
                "/v1/send", json={"session_id": session, "input": "bg: echo x"}
            )
            assert response.status_code == 400, session
            checked += 1
    async with open_frame_connection(daemon.ws_url, daemon.token) as conn:
        for session in HOSTILE_IDS:
            await conn.send(Run(request_id="r", session_id=session, input="bg: echo x"))
            refused = await conn.receive()
            assert isinstance(refused, ErrorFrame), (session, refused)
            assert (refused.code, refused.ref) == ("bad_request", "r")
            assert "session id" in refused.message
            checked += 1
    after = sorted(p.relative_to(daemon.home.parent) for p in daemon.home.parent.rglob("*"))
    created = {str(p) for p in set(after) - set(before)}
    # Only the daemon's own log and database files may have grown new siblings.
    assert {p for p in created if "sessions" in p or ".." in p or not p.startswith("home")} == set()
    print(f"isolation: {checked} hostile session ids refused")


async def test_closing_a_connection_with_a_confirmation_pending_never_runs_it(
    daemon: Daemon, tmp_path: Path
) -> None:
    """R6, R43: a REPL connection that closes while its task waits on a confirmation
    cancels the run with cause ``disconnected``: the command never runs, and the task
    is kept pending (resumable)."""
    never = tmp_path / "never-approved"
    with trio.fail_after(30):
        async with open_frame_connection(daemon.ws_url, daemon.token) as conn:
            await conn.send(
                Run(
                    request_id="r",
                    session_id="cli-close",
                    input=f"run: touch {never}",
                    window_hash="w",
                )
            )
            accepted = await _until(conn, Accepted)
            assert isinstance(accepted, Accepted)
            await _until(conn, Ask)
        listed: list[str] = []
        async with client(daemon) as http:
            while listed != [accepted.task_hash]:
                await trio.sleep(0.02)
                got = await http.get("/v1/session/cli-close/task")
                listed = [t.task_hash for t in decode(got.content, PendingTasks).tasks]
    assert not never.exists()


async def test_a_listener_that_closes_with_a_claimed_ask_denies_it(tmp_path: Path) -> None:
    """R6, R8, R79: a script listening on ``chat-`` that is shown a confirmation and
    closes without answering, with no other listener coming within
    ``listener_grace_s`` (1 s here), resolves it with an error, which is never an
    approval: the command is not run and the task ends reporting it was not run."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text("[server]\nlistener_grace_s = 1.0\n")
    process = await trio.to_thread.run_sync(DaemonProcess, home)
    try:
        await _listener_closes_with_a_claimed_ask(process.info, tmp_path / "never-run")
    finally:
        assert process.stop() == 0


async def _listener_closes_with_a_claimed_ask(daemon: RunningDaemon, never: Path) -> None:
    with trio.fail_after(30):
        async with client(daemon) as http:
            async with open_frame_connection(daemon.ws_url, daemon.token) as script:
                await script.send(Listen(prefix="chat-"))
                # ``listen`` has no answer; frames are handled in order, so once this
                # one's answer arrives the listener is registered.
                await script.send(ListPending(session_id="chat-listen"))
                await _until(script, PendingList)
                response = await http.post(
                    "/v1/send", json={"session_id": "chat-listen", "input": f"run: touch {never}"}
                )
                task_hash = decode(response.content, SendStarted).task_hash
                ask = await _until(script, Ask)
                assert isinstance(ask, Ask)
                assert ask.task_hash == task_hash
            closed_at = trio.current_time()
            while True:
                history = (await http.get("/v1/session/chat-listen/task/history")).json()["tasks"]
                if history:
                    break
                await trio.sleep(0.02)
            assert trio.current_time() - closed_at >= 0.9  # it waited out the grace
            record = (await http.get(f"/v1/session/chat-listen/task/{task_hash}/history")).json()
    assert history[0]["task_hash"] == task_hash
    assert "not run" in record["content"] or "denied" in record["content"]
    assert not never.exists()
