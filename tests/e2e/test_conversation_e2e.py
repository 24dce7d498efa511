"""A session is a conversation, end to end through the real daemon and aimock, in each
dialect (issue 31 items 3, 6, 7): what the model is sent on a session's later tasks, a
malformed tool call answered as the tool's error, usage in ``done``.

aimock runs with ``--strict``; what each request carried is read back from its journal
(normalised to the chat shape).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from agentrio.protocol.events import Done
from agentrio.protocol.frames import DoneFrame, EventFrame, Run
from agentrio.transport import open_frame_connection
from tests.aimock import start_aimock, write_fixture
from tests.e2e.test_dialects_e2e import DIALECTS, start_daemon, until_done


@pytest.fixture(params=list(DIALECTS))
def dialect(request: pytest.FixtureRequest) -> str:
    return str(request.param)


BAD_ARGS: list[dict[str, Any]] = [
    {
        "match": {"userMessage": "bad args", "hasToolResult": False},
        "response": {
            "reasoning": "Run it.",
            "toolCalls": [{"id": "call_bad", "name": "run_command", "arguments": '{"command": '}],
        },
    },
    {
        "match": {"userMessage": "bad args", "toolResultContains": "invalid call of run_command"},
        "response": {"content": "My call was malformed; sorry."},
    },
]


async def test_a_malformed_tool_call_is_the_tools_error_result(
    nursery: trio.Nursery, tmp_path: Path, dialect: str
) -> None:
    """Issue 31 (6): a call whose arguments are not JSON does not fail the task: the
    model is sent the tool's error result (with what it sent) and finishes. (aimock
    sends Anthropic's ``tool_use`` input as an empty object, so there the call lacks
    its required field: the same error result, from the tool.)"""
    aimock = await start_aimock(nursery, write_fixture(tmp_path, BAD_ARGS))
    daemon = await start_daemon(tmp_path / "home", aimock, dialect)
    try:
        with trio.fail_after(60):
            async with open_frame_connection(daemon.info.ws_url, daemon.info.token) as conn:
                await conn.send(Run(request_id="b", session_id="cli-bad", input="bad args"))
                done = (await until_done(conn, "b"))[-1]
    finally:
        assert await trio.to_thread.run_sync(daemon.stop) == 0
    assert isinstance(done, DoneFrame)
    assert (done.status, done.error) == ("finished", ""), done.error
    journal = [e for e in await aimock.journal() if e["response"]["status"] == 200]
    assert len(journal) == 2
    (result,) = [m for m in journal[1]["body"]["messages"] if m["role"] == "tool"]
    assert result["tool_call_id"] == "call_bad"
    if dialect == "anthropic":
        assert result["content"] == (
            "invalid call of run_command: argument 'command' must be a non-empty string or "
            "list of strings"
        )
    else:
        assert result["content"].startswith(
            "invalid call of run_command: arguments are not valid JSON"
        )
        assert result["content"].endswith('the arguments sent were: {"command": ')


ADA: list[dict[str, Any]] = [
    {
        "match": {"userMessage": "my name is Ada, remember it"},
        "response": {
            "content": "Nice to meet you, Ada.",
            "reasoning": "Remember the name.",
            "usage": {"prompt_tokens": 30, "completion_tokens": 6},
        },
    },
    {
        "match": {"userMessage": "what is my name?"},
        "response": {"content": "Your name is Ada.", "reasoning": "It was said before."},
    },
]


async def test_ada_the_second_request_carries_the_first_exchange(
    nursery: trio.Nursery, tmp_path: Path, dialect: str
) -> None:
    """Issue 31 (3, 7): "my name is Ada, remember it", then "what is my name?" in the
    same session: the second request holds the first exchange (the input and the
    reply) before the new input; the first task's ``done`` carries its usage."""
    aimock = await start_aimock(nursery, write_fixture(tmp_path, ADA))
    daemon = await start_daemon(tmp_path / "home", aimock, dialect)
    try:
        with trio.fail_after(60):
            async with open_frame_connection(daemon.info.ws_url, daemon.info.token) as conn:
                dones = []
                for index, text in enumerate(["my name is Ada, remember it", "what is my name?"]):
                    await conn.send(Run(request_id=f"r{index}", session_id="cli-ada", input=text))
                    frames = await until_done(conn, f"r{index}")
                    assert isinstance(frames[-1], DoneFrame)
                    assert frames[-1].status == "finished", frames[-1].error
                    dones += [
                        f.event
                        for f in frames
                        if isinstance(f, EventFrame) and isinstance(f.event, Done)
                    ]
    finally:
        assert await trio.to_thread.run_sync(daemon.stop) == 0
    journal = [e for e in await aimock.journal() if e["response"]["status"] == 200]
    assert len(journal) == 2
    said = [
        (m["role"], m["content"]) for m in journal[1]["body"]["messages"] if m["role"] != "system"
    ]
    assert said == [
        ("user", "my name is Ada, remember it"),
        ("assistant", "Nice to meet you, Ada."),
        ("user", "what is my name?"),
    ]
    first, second = dones
    assert (first.usage.input_tokens, first.usage.output_tokens, first.usage.calls) == (30, 6, 1)
    assert first.session_usage == first.usage
    assert second.session_usage.calls == 2
