"""End to end on the real daemon (issue 17, items 1, 5 and 7): a script with the
token cannot see or answer a REPL window's confirmation (R5, R78); a ``run`` with a
bad field is refused by an ``error`` frame (§8, R71); a reloaded page is offered the
confirmation it was showing again (R79)."""

from __future__ import annotations

from pathlib import Path

import trio

from agentrio.protocol.events import Confirm
from agentrio.protocol.frames import (
    Ask,
    DoneFrame,
    ErrorFrame,
    EventFrame,
    Listen,
    ListPending,
    Ok,
    PendingList,
    Reply,
    Run,
    ServerFrame,
    Subscribe,
)
from agentrio.transport import FrameConnection, open_frame_connection
from tests.e2e.conftest import Daemon
from tests.e2e.test_daemon_flows import client, until, until_done


async def answer_to(
    conn: FrameConnection, request_id: str
) -> tuple[ServerFrame, list[ServerFrame]]:
    """The frame answering ``request_id`` (``ok``, a list, an ``error``) and every
    frame that came before it."""
    before: list[ServerFrame] = []
    while True:
        frame = await conn.receive()
        if getattr(frame, "request_id", None) == request_id or (
            isinstance(frame, ErrorFrame) and frame.ref == request_id
        ):
            return frame, before
        before.append(frame)


async def test_a_script_never_sees_or_answers_a_window_confirmation(
    daemon: Daemon, tmp_path: Path
) -> None:
    """R5, R78, R8 B: a script listening on ``cli-`` and ``""`` and subscribed to the
    session gets no ``ask`` for a REPL window's confirmation and cannot approve it,
    neither by ``reply`` nor over HTTP; the window gets the ask and answers it."""
    target = tmp_path / "approved-by-window"
    session = "cli-iso"
    with trio.fail_after(30):
        async with (
            open_frame_connection(daemon.ws_url, daemon.token) as script,
            open_frame_connection(daemon.ws_url, daemon.token) as window,
            client(daemon) as http,
        ):
            for request_id, frame in (
                ("l1", Listen(prefix="cli-", request_id="l1")),
                ("l2", Listen(prefix="", request_id="l2")),
                ("s1", Subscribe(session_id=session, request_id="s1")),
            ):
                await script.send(frame)
                assert isinstance((await answer_to(script, request_id))[0], Ok)
            await window.send(
                Run(
                    request_id="r",
                    session_id=session,
                    input=f"run: touch {target}",
                    window_hash="wwindow1",
                )
            )
            ask = await until(window, Ask)
            assert isinstance(ask, Ask)
            confirm = await until(script, EventFrame)  # the subscriber sees the event
            while not isinstance(confirm, EventFrame) or not isinstance(confirm.event, Confirm):
                confirm = await until(script, EventFrame)
            assert confirm.event.confirm_hash == ask.id
            await script.send(Reply(id=ask.id, approve=True, request_id="steal"))
            refused, _ = await answer_to(script, "steal")
            assert isinstance(refused, ErrorFrame)
            assert refused.code == "forbidden"
            response = await http.post(
                f"/v1/session/{session}/confirm/{ask.id}", json={"approve": True}
            )
            assert response.status_code == 403
            assert not target.exists()
            await window.send(Reply(id=ask.id, approve=True))
            frames = await until_done(window, "r")
            await script.send(ListPending(session_id=session, request_id="sync"))
            answer, seen = await answer_to(script, "sync")
    assert isinstance(answer, PendingList)
    assert [f for f in seen if isinstance(f, Ask)] == []
    done = frames[-1]
    assert isinstance(done, DoneFrame)
    assert done.status == "finished"
    assert target.exists()


async def test_a_run_with_a_bad_session_id_gets_an_error_frame(daemon: Daemon) -> None:
    """§8, R71: a ``run`` whose session id is invalid is refused by one ``error``
    whose ``ref`` is the run's ``request_id`` -- no ``accepted``, no ``done``."""
    with trio.fail_after(20):
        async with open_frame_connection(daemon.ws_url, daemon.token) as conn:
            await conn.send(Run(request_id="bad", session_id="not a session!", input="hi"))
            await conn.send(ListPending(session_id="chat-ok", request_id="after"))
            first, before = await answer_to(conn, "bad")
            second, between = await answer_to(conn, "after")
    assert before == []
    assert between == []
    assert isinstance(first, ErrorFrame)
    assert (first.code, first.ref) == ("bad_request", "bad")
    assert "invalid session id" in first.message
    assert isinstance(second, PendingList)


async def test_a_reloaded_page_is_offered_the_confirmation_again(
    daemon: Daemon, tmp_path: Path
) -> None:
    """R79, R6: a ``chat-`` confirmation shown on a connection that goes away (a
    page reload) is not denied; the reloaded page, listening again, is offered the
    same ask and its approval runs the command."""
    target = tmp_path / "approved-after-reload"
    session = "chat-reload"
    with trio.fail_after(30):
        async with client(daemon) as http:
            async with open_frame_connection(daemon.ws_url, daemon.token) as page:
                await page.send(Listen(prefix="chat-", request_id="l"))
                assert isinstance((await answer_to(page, "l"))[0], Ok)
                response = await http.post(
                    "/v1/send", json={"session_id": session, "input": f"run: touch {target}"}
                )
                assert response.status_code == 202
                shown = await until(page, Ask)
                assert isinstance(shown, Ask)
            await trio.sleep(0.5)  # the daemon has seen the page go
            async with open_frame_connection(daemon.ws_url, daemon.token) as reloaded:
                await reloaded.send(Subscribe(session_id=session, request_id="s"))
                await reloaded.send(Listen(prefix="chat-", request_id="l"))
                again = await until(reloaded, Ask)
                assert isinstance(again, Ask)
                assert again.id == shown.id
                await reloaded.send(Reply(id=again.id, approve=True, request_id="yes"))
                assert isinstance((await answer_to(reloaded, "yes"))[0], Ok)
                while True:
                    frame = await until(reloaded, EventFrame)
                    assert isinstance(frame, EventFrame)
                    if type(frame.event).__name__ in ("Done", "Failed", "Canceled"):
                        break
    assert type(frame.event).__name__ == "Done"
    assert target.exists()
