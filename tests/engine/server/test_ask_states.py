"""An ask's state through the daemon (issue 34 item 1: R97): ``ack`` frames,
``GET /v1/session/{id}/asks`` and the ``ask_state`` events."""

from __future__ import annotations

from pathlib import Path

from agentrio.protocol.asks import Ack, OpenAsks
from agentrio.protocol.codec import decode
from agentrio.protocol.events import AskState, ToolSkipped
from agentrio.protocol.frames import (
    Ask,
    ErrorFrame,
    EventFrame,
    Listen,
    Ok,
    Reply,
    Run,
    Subscribe,
)
from agentrio.protocol.http import SendStarted
from agentrio.transport import open_frame_connection
from tests.engine.server.conftest import Served, receive_type, receive_until_done


async def open_asks(served: Served, session_id: str) -> OpenAsks:
    response = await served.http.get(f"/v1/session/{session_id}/asks")
    assert response.status_code == 200
    return decode(response.content, OpenAsks)


async def test_shown_acknowledged_and_answered_through_the_daemon(
    served: Served, tmp_path: Path
) -> None:
    """R97, R5: the REPL window's ask is listed as shown on ``repl``, not
    acknowledged; its ``ack`` (answered ``ok``) makes it acknowledged; answered, it
    leaves the list, and the task's events told each state in order."""
    target = tmp_path / "acked"
    async with open_frame_connection(served.ws_url, served.token, client="repl") as conn:
        await conn.send(
            Run(
                request_id="r", session_id="cli-life", input=f"run: touch {target}", window_hash="w"
            )
        )
        ask = await receive_type(conn, Ask)
        assert isinstance(ask, Ask)
        (info,) = (await open_asks(served, "cli-life")).asks
        assert (info.id, info.state, info.frontend, info.acknowledged) == (
            ask.id,
            "shown",
            "repl",
            False,
        )
        await conn.send(Ack(id=ask.id, request_id="a1"))
        assert await receive_type(conn, Ok) == Ok(request_id="a1")
        (info,) = (await open_asks(served, "cli-life")).asks
        assert info.acknowledged
        assert not info.late
        await conn.send(Reply(id=ask.id, approve=True))
        frames = await receive_until_done(conn, "r")
    assert target.exists()
    assert (await open_asks(served, "cli-life")).asks == []
    states = [
        (f.event.state, f.event.acknowledged, f.event.frontend, f.event.answer)
        for f in frames
        if isinstance(f, EventFrame) and isinstance(f.event, AskState)
    ]
    assert states == [("shown", True, "repl", ""), ("answered", False, "repl", "approved")]


async def test_an_ack_of_an_ask_not_shown_here_is_refused(served: Served, tmp_path: Path) -> None:
    """R97, R78: another connection (even one subscribed to the session) cannot
    acknowledge a REPL window's ask: ``forbidden``, and the ask stays unacknowledged."""
    target = tmp_path / "never"
    async with (
        open_frame_connection(served.ws_url, served.token, client="repl") as window,
        open_frame_connection(served.ws_url, served.token, client="web") as other,
    ):
        await window.send(Run(request_id="r", session_id="cli-other", input=f"run: touch {target}"))
        ask = await receive_type(window, Ask)
        await other.send(Subscribe(session_id="cli-other", request_id="s"))
        await receive_type(other, Ok)
        await other.send(Ack(id=ask.id, request_id="a"))
        refused = await receive_type(other, ErrorFrame)
        assert isinstance(refused, ErrorFrame)
        assert (refused.code, refused.ref) == ("forbidden", "a")
        (info,) = (await open_asks(served, "cli-other")).asks
        assert not info.acknowledged
        await window.send(Reply(id=ask.id, approve=False, reason="not now"))
        await receive_until_done(window, "r")
    assert not target.exists()


async def test_a_subscriber_page_acknowledges_a_chat_ask(served: Served, tmp_path: Path) -> None:
    """R97, R8 B: a ``chat-`` ask nobody takes stays ``waiting``; a subscriber that drew
    its ``confirm`` event acknowledges it (shown on ``web``); an HTTP answer is told as
    answered through ``http``."""
    target = tmp_path / "page"
    async with open_frame_connection(served.ws_url, served.token, client="web") as page:
        await page.send(Subscribe(session_id="chat-page", request_id="s"))
        await receive_type(page, Ok)
        response = await served.http.post(
            "/v1/send", json={"input": f"run: touch {target}", "session_id": "chat-page"}
        )
        assert response.status_code == 202
        while True:
            frame = await receive_type(page, EventFrame)
            assert isinstance(frame, EventFrame)
            if isinstance(frame.event, AskState):
                break
        assert frame.event.state == "waiting"
        ask_id = frame.event.ask_id
        assert (await open_asks(served, "chat-page")).asks[0].state == "waiting"
        await page.send(Ack(id=ask_id, request_id="a"))
        await receive_type(page, Ok)
        (info,) = (await open_asks(served, "chat-page")).asks
        assert (info.state, info.frontend, info.acknowledged) == ("shown", "web", True)
        answered = await served.http.post(
            f"/v1/session/chat-page/confirm/{ask_id}", json={"approve": True}
        )
        assert answered.status_code == 200
        while True:
            frame = await receive_type(page, EventFrame)
            assert isinstance(frame, EventFrame)
            if isinstance(frame.event, AskState) and frame.event.state == "answered":
                break
        assert (frame.event.frontend, frame.event.answer) == ("http", "approved")


async def test_a_listener_gone_is_a_withdrawal_not_a_deny(served: Served, tmp_path: Path) -> None:
    """R98, R6, R79: a script shown a chat confirmation disconnects (a reconnect, a
    restart) and nobody takes it within the grace: the command never runs, the event
    says ``withdrawn`` (``listener_gone``), and the model reads that nobody decided —
    not "denied by the user"."""
    target = tmp_path / "never"
    async with open_frame_connection(served.ws_url, served.token, client="telegram") as bot:
        await bot.send(Listen(prefix="chat-", request_id="l"))
        await receive_type(bot, Ok)
        response = await served.http.post(
            "/v1/send", json={"input": f"run: touch {target}", "session_id": "chat-gone"}
        )
        task_hash = decode(response.content, SendStarted).task_hash
        ask = await receive_type(bot, Ask)
        assert isinstance(ask, Ask)
    run = served.engine.find_run(task_hash, "chat-gone")
    if run is not None:
        await run.wait_done()
    assert not target.exists()
    events = served.engine.session("chat-gone").hub.events_of(task_hash)
    (withdrawn,) = [e for e in events if isinstance(e, AskState) and e.state == "withdrawn"]
    assert (withdrawn.ask_id, withdrawn.why) == (ask.id, "listener_gone")
    assert not any(isinstance(e, AskState) and e.state == "answered" for e in events)
    (skipped,) = [e for e in events if isinstance(e, ToolSkipped)]
    assert skipped.reason.startswith("the confirmation was withdrawn before anyone decided")
    assert "denied" not in skipped.reason


async def test_the_http_ack_of_the_page(served: Served, tmp_path: Path) -> None:
    """R97, R78, R8 B: ``POST …/ack/{confirm_hash}`` (the page's form of ``ack``) marks a
    ``chat-`` ask shown on the front-end its body names; another session's path is 404
    and a REPL window's ask 403, each leaving the ask unacknowledged; an ask already
    gone is 200 with nothing to record. Client names lose ``agentrio-`` and a version."""
    target, window_target = tmp_path / "page", tmp_path / "window"
    async with (
        open_frame_connection(served.ws_url, served.token, client="sse") as page,
        open_frame_connection(served.ws_url, served.token, client="agentrio-repl/0.1.0") as window,
    ):
        await page.send(Subscribe(session_id="chat-http-ack", request_id="s"))
        await receive_type(page, Ok)
        response = await served.http.post(
            "/v1/send", json={"input": f"run: touch {target}", "session_id": "chat-http-ack"}
        )
        task_hash = decode(response.content, SendStarted).task_hash
        while True:
            frame = await receive_type(page, EventFrame)
            assert isinstance(frame, EventFrame)
            if isinstance(frame.event, AskState):
                break
        ask_id = frame.event.ask_id
        await window.send(
            Run(request_id="r", session_id="cli-http-ack", input=f"run: touch {window_target}")
        )
        window_ask = await receive_type(window, Ask)
        assert isinstance(window_ask, Ask)
        (shown,) = (await open_asks(served, "cli-http-ack")).asks
        assert (shown.frontend, shown.acknowledged) == ("repl", False)
        refused = await served.http.post(
            f"/v1/session/cli-http-ack/ack/{window_ask.id}", json={"frontend": "web"}
        )
        assert refused.status_code == 403, refused.text
        assert not (await open_asks(served, "cli-http-ack")).asks[0].acknowledged
        elsewhere = await served.http.post(f"/v1/session/chat-other/ack/{ask_id}")
        assert elsewhere.status_code == 404, elsewhere.text
        assert not (await open_asks(served, "chat-http-ack")).asks[0].acknowledged
        acked = await served.http.post(
            f"/v1/session/chat-http-ack/ack/{ask_id}", json={"frontend": "web"}
        )
        assert acked.status_code == 200, acked.text
        (info,) = (await open_asks(served, "chat-http-ack")).asks
        assert (info.state, info.frontend, info.daemon, info.acknowledged) == (
            "shown",
            "web",
            "",
            True,
        )
        await window.send(Reply(id=window_ask.id, approve=False, reason="no"))
        await receive_until_done(window, "r")
        answered = await served.http.post(
            f"/v1/session/chat-http-ack/confirm/{ask_id}", json={"approve": False}
        )
        assert answered.status_code == 200
        run = served.engine.find_run(task_hash, "chat-http-ack")
        if run is not None:
            await run.wait_done()
        gone = await served.http.post(f"/v1/session/chat-http-ack/ack/{ask_id}")
        assert gone.status_code == 200, gone.text
    assert not target.exists()
    assert not window_target.exists()
