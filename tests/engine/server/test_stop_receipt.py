"""A stop that says what it stopped, through the real server (issue 34 item 4; R44, R48,
R80).

A ``cli-`` task runs a background shell leg (``sleep 600``, approved), a background
sub-agent leg and then two in-process sub-agents, one of which waits on a confirmation;
it is cancelled (or paused) over HTTP. The reply, the run's ``done`` frame and the
REPL's end line name what ended; the shell leg's process group is gone; ``/v1/health``
counts nothing running. Commands here are real subprocesses, so real time.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest
import trio

from agentrio.engine.assembly import open_engine
from agentrio.engine.config import AgentConfig, Config, ServerConfig
from agentrio.engine.models.base import (
    Message,
    Model,
    ModelReply,
    RetrySink,
    TextSink,
    ToolCallRequest,
    ToolSpec,
)
from agentrio.engine.server.auth import load_or_create_token
from agentrio.engine.server.lifecycle import open_server
from agentrio.protocol import events as ev
from agentrio.protocol import structure
from agentrio.protocol.frames import Ask, DoneFrame, EventFrame, Reply, Run
from agentrio.protocol.http import CancelResult
from agentrio.protocol.wording import stop_receipt_line
from agentrio.transport import FrameConnection, open_frame_connection
from tests.engine.conftest import first_input

SESSION = "cli-stop-receipt"


class StopModel:
    """The parent starts two legs, then two in-process sub-agents; the sub-agent
    ``inner asks`` asks to ``touch`` a file, every other child waits for ever."""

    name = "stop-model"

    def __init__(self, touched: Path) -> None:
        self.touched = touched

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        *,
        on_text: TextSink | None = None,
        on_retry: RetrySink | None = None,
    ) -> ModelReply:
        await trio.lowlevel.checkpoint()
        first = first_input(messages)
        turns = sum(1 for message in messages if message.role == "assistant")
        if first == "inner asks" and turns == 0:
            touch = ToolCallRequest(
                id="t1", name="run_command", args={"command": ["touch", str(self.touched)]}
            )
            return ModelReply(text="", tool_calls=[touch])
        if first != "parent":
            await trio.sleep_forever()
        if turns == 0:
            legs = {"objective": "watch things", "next": "tell the user"}
            return ModelReply(
                text="",
                tool_calls=[
                    ToolCallRequest(
                        id="b1", name="background_command", args={"commands": ["sleep 600"], **legs}
                    ),
                    ToolCallRequest(
                        id="b2",
                        name="background_subagents",
                        args={"objectives": ["child hangs"], **legs},
                    ),
                ],
            )
        if turns == 1:
            inner = {"objectives": ["inner asks", "inner hangs"]}
            return ModelReply(
                text="", tool_calls=[ToolCallRequest(id="s1", name="subagents", args=inner)]
            )
        return ModelReply(text="done")


@asynccontextmanager
async def served_with(home: Path, model: Model) -> AsyncIterator[tuple[str, httpx.AsyncClient]]:
    """A real engine (with ``model``) served on loopback: its WebSocket URL and an
    HTTP client holding the token."""
    config = Config(
        home=str(home),
        server=ServerConfig(listener_grace_s=0.5),
        agent=AgentConfig(cwd=os.getcwd()),
    )
    token = load_or_create_token(home)
    async with (
        open_engine(config, model=model) as engine,
        open_server(engine, token=token, version="9.9.9") as server,
        httpx.AsyncClient(
            base_url=server.base_url, headers={"Authorization": f"Bearer {token}"}
        ) as http,
    ):
        yield server.ws_url, http


async def start_and_wait_for_inner_ask(conn: FrameConnection) -> tuple[str, Ask, list[str]]:
    """Run the parent, approve its ``sleep 600`` leg; return the task hash, the inner
    sub-agent's open confirmation and the legs started."""
    await conn.send(Run(request_id="r1", session_id=SESSION, input="parent", window_hash="w1"))
    legs: list[str] = []
    task_hash = ""
    while True:
        frame = await conn.receive()
        if isinstance(frame, EventFrame):
            task_hash = task_hash or frame.task_hash
            if isinstance(frame.event, ev.LegStarted) and not frame.event.queued:
                legs.append(frame.event.leg_id)
        elif isinstance(frame, Ask) and frame.tool_name == "background_command":
            await conn.send(Reply(id=frame.id, approve=True))
        elif isinstance(frame, Ask) and frame.tool_name == "run_command":
            assert frame.subagent == "sub-agent 1/2: inner asks"
            return task_hash, frame, legs


async def done_of(conn: FrameConnection) -> DoneFrame:
    while True:
        frame = await conn.receive()
        if isinstance(frame, DoneFrame):
            return frame


@pytest.mark.parametrize(("route", "cause"), [("cancel", "user_canceled"), ("pause", "paused")])
async def test_a_stop_says_what_it_ended_and_leaves_nothing_running(
    tmp_path: Path, route: str, cause: str
) -> None:
    """R44, R48, R80 (issue 34 item 4): cancelling or pausing a task with a running shell
    leg, a sub-agent leg and two in-process sub-agents (one asking) answers with the
    receipt -- both legs, the shell leg's process group, both sub-agents, the withdrawn
    ask, nothing still alive -- in the HTTP reply and the ``done`` frame; the group is
    gone (``killpg(pgid, 0)`` raises), the asked ``touch`` never ran and ``/v1/health``
    counts no task and no leg running."""
    touched = tmp_path / "touched"
    with trio.fail_after(60):
        async with (
            served_with(tmp_path / "home", StopModel(touched)) as (ws_url, http),
            open_frame_connection(ws_url, http.headers["Authorization"][7:]) as conn,
        ):
            task_hash, ask, legs = await start_and_wait_for_inner_ask(conn)
            assert len(legs) == 2
            health = (await http.get("/v1/health")).json()
            assert health["legs"] == 2  # the test's premise: both legs run now

            reply = await http.post(f"/v1/session/{SESSION}/{route}/{task_hash}")
            assert reply.status_code == 200, reply.text
            result = structure(reply.json(), CancelResult)
            stopped = result.stopped
            assert result.cancelled
            assert stopped is not None
            assert stopped.cause == cause
            by_kind = {leg.kind: leg for leg in stopped.legs}
            assert sorted(leg.leg_id for leg in stopped.legs) == sorted(legs)
            assert {leg.status for leg in stopped.legs} == {"canceled"}
            assert by_kind["cmd"].label == "sleep 600"
            [pgid] = by_kind["cmd"].process_groups
            assert pgid in stopped.process_groups
            assert stopped.calls == ["subagents"]
            assert stopped.subagents == ["sub-agent 1/2: inner asks", "sub-agent 2/2: inner hangs"]
            assert stopped.asks_withdrawn == [ask.id]
            assert stopped.left_running == []
            assert stopped.still_alive == []
            with pytest.raises(ProcessLookupError):
                os.killpg(pgid, 0)

            done = await done_of(conn)
            assert done.stopped == stopped
            line = stop_receipt_line(stopped)
            assert "2 background legs" in line
            assert "2 sub-agents" in line
            assert line.endswith("nothing left running")

            health = (await http.get("/v1/health")).json()
            assert (health["tasks"], health["legs"]) == (0, 0)
            assert health["statistics"]["tasks_running"] == 0
            assert not touched.exists()  # the withdrawn confirmation approved nothing
