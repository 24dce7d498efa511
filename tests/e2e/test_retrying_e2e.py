"""A model that rate-limits or fails, end to end through the real daemon and aimock,
in each dialect (issue 31 item 6): a 429 with ``Retry-After`` is one ``retrying``
event and then the reply (also for an in-process sub-agent's call: one ``retrying``
of the parent task, labelled with it); a cancel during a 30 s back-off ends the task at
once; a task whose model still fails is kept resumable, and its resume runs no tool
twice.

aimock answers the first request of a fixture with its own 429 (``sequenceIndex`` 0,
its ``Retry-After`` header) and the next with the reply, so the fault comes from a
server no one here wrote.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from agentrio.protocol.codec import decode
from agentrio.protocol.events import Canceled, Failed, Retrying, Text
from agentrio.protocol.frames import (
    Accepted,
    Cancel,
    DoneFrame,
    EventFrame,
    PendingFrame,
    Run,
    ServerFrame,
)
from agentrio.protocol.http import PendingTasks
from tests.e2e.test_dialects_e2e import DIALECTS, talking_daemon, until_done


@pytest.fixture(params=list(DIALECTS))
def dialect(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def limited(words: str, retry_after_s: float, reply: str) -> list[dict[str, Any]]:
    """Fixtures: the first request with ``words`` is rate limited, the next answered."""
    return [
        {
            "match": {"userMessage": words, "sequenceIndex": 0},
            "response": {
                "error": {"message": "Rate limit reached", "type": "rate_limit_error"},
                "status": 429,
                "retryAfter": retry_after_s,
            },
        },
        {"match": {"userMessage": words, "sequenceIndex": 1}, "response": {"content": reply}},
    ]


def failing_after_a_command(words: str, command: str) -> list[dict[str, Any]]:
    """Fixtures: ``words`` runs ``command``; the model then fails (HTTP 500) on the
    call with its result; the resumed task's call is answered."""
    return [
        {
            "match": {"userMessage": "[Resumed Task — interrupted execution recovered]"},
            "response": {"content": "Resumed: the log is written."},
        },
        {
            "match": {"userMessage": words, "hasToolResult": False},
            "response": {
                # With thinking on, Anthropic thinks first; aimock refuses a
                # continuation without that block.
                "reasoning": "Append to the log.",
                "toolCalls": [
                    {"id": "call_log", "name": "run_command", "arguments": {"command": command}}
                ],
            },
        },
        {
            "match": {"userMessage": words, "hasToolResult": True},
            "response": {
                "error": {"message": "upstream exploded", "type": "api_error"},
                "status": 500,
            },
        },
    ]


def events(frames: list[ServerFrame], kind: type[Any]) -> list[Any]:
    return [f.event for f in frames if isinstance(f, EventFrame) and isinstance(f.event, kind)]


async def test_429_then_success_shows_exactly_one_retrying_event(
    nursery: trio.Nursery, tmp_path: Path, dialect: str
) -> None:
    """Issue 31 (6): aimock refuses the first request with 429 and ``Retry-After: 1``;
    the task gets exactly one ``retrying`` event (rate limited, the provider's 1 s, the
    first try) before the reply's text, and finishes with it."""
    fixtures = limited("busy hour", 1, "Answered after the wait.")
    async with talking_daemon(nursery, tmp_path, dialect, fixtures, retries=3) as (
        aimock,
        _,
        conn,
    ):
        await conn.send(Run(request_id="r", session_id="cli-429", input="busy hour"))
        frames = await until_done(conn, "r")
    done = frames[-1]
    assert isinstance(done, DoneFrame)
    assert (done.status, done.error) == ("finished", "")
    (retrying,) = events(frames, Retrying)
    assert (retrying.reason, retrying.attempt, retrying.delay_s) == ("rate limited", 1, 1.0)
    kinds = [type(f.event) for f in frames if isinstance(f, EventFrame)]
    assert kinds.index(Retrying) < kinds.index(Text)
    assert "".join(t.text for t in events(frames, Text)) == "Answered after the wait."
    statuses = [entry["response"]["status"] for entry in await aimock.journal()]
    assert statuses == [429, 200]


async def test_cancel_during_a_30_s_back_off_lands_at_once(
    nursery: trio.Nursery, tmp_path: Path, dialect: str
) -> None:
    """Issue 31 (6): with aimock asking to wait 30 s, a ``cancel`` sent once the
    ``retrying`` event arrived ends the task (its ``canceled`` event and ``done``)
    within 100 ms, and the model is not asked again."""
    fixtures = limited("slow hour", 30, "never sent")
    async with talking_daemon(nursery, tmp_path, dialect, fixtures, retries=3) as (
        aimock,
        _,
        conn,
    ):
        await conn.send(Run(request_id="r", session_id="cli-wait", input="slow hour"))
        task_hash = ""
        while True:
            frame = await conn.receive()
            if isinstance(frame, Accepted):
                task_hash = frame.task_hash
            if isinstance(frame, EventFrame) and isinstance(frame.event, Retrying):
                break
        assert frame.event.delay_s == 30.0
        sent_at = trio.current_time()
        await conn.send(Cancel(task_hash=task_hash, session_id="cli-wait"))
        frames = await until_done(conn, "r")
        ended_at = trio.current_time()
    done = frames[-1]
    assert isinstance(done, DoneFrame)
    assert done.status == "canceled"
    (canceled,) = events(frames, Canceled)
    assert canceled.cause == "user_canceled"
    assert ended_at - sent_at < 0.1, ended_at - sent_at
    assert [entry["response"]["status"] for entry in await aimock.journal()] == [429]


async def test_a_task_whose_model_fails_is_kept_and_resumes_without_rerunning_a_tool(
    nursery: trio.Nursery, tmp_path: Path, dialect: str
) -> None:
    """Issue 31 (6), R37: a command runs, then the model fails for good (HTTP 500, no
    retry left); the task is not lost: its ``failed`` event is ``kept``, the HTTP
    pending list says why, and resuming it sends the model the resume message with
    the command's result -- the command does not run again."""
    log = tmp_path / "ran.log"
    command = f"sh -c 'echo ran >> {log}'"
    fixtures = failing_after_a_command("write the log", command)
    async with talking_daemon(nursery, tmp_path, dialect, fixtures) as (aimock, daemon, conn):
        run = Run(request_id="r", session_id="cli-kept", input="write the log", allow_all=True)
        await conn.send(run)
        frames = await until_done(conn, "r")
        headers = {"Authorization": f"Bearer {daemon.info.token}"}
        async with httpx.AsyncClient(base_url=daemon.info.base_url, headers=headers) as http:
            response = await http.get("/v1/session/cli-kept/task")
        (kept,) = decode(response.content, PendingTasks).tasks
        await conn.send(
            PendingFrame(request_id="p", session_id="cli-kept", task_hash=kept.task_hash)
        )
        resumed = await until_done(conn, "p")
    done = frames[-1]
    assert isinstance(done, DoneFrame)
    assert done.status == "failed"
    assert done.error.startswith("model error: model provider returned HTTP 500: upstream exploded")
    (failed,) = events(frames, Failed)
    assert (failed.error, failed.kept) == (done.error, True)
    assert (kept.objective, kept.failure) == ("write the log", done.error)
    again = resumed[-1]
    assert isinstance(again, DoneFrame)
    assert (again.status, again.error) == ("finished", "")
    assert log.read_text() == "ran\n"  # exactly once (R37)
    journal = await aimock.journal()
    assert [entry["response"]["status"] for entry in journal] == [200, 500, 200]
    last_user = [m for m in journal[-1]["body"]["messages"] if m["role"] == "user"][-1]
    assert last_user["content"].startswith("[Resumed Task — interrupted execution recovered]")
    assert "## Completed tool results" in last_user["content"]
    assert "## Interrupted calls" not in last_user["content"]


def delegating(words: str, objective: str, retry_after_s: float) -> list[dict[str, Any]]:
    """Fixtures: ``words`` hands ``objective`` to one in-process sub-agent; the
    sub-agent's first model call is rate limited (aimock's 429 with ``Retry-After:
    retry_after_s``), its second answered; the parent then answers with the result."""
    return [
        {
            "match": {"userMessage": words, "hasToolResult": False},
            "response": {
                "reasoning": "One sub-agent counts.",
                "toolCalls": [
                    {
                        "id": "call_sub",
                        "name": "subagents",
                        "arguments": {"objectives": [objective]},
                    }
                ],
            },
        },
        {
            "match": {"userMessage": words, "toolResultContains": "Forty-two"},
            "response": {"content": "The sub-agent counted forty-two."},
        },
        *limited(objective, 0, "Forty-two stars."),
    ]


async def test_a_rate_limited_subagent_retries_once_and_its_task_finishes(
    nursery: trio.Nursery, tmp_path: Path, dialect: str
) -> None:
    """Issue 31 (4, 6), R80: an in-process sub-agent's model call gets aimock's 429
    (``Retry-After: 0``) and then its reply; the parent task shows exactly one
    ``retrying`` event, labelled with the sub-agent and the provider's wait (not the
    configured 60 s back-off: the header is honoured), and finishes with the
    sub-agent's result in the parent's answer."""
    fixtures = delegating("delegate the count", "count the stars", 0)
    async with talking_daemon(
        nursery, tmp_path, dialect, fixtures, retries=3, retry_base_s=60.0
    ) as (aimock, _, conn):
        run = Run(request_id="r", session_id="cli-sub429", input="delegate the count")
        await conn.send(run)
        frames = await until_done(conn, "r")
    done = frames[-1]
    assert isinstance(done, DoneFrame)
    assert (done.status, done.error) == ("finished", "")
    (retrying,) = events(frames, Retrying)
    assert (retrying.reason, retrying.attempt, retrying.delay_s) == ("rate limited", 1, 0.0)
    assert retrying.subagent == "sub-agent 1/1: count the stars"
    assert "".join(t.text for t in events(frames, Text)) == "The sub-agent counted forty-two."
    statuses = [entry["response"]["status"] for entry in await aimock.journal()]
    assert statuses == [200, 429, 200, 200]
