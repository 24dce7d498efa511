"""Each model dialect end to end: the real daemon talking to aimock (issue 31 items 5,
6), with a conversation of parallel tool calls, an approval, a denial with a reason, an
``ask_user`` and streamed text.

aimock runs with ``--strict``: a request no fixture matches fails the task, and an
Anthropic tool-loop continuation without the signed thinking block it sent is refused,
so the daemon's requests are checked by a server no one here wrote. Each request's
shape (what this layer controls: the assistant turn's calls, both tool results, the
denial's reason) is read back from aimock's journal.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import tomli_w
import trio

from agentrio.protocol.codec import decode
from agentrio.protocol.events import Text, ToolCall
from agentrio.protocol.frames import (
    Ask,
    DoneFrame,
    EventFrame,
    PendingFrame,
    Reply,
    Run,
    ServerFrame,
)
from agentrio.protocol.http import PendingTasks
from agentrio.transport import FrameConnection, open_frame_connection
from tests.aimock import Aimock, start_aimock, write_fixture
from tests.e2e.conftest import DaemonProcess

DIALECTS: dict[str, tuple[str, dict[str, Any]]] = {
    "openai": ("gpt-5", {}),
    "openai-responses": ("gpt-5", {"reasoning_effort": "low"}),
    "anthropic": ("claude-sonnet-4-5", {"thinking_tokens": 1024}),
}


#: How the engine heads a leg's report to the model (engine/messages.py).
REPORTS = ("[Resumed Task — background group finished]", "[Background Report")


def fixtures(tmp: Path) -> list[dict[str, Any]]:
    made, refused = tmp / "made", tmp / "refused"
    return [
        {
            "match": {"userMessage": "[Resumed Task — background group finished]"},
            "response": {"content": "The background work finished."},
        },
        {
            # A leg that ends before the task's next turn is reported into that turn.
            "match": {"userMessage": "[Background Report"},
            "response": {"content": "The background work finished."},
        },
        {
            "match": {"userMessage": "work in the background", "hasToolResult": False},
            "response": {
                "reasoning": "Long work goes to a background leg.",
                "toolCalls": [
                    {
                        "id": "call_bg",
                        "name": "background_command",
                        "arguments": {
                            "commands": ["echo bg-output-42"],
                            "objective": "echo in the background",
                            "next": "say it finished",
                        },
                    }
                ],
            },
        },
        {
            "match": {"userMessage": "work in the background", "hasToolResult": True},
            "response": {"content": "Started in the background."},
        },
        {
            # First: a resume message quotes the task's objective.
            "match": {"userMessage": "[Resumed Task — ask_user response received]"},
            "response": {"content": "Resumed: you picked blue."},
        },
        {
            "match": {"userMessage": "make two files", "hasToolResult": False},
            "response": {
                "content": "I will make both files at once.",
                "reasoning": "Two independent touches; run them in parallel.",
                "toolCalls": [
                    {
                        "id": "call_made",
                        "name": "run_command",
                        "arguments": {"command": f"touch {made}"},
                    },
                    {
                        "id": "call_refused",
                        "name": "run_command",
                        "arguments": {"command": f"touch {refused}"},
                    },
                ],
            },
        },
        {
            "match": {"userMessage": "make two files", "toolResultContains": "not today"},
            "response": {"content": "One file made; you refused the other: not today."},
        },
        {
            "match": {"userMessage": "pick a colour", "hasToolResult": False},
            "response": {
                # With thinking on, Anthropic always thinks first; aimock refuses the
                # continuation if that block does not come back.
                "reasoning": "The person should choose.",
                "toolCalls": [
                    {
                        "id": "call_ask",
                        "name": "ask_user",
                        "arguments": {
                            "questions": [{"text": "Which colour?", "options": ["red", "blue"]}]
                        },
                    }
                ],
            },
        },
        {
            "match": {"userMessage": "pick a colour", "toolResultContains": "blue"},
            "response": {"content": "You picked blue, a fine colour for a long streamed reply."},
        },
    ]


@pytest.fixture(params=list(DIALECTS))
def dialect(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def start_daemon(home: Path, aimock: Aimock, dialect: str, **model: Any) -> DaemonProcess:
    """A daemon whose ``[model]`` speaks ``dialect`` to ``aimock`` (no retries unless
    ``model`` overrides ``retries``, like any other key)."""
    name, extra = DIALECTS[dialect]
    base_url = aimock.url if dialect == "anthropic" else f"{aimock.url}/v1"
    home.mkdir(parents=True)
    config = {
        "model": {
            "provider": dialect,
            "name": name,
            "base_url": base_url,
            "retries": 1,
            **extra,
            **model,
        }
    }
    (home / "config.toml").write_text(tomli_w.dumps(config))
    return await trio.to_thread.run_sync(DaemonProcess, home)


@contextlib.asynccontextmanager
async def talking_daemon(
    nursery: trio.Nursery,
    tmp_path: Path,
    dialect: str,
    fixtures: list[dict[str, Any]],
    **model: Any,
) -> AsyncIterator[tuple[Aimock, DaemonProcess, FrameConnection]]:
    """aimock serving ``fixtures``, a daemon speaking ``dialect`` to it (``model``
    overrides ``[model]`` keys) and a connection to it, within 60 s; the daemon must
    stop cleanly."""
    aimock = await start_aimock(nursery, write_fixture(tmp_path, fixtures))
    daemon = await start_daemon(tmp_path / "home", aimock, dialect, **model)
    try:
        with trio.fail_after(60):
            async with open_frame_connection(daemon.info.ws_url, daemon.info.token) as conn:
                yield aimock, daemon, conn
    finally:
        assert await trio.to_thread.run_sync(daemon.stop) == 0


async def until_done(conn: FrameConnection, request_id: str) -> list[ServerFrame]:
    frames: list[ServerFrame] = []
    while True:
        frames.append(await conn.receive())
        last = frames[-1]
        if isinstance(last, DoneFrame) and last.request_id == request_id:
            return frames
        if isinstance(last, Ask):
            return frames


async def test_parallel_calls_approval_and_denial_with_reason(
    nursery: trio.Nursery, tmp_path: Path, dialect: str
) -> None:
    """Issue 31 (5): one reply asks for two commands; the person approves one and denies
    the other with a reason; the next request carries the assistant turn with both
    calls and both results (the denial's reason included), and the reply streams."""
    aimock = await start_aimock(nursery, write_fixture(tmp_path, fixtures(tmp_path)))
    daemon = await start_daemon(tmp_path / "home", aimock, dialect)
    try:
        with trio.fail_after(60):
            async with open_frame_connection(daemon.info.ws_url, daemon.info.token) as conn:
                await conn.send(
                    Run(
                        request_id="r",
                        session_id="cli-dialects",
                        input="make two files",
                        window_hash="w",
                    )
                )
                frames = await until_done(conn, "r")
                first = frames[-1]
                assert isinstance(first, Ask)
                # the confirmation shows where it runs: the daemon's real directory
                where = first.tool_args["cwd"]
                assert first.tool_args == {"command": f"touch {tmp_path / 'made'}", "cwd": where}
                await conn.send(Reply(id=first.id, approve=True))
                frames += await until_done(conn, "r")
                second = frames[-1]
                assert isinstance(second, Ask)
                assert second.tool_args == {
                    "command": f"touch {tmp_path / 'refused'}",
                    "cwd": where,
                }
                await conn.send(Reply(id=second.id, approve=False, reason="not today"))
                frames += await until_done(conn, "r")
    finally:
        assert await trio.to_thread.run_sync(daemon.stop) == 0
    done = frames[-1]
    assert isinstance(done, DoneFrame)
    assert (done.status, done.error) == ("finished", "")
    events = [f.event for f in frames if isinstance(f, EventFrame)]
    assert [e.call_id for e in events if isinstance(e, ToolCall)] == ["call_made", "call_refused"]
    texts = [e.text for e in events if isinstance(e, Text)]
    assert "".join(texts).endswith("One file made; you refused the other: not today.")
    assert len(texts) > 2  # streamed in pieces
    assert (tmp_path / "made").exists()
    assert not (tmp_path / "refused").exists()
    journal = [e for e in await aimock.journal() if e["response"]["status"] == 200]
    assert len(journal) == 2
    messages = journal[1]["body"]["messages"]
    # aimock normalises a Responses turn to one assistant message per function_call.
    calls = [
        c["id"] for m in messages if m["role"] == "assistant" for c in m.get("tool_calls") or []
    ]
    assert calls == ["call_made", "call_refused"]
    results = {m["tool_call_id"]: m["content"] for m in messages if m["role"] == "tool"}
    assert set(results) == {"call_made", "call_refused"}
    assert "not today" in results["call_refused"]
    assert results["call_refused"].startswith("not run: denied")


async def test_ask_user_answer_reaches_the_model(
    nursery: trio.Nursery, tmp_path: Path, dialect: str
) -> None:
    """Issue 31 (5): an ``ask_user`` call becomes a question; the answer is the tool's
    result in the next request, and the reply finishes the task."""
    aimock = await start_aimock(nursery, write_fixture(tmp_path, fixtures(tmp_path)))
    daemon = await start_daemon(tmp_path / "home", aimock, dialect)
    try:
        with trio.fail_after(60):
            async with open_frame_connection(daemon.info.ws_url, daemon.info.token) as conn:
                await conn.send(
                    Run(
                        request_id="q", session_id="cli-ask", input="pick a colour", window_hash="w"
                    )
                )
                frames = await until_done(conn, "q")
                ask = frames[-1]
                assert isinstance(ask, Ask)
                assert ask.kind == "ask_user"
                await conn.send(Reply(id=ask.id, answers=["blue"]))
                frames += await until_done(conn, "q")
    finally:
        assert await trio.to_thread.run_sync(daemon.stop) == 0
    done = frames[-1]
    assert isinstance(done, DoneFrame)
    assert (done.status, done.error) == ("finished", "")
    texts = "".join(
        f.event.text for f in frames if isinstance(f, EventFrame) and isinstance(f.event, Text)
    )
    assert texts == "You picked blue, a fine colour for a long streamed reply."
    journal = [e for e in await aimock.journal() if e["response"]["status"] == 200]
    (answer,) = [m for m in journal[-1]["body"]["messages"] if m["role"] == "tool"]
    assert answer["tool_call_id"] == "call_ask"
    assert "blue" in answer["content"]


async def test_a_closed_window_keeps_the_question_and_resume_reaches_the_model(
    nursery: trio.Nursery, tmp_path: Path, dialect: str
) -> None:
    """Issue 31 (5), R13, R43: the window closes while ``ask_user`` waits; the task is
    kept; resumed in a new window it asks again, and the answer reaches the model as
    the resume message, in each dialect."""
    aimock = await start_aimock(nursery, write_fixture(tmp_path, fixtures(tmp_path)))
    daemon = await start_daemon(tmp_path / "home", aimock, dialect)
    info = daemon.info
    try:
        with trio.fail_after(60):
            async with open_frame_connection(info.ws_url, info.token) as conn:
                await conn.send(
                    Run(
                        request_id="q",
                        session_id="cli-resume",
                        input="pick a colour",
                        window_hash="w1",
                    )
                )
                assert isinstance((await until_done(conn, "q"))[-1], Ask)
            headers = {"Authorization": f"Bearer {info.token}"}
            async with httpx.AsyncClient(base_url=info.base_url, headers=headers) as http:
                while True:
                    response = await http.get("/v1/session/cli-resume/task")
                    tasks = decode(response.content, PendingTasks).tasks
                    if tasks:
                        break
                    await trio.sleep(0.05)
            async with open_frame_connection(info.ws_url, info.token) as conn:
                await conn.send(
                    PendingFrame(
                        request_id="p",
                        session_id="cli-resume",
                        task_hash=tasks[0].task_hash,
                        window_hash="w2",
                    )
                )
                frames = await until_done(conn, "p")
                ask = frames[-1]
                assert isinstance(ask, Ask)
                assert ask.kind == "ask_user"
                await conn.send(Reply(id=ask.id, answers=["blue"]))
                frames += await until_done(conn, "p")
    finally:
        assert await trio.to_thread.run_sync(daemon.stop) == 0
    done = frames[-1]
    assert isinstance(done, DoneFrame)
    assert (done.status, done.error) == ("finished", "")
    journal = [e for e in await aimock.journal() if e["response"]["status"] == 200]
    assert len(journal) == 2
    last_user = [m for m in journal[-1]["body"]["messages"] if m["role"] == "user"][-1]
    assert last_user["content"].startswith("[Resumed Task — ask_user response received]")
    assert "blue" in last_user["content"]


async def test_a_background_report_reaches_the_model(
    nursery: trio.Nursery, tmp_path: Path, dialect: str
) -> None:
    """Issue 31 (5), R26: a ``background_command`` call starts a leg; when the leg
    finishes, the model is sent its report: by the follow-up task once the task has
    ended, or inside the task's next turn when the leg was quicker."""
    aimock = await start_aimock(nursery, write_fixture(tmp_path, fixtures(tmp_path)))
    daemon = await start_daemon(tmp_path / "home", aimock, dialect)
    info = daemon.info
    try:
        with trio.fail_after(60):
            async with open_frame_connection(info.ws_url, info.token) as conn:
                await conn.send(
                    Run(
                        request_id="b",
                        session_id="cli-bg",
                        input="work in the background",
                        window_hash="w",
                        allow_all=True,
                    )
                )
                done = (await until_done(conn, "b"))[-1]
                assert isinstance(done, DoneFrame)
                assert (done.status, done.error) == ("finished", "")
                while True:
                    answered = [
                        e
                        for e in await aimock.journal()
                        if e["response"]["status"] == 200
                        and str(e["body"]["messages"][-1].get("content")).startswith(REPORTS)
                    ]
                    if answered:
                        break
                    await trio.sleep(0.1)
    finally:
        assert await trio.to_thread.run_sync(daemon.stop) == 0
    report = answered[0]["body"]["messages"][-1]
    assert report["role"] == "user"
    assert "echo bg-output-42" in report["content"] or "cmd_" in report["content"]
