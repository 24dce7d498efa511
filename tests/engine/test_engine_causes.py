"""Cancel causes, markers and slots through the in-process engine.

R40, R41, R45, R46, R50, R51, R53: what each cause does to the pending record and
history; queued tasks visible and cancellable; liveness by TTL marker.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import attrs
import pytest
import trio
import trio.testing

from agentrio.engine.assembly import open_engine
from agentrio.engine.config import Config
from agentrio.engine.markers import MARKER_TTL_S
from agentrio.engine.messages import INTERRUPTED_RESUME_HEADER
from agentrio.engine.models.base import ModelError, ModelReply, ToolCallRequest
from agentrio.engine.models.scripted import ScriptedModel
from agentrio.engine.pending import AskReply
from agentrio.engine.runs import RunOrigin
from agentrio.engine.sessions import MAX_SESSION_TASKS
from agentrio.engine.store.base import TaskRow, marker_key
from agentrio.engine.store.sqlite import SqliteStore
from agentrio.engine.tools.sudo import FakeVerifier
from agentrio.protocol.causes import Cause
from agentrio.protocol.events import Failed
from tests.engine.conftest import HangingModel

SESSION = "chat-causes"


async def _history_status(engine: object, task_hash: str) -> tuple[str, str] | None:
    rows = await engine.store.list_history(SESSION, limit=50)  # type: ignore[attr-defined]
    for row in rows:
        if row.task_hash == task_hash:
            return row.status, row.content
    return None


async def test_user_canceled_writes_history_then_deletes_pending(
    config: Config, autojump_clock: trio.testing.MockClock, wall_clock: Callable[[], float]
) -> None:
    """R40, R45: user_canceled → history with [Canceled], no resumable entry left."""
    model = HangingModel()
    async with open_engine(config, model=model, clock=wall_clock) as engine:
        run = await engine.start_task(SESSION, "write the report")
        await model.entered.wait()
        assert engine.cancel(run.task_hash, Cause.USER_CANCELED)
        outcome = await run.wait_done()
        assert (outcome.status, outcome.cause) == ("canceled", Cause.USER_CANCELED)
        assert await engine.pending_tasks(SESSION) == []
        assert await engine.store.get_task(SESSION, run.task_hash) is None
        status, content = await _history_status(engine, run.task_hash) or ("", "")
        assert status == "canceled"
        assert content.splitlines()[-1] == "assistant: [Canceled]"
        events = engine.session(SESSION).hub.events_of(run.task_hash)
        assert type(events[-1]).__name__ == "Canceled"
        assert (events[-1].cause, events[-1].kept) == ("user_canceled", False)  # type: ignore[union-attr]


async def test_user_canceled_after_failure_keeps_last_error(
    config: Config, wall_clock: Callable[[], float]
) -> None:
    """R40: the [Canceled] history entry carries the last error when the task had one.

    Real time: a real subprocess runs, and a mock clock would jump past its timeout."""
    second_call = trio.Event()

    async def hang(messages: object, tools: object) -> object:
        second_call.set()
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    from agentrio.engine.models.base import ModelReply, ToolCallRequest

    model = ScriptedModel(
        [
            ModelReply(
                tool_calls=[
                    ToolCallRequest(
                        id="c1", name="run_command", args={"command": "cat /nonexistent-file"}
                    )
                ]
            ),
            hang,  # type: ignore[list-item]
        ]
    )
    async with open_engine(config, model=model, clock=wall_clock) as engine:
        run = await engine.start_task(SESSION, "look at a file")
        await second_call.wait()
        engine.cancel(run.task_hash, Cause.USER_CANCELED)
        await run.wait_done()
        _, content = await _history_status(engine, run.task_hash) or ("", "")
        assert "assistant: [Canceled]\nlast error: exit 1" in content


@pytest.mark.parametrize(
    ("cause", "status"),
    [
        (Cause.PAUSED, "paused"),
        (Cause.USER_ABORTED, "aborted"),
        (Cause.DISCONNECTED, "aborted"),
    ],
)
async def test_other_causes_keep_the_task_resumable(
    config: Config,
    autojump_clock: trio.testing.MockClock,
    wall_clock: Callable[[], float],
    cause: Cause,
    status: str,
) -> None:
    """R41: paused / user_aborted / disconnected tear down the run, keep it resumable."""
    model = HangingModel()
    async with open_engine(config, model=model, clock=wall_clock) as engine:
        run = await engine.start_task(SESSION, "long job", origin=RunOrigin(connection_id="c1"))
        await model.entered.wait()
        if cause is Cause.DISCONNECTED:
            assert engine.disconnect("c1") == 1
        else:
            assert engine.cancel(run.task_hash, cause)
        outcome = await run.wait_done()
        assert (outcome.status, outcome.cause) == (status, cause)
        pending = await engine.pending_tasks(SESSION)
        assert [(p.task_hash, p.objective, p.has_questions) for p in pending] == [
            (run.task_hash, "long job", False)
        ]
        assert await _history_status(engine, run.task_hash) is None
        events = engine.session(SESSION).hub.events_of(run.task_hash)
        assert (events[-1].cause, events[-1].kept) == (str(cause), True)  # type: ignore[union-attr]


async def test_shutdown_keeps_running_tasks_resumable(
    config: Config, autojump_clock: trio.testing.MockClock, wall_clock: Callable[[], float]
) -> None:
    """R41, R53: leaving the engine cancels runs with cause shutdown; they stay resumable."""
    model = HangingModel()
    async with open_engine(config, model=model, clock=wall_clock) as engine:
        run = await engine.start_task(SESSION, "survive a restart")
        await model.entered.wait()
    assert run.outcome is not None
    assert (run.outcome.status, run.outcome.cause) == ("aborted", Cause.SHUTDOWN)
    async with open_engine(config, model=HangingModel(), clock=wall_clock) as engine:
        pending = await engine.pending_tasks(SESSION)
        assert [p.task_hash for p in pending] == [run.task_hash]


async def test_a_task_started_once_shutdown_began_starts_cancelled_and_is_kept(
    config: Config, autojump_clock: trio.testing.MockClock, wall_clock: Callable[[], float]
) -> None:
    """R53, R41: a start under way when shutdown began (a background job's follow-up,
    started from a run's shielded end) is not missed by it: the run starts cancelled
    with cause shutdown, its model is never called, it stays resumable, and the engine
    closes instead of waiting on it for ever."""
    model = HangingModel()
    async with open_engine(config, model=model, clock=wall_clock) as engine:
        await engine.shutdown()
        run = await engine.start_task(SESSION, "started too late")
        with trio.fail_after(5):
            outcome = await run.wait_done()
    assert (outcome.status, outcome.cause) == ("aborted", Cause.SHUTDOWN)
    assert model.calls == 0
    async with open_engine(config, model=HangingModel(), clock=wall_clock) as engine:
        pending = await engine.pending_tasks(SESSION)
        assert [p.task_hash for p in pending] == [run.task_hash]


async def test_a_model_failure_keeps_the_task_resumable_and_runs_no_tool_twice(
    config: Config,
    autojump_clock: trio.testing.MockClock,
    wall_clock: Callable[[], float],
    tmp_path: Path,
) -> None:
    """Issue 31 (6), R37, R62: a task whose model still fails (after a command ran) is
    not lost: its ``failed`` event says why and is ``kept``, no history row is written,
    the pending list shows the failure; resuming it calls the model again with the
    command's result, and the command does not run a second time."""
    log = tmp_path / "ran.log"
    command = f"sh -c 'echo ran >> {log}'"
    model = ScriptedModel(
        [
            ModelReply(
                tool_calls=[ToolCallRequest(id="c1", name="run_command", args={"command": command})]
            ),
            ModelError("503 upstream overloaded"),
            ModelReply(text="Done after all."),
        ]
    )
    async with open_engine(config, model=model, clock=wall_clock) as engine:
        run = await engine.start_task(SESSION, "log it", allow_all=True)
        outcome = await run.wait_done()
        error = "model error: 503 upstream overloaded"
        assert (outcome.status, outcome.error, outcome.kept) == ("failed", error, True)
        events = engine.session(SESSION).hub.events_of(run.task_hash)
        assert isinstance(events[-1], Failed)
        assert (events[-1].error, events[-1].kept) == (error, True)
        assert await _history_status(engine, run.task_hash) is None
        (kept,) = await engine.pending_tasks(SESSION)
        assert (kept.task_hash, kept.objective, kept.failure) == (run.task_hash, "log it", error)
        assert log.read_text() == "ran\n"

        resumed = await engine.resume(SESSION, run.task_hash, allow_all=True)
        again = await resumed.wait_done()
        assert (again.status, again.text) == ("finished", "Done after all.")
        assert await engine.pending_tasks(SESSION) == []
    assert log.read_text() == "ran\n"  # exactly once (R37)
    assert len(model.calls) == 3
    resume_input = [m.content for m in model.calls[2] if m.role == "user"][-1]
    assert resume_input.startswith(INTERRUPTED_RESUME_HEADER)
    completed = resume_input.split("## Completed tool results\n", 1)[1]
    assert f'args: {{"command":"{command}"}}\noutput:\nexit 0' in completed
    assert "## Interrupted calls" not in resume_input


async def test_a_failure_that_is_not_the_models_goes_to_history(
    config: Config, autojump_clock: trio.testing.MockClock, wall_clock: Callable[[], float]
) -> None:
    """R45: a task that ends with an error that is not its model's (here: more turns
    than ``max_turns``) goes to history, not to the resumable list."""
    config = attrs.evolve(config, max_turns=1)
    call = ToolCallRequest(id="c1", name="run_command", args={"command": "true"})
    model = ScriptedModel([ModelReply(tool_calls=[call])])
    async with open_engine(config, model=model, clock=wall_clock) as engine:
        run = await engine.start_task(SESSION, "loop", allow_all=True)
        outcome = await run.wait_done()
        assert (outcome.status, outcome.kept) == ("failed", False)
        assert outcome.error == "the task took more than 1 turns"
        assert await engine.pending_tasks(SESSION) == []
        status, content = await _history_status(engine, run.task_hash) or ("", "")
        assert status == "failed"
        assert content.endswith("error: the task took more than 1 turns")


async def test_abort_task_from_a_confirmation_keeps_it(
    config: Config,
    autojump_clock: trio.testing.MockClock,
    wall_clock: Callable[[], float],
    tmp_path: object,
) -> None:
    """R41, R78: "Abort task" in a confirmation (shown to the window owning the task's
    window) → user_aborted, the command never runs."""
    target = f"{tmp_path}/never-created"
    async with open_engine(config, clock=wall_clock, verifier=FakeVerifier("pw")) as engine:
        with engine.registry.listen("cli-", windows={"w1"}) as listener:
            run = await engine.start_task(
                "cli-abort", f"run: touch {target}", origin=RunOrigin("c1", "w1")
            )
            notice = await listener.next_notice()
            entry = notice.entry  # type: ignore[union-attr]
            assert entry.request.tool_args == {
                "command": f"touch {target}",
                "cwd": os.path.realpath(os.getcwd()),
            }
            await engine.answer(entry.id, AskReply(stop=Cause.USER_ABORTED), by=listener)
            outcome = await run.wait_done()
        assert (outcome.status, outcome.cause) == ("aborted", Cause.USER_ABORTED)
        assert [p.task_hash for p in await engine.pending_tasks("cli-abort")] == [run.task_hash]
    assert not __import__("os").path.exists(target)


async def test_cancel_before_first_event_works(
    config: Config, autojump_clock: trio.testing.MockClock, wall_clock: Callable[[], float]
) -> None:
    """R46: the cancel path exists when start_task returns, before any model call."""
    model = HangingModel()
    async with open_engine(config, model=model, clock=wall_clock) as engine:
        run = await engine.start_task(SESSION, "never mind")
        assert engine.cancel(run.task_hash, Cause.USER_CANCELED)
        outcome = await run.wait_done()
        assert outcome.status == "canceled"
        kinds = [type(e).__name__ for e in engine.session(SESSION).hub.events_of(run.task_hash)]
        assert kinds == ["TaskStarted", "Canceled"]


async def test_queued_task_is_visible_and_cancellable(
    config: Config, autojump_clock: trio.testing.MockClock, wall_clock: Callable[[], float]
) -> None:
    """R50: with every slot taken, a new task is queued, listed as running (its marker
    is live, so it is not resumable) and can be cancelled while queued."""
    model = HangingModel()
    async with open_engine(config, model=model, clock=wall_clock) as engine:
        busy = [await engine.start_task(SESSION, f"busy {i}") for i in range(MAX_SESSION_TASKS)]
        await trio.testing.wait_all_tasks_blocked()
        assert model.calls == MAX_SESSION_TASKS
        queued = await engine.start_task(SESSION, "waiting for a slot")
        await trio.testing.wait_all_tasks_blocked()
        assert queued.queued
        assert engine.statistics()["tasks_queued"] == 1
        assert engine.statistics()["tasks_running"] == MAX_SESSION_TASKS
        key = marker_key(SESSION, queued.task_hash)
        assert await engine.store.marker_alive(key, now=wall_clock())
        assert await engine.pending_tasks(SESSION) == []
        assert engine.cancel(queued.task_hash, Cause.PAUSED)
        outcome = await queued.wait_done()
        assert outcome.status == "paused"
        assert model.calls == MAX_SESSION_TASKS  # it never reached the model
        assert [p.task_hash for p in await engine.pending_tasks(SESSION)] == [queued.task_hash]
        for run in busy:
            engine.cancel(run.task_hash, Cause.USER_CANCELED)


async def test_running_task_refreshes_its_marker(
    config: Config, autojump_clock: trio.testing.MockClock, wall_clock: Callable[[], float]
) -> None:
    """R51: a live task's marker is refreshed every 55 s, so it never expires."""
    model = HangingModel()
    async with open_engine(config, model=model, clock=wall_clock) as engine:
        run = await engine.start_task(SESSION, "long")
        key = marker_key(SESSION, run.task_hash)
        for _ in range(5):
            await trio.sleep(MARKER_TTL_S)
            assert await engine.store.marker_alive(key, now=wall_clock())
        engine.cancel(run.task_hash, Cause.PAUSED)
        await run.wait_done()
        assert not await engine.store.marker_alive(key, now=wall_clock())


async def test_crashed_task_becomes_resumable_after_ttl_not_before(
    config: Config, autojump_clock: trio.testing.MockClock, wall_clock: Callable[[], float]
) -> None:
    """R51, R72: a task left "running" by a killed daemon (marker no longer refreshed)
    is resumable once its 60 s marker expires, and not before."""
    store = await SqliteStore.open(config.home_path / "agentrio.db")
    try:
        now = wall_clock()
        task_hash = "ab" * 16
        await store.put_task(
            TaskRow(
                session_id=SESSION,
                task_hash=task_hash,
                state="running",
                objective="crashed mid-run",
                origin="chat-",
                model="builtin",
                created_at=now,
                updated_at=now,
                snapshot=None,
                questions=[],
            )
        )
        await store.set_marker(marker_key(SESSION, task_hash), expires_at=now + MARKER_TTL_S)
        async with open_engine(config, store=store, clock=wall_clock) as engine:
            await trio.sleep(MARKER_TTL_S - 1)
            assert await engine.pending_tasks(SESSION) == []
            await trio.sleep(2)
            pending = await engine.pending_tasks(SESSION)
            assert [(p.task_hash, p.objective) for p in pending] == [(task_hash, "crashed mid-run")]
            resumed = await engine.resume(SESSION, task_hash)
            assert resumed.input.startswith("[Resumed Task — interrupted execution recovered]")
            await resumed.wait_done()
    finally:
        await store.aclose()
