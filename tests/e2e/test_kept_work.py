"""Work a person left is kept, shown and resumable, through the real daemon (issue 17).

- A task's history record holds each reply once (R40's history, the web page's
  "Show record").
- A question open when the window closes is kept with the task (R13, R42, R43): the
  resume asks it again in the resuming window, or answers sent with the resume
  answer it.
- A confirmation open when the window closes is denied (fail closed, R6) and its call
  is kept as *interrupted*: the resumed task proposes it again, which asks again.
- Paused work of every ``cli-`` session is listed by origin (``list_pending`` with
  ``origin``, ``GET /v1/pending?origin=``), so a new REPL session finds it (R41, R42).
"""

from __future__ import annotations

from pathlib import Path

import attrs
import httpx
import trio

from agentrio import Client, Decision
from agentrio.engine.models.builtin import HELP_TEXT
from agentrio.protocol.codec import decode
from agentrio.protocol.frames import Ask, PendingTaskInfo
from agentrio.protocol.http import PendingTasks
from agentrio.testing import RunningDaemon


def http(daemon: RunningDaemon) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=daemon.base_url, headers={"Authorization": f"Bearer {daemon.token}"}
    )


async def test_history_record_holds_the_final_reply_once(agentrio_client: Client) -> None:
    """R40 (history), issue 17 item 4: the record of a finished task is its input, then
    each reply once — the final reply is not appended a second time."""
    with trio.fail_after(20):
        handle = await agentrio_client.run("chat-record", "hello")
        outcome = await handle.wait_done()
        assert outcome.status == "finished"
        record = await agentrio_client.history_record("chat-record", handle.task_hash)
    assert record.content == f"user: hello\nassistant: {HELP_TEXT}"


async def _ask_then_close_window(daemon: RunningDaemon, session_id: str, text: str) -> Ask:
    """Start ``text`` in window ``w-closed`` of ``session_id``, wait for its first ask,
    then close the connection with the ask still open (R43: cause ``disconnected``)."""
    async with daemon.connect() as window:
        handle = await window.run(session_id, text, window_hash="w-closed")
        ask = await handle.asks().receive()
        assert isinstance(ask, Ask)
    return ask


async def _kept(client: Client, session_id: str) -> PendingTaskInfo:
    """The one pending task of ``session_id``, once the closed window's run has ended."""
    while True:
        tasks = await client.pending(session_id)
        if tasks:
            (task,) = tasks
            return task
        await trio.sleep(0.05)


async def test_question_open_when_the_window_closes_is_asked_again(
    agentrio_daemon: RunningDaemon, agentrio_client: Client
) -> None:
    """R13, R42, R43, issue 17 item 2: closing the window while an ``ask_user`` question
    is open keeps the task with its question; resuming it from another window asks the
    same question there, and the answer reaches the model."""
    with trio.fail_after(30):
        ask = await _ask_then_close_window(
            agentrio_daemon, "cli-kept-q", "ask: Which colour? | red, blue"
        )
        assert ask.kind == "ask_user"
        task = await _kept(agentrio_client, "cli-kept-q")
        assert task.has_questions
        assert [q.text for q in task.questions] == ["Which colour?"]
        resumed = await agentrio_client.resume(
            "cli-kept-q", task.task_hash, window_hash="w-reopened"
        )
        again = await resumed.asks().receive()
        assert isinstance(again, Ask)
        assert again.kind == "ask_user"
        assert [q.text for q in again.questions] == ["Which colour?"]
        await agentrio_client.decide(again.id, Decision.answer("blue"))
        done = await resumed.wait_done()
    assert done.status == "finished"
    assert resumed.final_text.startswith("Resumed with your answers:")
    assert "Which colour?" in resumed.final_text
    assert "blue" in resumed.final_text
    assert await agentrio_client.pending("cli-kept-q") == []


async def test_answers_sent_with_the_resume_answer_the_kept_question(
    agentrio_daemon: RunningDaemon, agentrio_client: Client
) -> None:
    """R13, R11, issue 17 item 2: the question kept from a closed window is answered by
    answers sent with the resume (``pending`` frame with ``answers``); nothing is asked."""
    with trio.fail_after(30):
        await _ask_then_close_window(
            agentrio_daemon, "cli-kept-a", "ask: Which colour? | red, blue"
        )
        task = await _kept(agentrio_client, "cli-kept-a")
        resumed = await agentrio_client.resume("cli-kept-a", task.task_hash, answers=["red"])
        done = await resumed.wait_done()
    assert done.status == "finished"
    assert "Which colour?" in resumed.final_text
    assert "red" in resumed.final_text


async def test_confirmation_open_when_the_window_closes_is_proposed_again(
    agentrio_daemon: RunningDaemon, agentrio_client: Client, tmp_path: Path
) -> None:
    """R6, R13, R41, R43, issue 17 item 2: a confirmation open when its window closes is
    never an approval — the command does not run — and its call is kept as interrupted:
    the resumed task proposes it again, which asks again; approving it runs it."""
    target = tmp_path / "touched-after-resume"
    with trio.fail_after(30):
        ask = await _ask_then_close_window(agentrio_daemon, "cli-kept-c", f"run: touch {target}")
        assert ask.kind == "tool_confirm"
        task = await _kept(agentrio_client, "cli-kept-c")
        assert not task.has_questions
        assert not target.exists()
        resumed = await agentrio_client.resume(
            "cli-kept-c", task.task_hash, window_hash="w-reopened"
        )
        again = await resumed.asks().receive()
        assert isinstance(again, Ask)
        assert again.kind == "tool_confirm"
        assert not target.exists()
        await agentrio_client.decide(again.id, Decision.allow())
        done = await resumed.wait_done()
    assert done.status == "finished"
    assert target.exists()


async def test_question_asked_again_survives_a_second_closed_window(
    agentrio_daemon: RunningDaemon, agentrio_client: Client
) -> None:
    """R13, R42, issue 17 item 2: the window that resumed the task closes while the kept
    question is asked again; the task is kept with the same question, and a later
    resume with answers completes it."""
    with trio.fail_after(30):
        await _ask_then_close_window(agentrio_daemon, "cli-kept-2", "ask: Which colour? | red")
        task = await _kept(agentrio_client, "cli-kept-2")
        async with agentrio_daemon.connect() as second:
            resumed = await second.resume("cli-kept-2", task.task_hash, window_hash="w-second")
            assert isinstance(await resumed.asks().receive(), Ask)
        again = await _kept(agentrio_client, "cli-kept-2")
        assert [q.text for q in again.questions] == ["Which colour?"]
        final = await agentrio_client.resume("cli-kept-2", again.task_hash, answers=["red"])
        assert (await final.wait_done()).status == "finished"
    assert "Which colour?" in final.final_text
    assert "red" in final.final_text


async def test_pending_by_origin_lists_every_cli_session(
    agentrio_daemon: RunningDaemon, agentrio_client: Client
) -> None:
    """R41, R42, issue 17 item 6: work paused in two earlier ``cli-`` sessions is listed
    by origin — over WS (``list_pending`` with ``origin``) and HTTP (``GET
    /v1/pending?origin=cli-``) alike — each task naming its session, newest first; a
    ``chat-`` task is not among them; resuming one continues in its own session."""
    with trio.fail_after(30):
        await _ask_then_close_window(agentrio_daemon, "cli-earlier-1", "ask: First? | a")
        await _kept(agentrio_client, "cli-earlier-1")
        await _ask_then_close_window(agentrio_daemon, "cli-earlier-2", "ask: Second? | b")
        await _kept(agentrio_client, "cli-earlier-2")
        parked = await agentrio_client.run("chat-other", "ask: Elsewhere?")
        assert (await parked.wait_done()).status == "parked"
        listed = await agentrio_client.pending(origin="cli-")
        async with http(agentrio_daemon) as web:
            response = await web.get("/v1/pending", params={"origin": "cli-"})
            bad = await web.get("/v1/pending", params={"origin": "x-"})
        assert [(t.session_id, t.questions[0].text) for t in listed] == [
            ("cli-earlier-2", "Second?"),
            ("cli-earlier-1", "First?"),
        ]
        assert response.status_code == 200
        assert decode(response.content, PendingTasks).tasks == listed
        assert bad.status_code == 400
        first = listed[1]
        resumed = await agentrio_client.resume(first.session_id, first.task_hash, answers=["a"])
        assert (await resumed.wait_done()).status == "finished"
        assert resumed.session_id == "cli-earlier-1"
        left = await agentrio_client.pending(origin="cli-")
    assert [t.session_id for t in left] == ["cli-earlier-2"]
    assert await agentrio_client.pending("cli-earlier-2") == [attrs.evolve(left[0], session_id="")]
