"""A confirmation nobody decided is recorded as withdrawn, never as a person's deny, in
every place it is kept (issue 34 item 3, R98; R6, R43, R79): the ``ask_state`` event,
the tool result the model read, and the task's history record; and it never runs.

Two ways an ask outlives its front-end: a bot (a ``chat-`` listener) that goes away --
a restart, a lost connection -- and is not back within ``[server] listener_grace_s``
(0.5 s here: the ask's "timeout"); and a REPL window whose connection closes (a
reconnect), which stops the window's task, kept resumable (R43) -- resumed, the call
is asked again, as plainly as before.
"""

from __future__ import annotations

from pathlib import Path

from agentrio.protocol.codec import decode
from agentrio.protocol.events import AskState, ToolSkipped
from agentrio.protocol.frames import Ask, DoneFrame, Listen, Ok, PendingFrame, Reply, Run
from agentrio.protocol.http import HistoryRecord, SendStarted
from agentrio.transport import open_frame_connection
from tests.engine.server.conftest import Served, receive_type, receive_until_done

WITHDRAWN = "the confirmation was withdrawn before anyone decided"


async def test_a_bot_gone_past_its_grace_is_recorded_as_withdrawn(
    served: Served, tmp_path: Path
) -> None:
    """R98, R79: the bot shown the confirmation leaves and does not come back within
    the grace: the command never ran; the event, the tool result and the history
    record all say it was withdrawn undecided, none says denied."""
    target = tmp_path / "never"
    async with open_frame_connection(served.ws_url, served.token, client="telegram") as bot:
        await bot.send(Listen(prefix="chat-", request_id="l"))
        await receive_type(bot, Ok)
        response = await served.http.post(
            "/v1/send", json={"input": f"run: touch {target}", "session_id": "chat-timeout"}
        )
        started: SendStarted = decode(response.content, SendStarted)
        task_hash = started.task_hash
        ask = await receive_type(bot, Ask)
        assert isinstance(ask, Ask)
    run = served.engine.find_run(task_hash, "chat-timeout")
    if run is not None:
        await run.wait_done()
    assert not target.exists()
    events = served.engine.session("chat-timeout").hub.events_of(task_hash)
    states = [(e.state, e.why) for e in events if isinstance(e, AskState)]
    assert ("withdrawn", "listener_gone") in states
    assert not any(state == "answered" for state, _ in states)
    (skipped,) = [e for e in events if isinstance(e, ToolSkipped)]
    assert skipped.reason.startswith(WITHDRAWN)
    got = await served.http.get(f"/v1/session/chat-timeout/task/{task_hash}/history")
    kept: HistoryRecord = decode(got.content, HistoryRecord)
    record = kept.content
    assert f"not run: {WITHDRAWN}" in record
    assert "denied" not in record


async def test_a_repl_window_closed_stops_its_task_and_the_resume_asks_again(
    served: Served, tmp_path: Path
) -> None:
    """R98, R43, R6: the REPL window's connection closes with its confirmation open (a
    reconnect): nothing runs, the ask is withdrawn because its task stopped, the task
    stays resumable; resumed from the new connection, the call is asked again (no "may
    have partly run": it never ran), and only the person's approval runs it, once."""
    target = tmp_path / "ran.txt"
    command = f"run: sh -c 'echo ran >> {target}'"
    async with open_frame_connection(served.ws_url, served.token, client="repl") as first:
        await first.send(
            Run(request_id="r", session_id="cli-again", input=command, window_hash="w")
        )
        ask = await receive_type(first, Ask)
        assert isinstance(ask, Ask)
        task_hash = ask.task_hash
    run = served.engine.find_run(task_hash, "cli-again")
    if run is not None:
        await run.wait_done()
    assert not target.exists()
    events = served.engine.session("cli-again").hub.events_of(task_hash)
    assert ("withdrawn", "task_stopped") in [
        (e.state, e.why) for e in events if isinstance(e, AskState)
    ]
    assert not any(isinstance(e, AskState) and e.state == "answered" for e in events)
    async with open_frame_connection(served.ws_url, served.token, client="repl") as second:
        await second.send(
            PendingFrame(
                request_id="p", session_id="cli-again", task_hash=task_hash, window_hash="w"
            )
        )
        again = await receive_type(second, Ask)
        assert isinstance(again, Ask)
        assert again.details is None or not again.details.interrupted
        assert not target.exists()
        await second.send(Reply(id=again.id, approve=True))
        frames = await receive_until_done(second, "p")
    done = frames[-1]
    assert isinstance(done, DoneFrame)
    assert done.status == "finished"
    assert target.read_text().splitlines() == ["ran"]
