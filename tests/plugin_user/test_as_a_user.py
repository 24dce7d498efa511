"""A suite written the way an agentrio user writes theirs: only the plugin's fixtures
(`agentrio.testing`, loaded through its ``pytest11`` entry point — nothing is imported
from this project's conftest files) and the public scripting client
(`agentrio`)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

from agentrio import Client, ClientError, Decision, Subscription
from agentrio.protocol.events import Done, ToolCall, ToolResult, ToolSkipped
from agentrio.protocol.frames import EventFrame
from agentrio.testing import (
    Engine,
    EngineFactory,
    ModelReply,
    RunningDaemon,
    ScriptedModel,
    ToolCallRequest,
    allow_commands,
    answer_asks,
    answer_engine_asks,
    approve_next,
)


def touch_turns(target: Path) -> list[ModelReply]:
    return [
        ModelReply(
            tool_calls=[
                ToolCallRequest(id="c1", name="run_command", args={"command": f"touch {target}"})
            ]
        ),
        ModelReply(text="touched it"),
    ]


@pytest.mark.parametrize("agentrio_turns", [[ModelReply(text="hello from the script")]])
async def test_engine_replays_scripted_turns(agentrio_engine: Engine) -> None:
    """R61: the in-process engine runs a task on the scripted model's turns."""
    with trio.fail_after(10):
        run = await agentrio_engine.start_task("chat-user-1", "say hello")
        outcome = await run.wait_done()
    assert (outcome.status, outcome.text) == ("finished", "hello from the script")
    history = await agentrio_engine.history("chat-user-1")
    assert [(h.objective, h.status) for h in history] == [("say hello", "finished")]


async def test_engine_confirmation_answered_by_rule(
    agentrio_make_engine: EngineFactory, tmp_path: Path
) -> None:
    """R2, R8, R60: a scripted ``run_command`` needs confirmation; a rule listener on
    the engine approves it; the command runs and the model sees its result."""
    target = tmp_path / "made-by-engine"
    model = ScriptedModel(touch_turns(target))
    with trio.fail_after(10):
        async with agentrio_make_engine(model=model) as engine, trio.open_nursery() as nursery:
            nursery.start_soon(answer_engine_asks, engine, allow_commands(r"touch \S+"))
            run = await engine.start_task("chat-user-2", "make the file")
            outcome = await run.wait_done()
            nursery.cancel_scope.cancel()
    assert (outcome.status, outcome.text) == ("finished", "touched it")
    assert target.exists()
    assert [m.role for m in model.calls[1]][-1] == "tool"
    assert model.calls[1][-1].content.startswith("exit 0")


async def test_engine_denial_by_rule_keeps_the_command_from_running(
    agentrio_make_engine: EngineFactory, tmp_path: Path
) -> None:
    """R8, R60: the same call denied by the rule is skipped with the rule's reason."""
    target = tmp_path / "never-made"
    model = ScriptedModel(touch_turns(target))
    with trio.fail_after(10):
        async with agentrio_make_engine(model=model) as engine, trio.open_nursery() as nursery:
            nursery.start_soon(
                answer_engine_asks, engine, allow_commands(r"ls", reason="only ls today")
            )
            run = await engine.start_task("chat-user-3", "make the file")
            outcome = await run.wait_done()
            nursery.cancel_scope.cancel()
    assert outcome.status == "finished"
    assert not target.exists()
    assert model.calls[1][-1].content == "not run: denied by the user: only ls today"


async def test_daemon_run_streams_events(agentrio_client: Client) -> None:
    """§8, R60: a read-only command through the real daemon needs no confirmation;
    the client's run handle streams its events and its one ``done``."""
    with trio.fail_after(20):
        run = await agentrio_client.run("script-user-1", "run: echo hello")
        assert len(run.task_hash) == 32
        done = await run.wait_done()
        kinds = [type(e).__name__ for e in [event async for event in run.events()]]
    assert (done.status, done.task_hash) == ("finished", run.task_hash)
    assert kinds[0] == "TaskStarted"
    assert kinds[-1] == "Done"
    results = [e for e in run.events_so_far if isinstance(e, ToolResult)]
    assert [(r.ok, r.output) for r in results] == [(True, "exit 0\nhello\n")]


async def test_daemon_confirmation_with_approve_next(
    agentrio_client: Client, tmp_path: Path
) -> None:
    """R5, R60: a ``cli-`` task's confirmation comes to the connection that started
    it; `approve_next` approves it and the command runs."""
    target = tmp_path / "approved"
    with trio.fail_after(20):
        run = await agentrio_client.run("cli-user", f"run: touch {target}")
        ask = await approve_next(run)
        done = await run.wait_done()
    assert (ask.kind, ask.tool_name, ask.tool_args) == (
        "tool_confirm",
        "run_command",
        {"command": f"touch {target}", "cwd": os.path.realpath(os.getcwd())},
    )
    assert done.status == "finished"
    assert target.exists()


async def test_chat_listener_answers_http_tasks_by_rule(
    agentrio_client: Client, tmp_path: Path
) -> None:
    """R2, R8, R35: a script listening on ``chat-`` answers confirmations of tasks
    others start over HTTP: the allowed one runs, the denied one is skipped."""
    allowed, denied = tmp_path / "yes", tmp_path / "no"
    listener = await agentrio_client.listen("chat-")
    with trio.fail_after(20):
        ok_events = await agentrio_client.subscribe("chat-user-ok")
        no_events = await agentrio_client.subscribe("chat-user-no")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(
                answer_asks, listener, allow_commands(rf"touch {allowed}", reason="not that one")
            )
            await agentrio_client.send(f"run: touch {allowed}", session_id="chat-user-ok")
            await agentrio_client.send(f"run: touch {denied}", session_id="chat-user-no")
            ok_seen = [frame.event async for frame in _until_done(ok_events)]
            no_seen = [frame.event async for frame in _until_done(no_events)]
            nursery.cancel_scope.cancel()
    assert allowed.exists()
    assert not denied.exists()
    assert [e.ok for e in ok_seen if isinstance(e, ToolResult)] == [True]
    skipped = [e.reason for e in no_seen if isinstance(e, ToolSkipped)]
    assert skipped == ["denied by the user: not that one"]


async def _until_done(subscription: Subscription) -> AsyncIterator[EventFrame]:
    """The subscription's frames up to the first ``done`` event."""
    async for frame in subscription:
        yield frame
        if isinstance(frame.event, Done):
            return


async def test_pause_list_and_resume(agentrio_client: Client) -> None:
    """R41, R42, §8: pausing a running task keeps it pending; the client lists it and
    resumes it with a ``pending`` frame; the resumed run re-runs the command."""
    with trio.fail_after(30):
        run = await agentrio_client.run("cli-user-pause", "run: sleep 0.5", on_ask=lambda a: True)
        async for event in run.events():
            if isinstance(event, ToolCall):
                break
        await run.pause()
        paused = await run.wait_done()
        pending = await agentrio_client.pending("cli-user-pause")
        resumed = await agentrio_client.resume(
            "cli-user-pause", run.task_hash, on_ask=lambda a: Decision.allow()
        )
        finished = await resumed.wait_done()
        after = await agentrio_client.pending("cli-user-pause")
    assert paused.status == "paused"
    assert [p.task_hash for p in pending] == [run.task_hash]
    assert finished.status == "finished"
    assert [e.ok for e in resumed.events_so_far if isinstance(e, ToolResult)] == [True]
    assert after == []


async def test_client_errors_name_the_code(agentrio_client: Client) -> None:
    """R35, R40, R71, §7: a steer of a task that does not run raises ClientError
    ``not_found``; a cancel of one is a stale cancel, no error; resuming an unknown
    task fails to start."""
    with trio.fail_after(10):
        with pytest.raises(ClientError) as steer_error:
            await agentrio_client.steer("cli-user-none", "0" * 32, "more")
        await agentrio_client.cancel("0" * 32)
        with pytest.raises(ClientError) as resume_error:
            await agentrio_client.resume("cli-user-none", "1" * 32)
    assert steer_error.value.code == "not_found"
    assert resume_error.value.code == "start_failed"
    assert "no pending task" in resume_error.value.message


def test_daemon_fixture_describes_the_daemon(agentrio_daemon: RunningDaemon) -> None:
    """§7: the daemon fixture names its home, address, token and process."""
    assert agentrio_daemon.base_url.startswith("http://127.0.0.1:")
    assert agentrio_daemon.ws_url == agentrio_daemon.base_url.replace("http", "ws") + "/v1/ws"
    assert agentrio_daemon.token == (agentrio_daemon.home / "token").read_text().strip()
    assert agentrio_daemon.pid > 0
