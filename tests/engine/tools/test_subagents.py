"""The ``subagents`` tool through the in-process engine (R80, with R3, R11, R20, R40, R41).

In-process sub-agents run as children of the calling task: they run at once, their
confirmations reach the parent's front-end labelled with the sub-agent, their results
come back together (each clamped to its share), and a cancel of the parent reaches all
of them with the parent's cause -- pause keeps the parent resumable, user cancel
deletes it, and either withdraws the sub-agents' open confirmations.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import attrs
import trio

from agentrio.engine.assembly import open_engine
from agentrio.engine.config import Config, ToolsConfig
from agentrio.engine.messages import INTERRUPTED_RESUME_HEADER, SUBAGENTS_RESULT_HEADER
from agentrio.engine.models.base import Message, ModelError, ModelReply, ToolCallRequest, ToolSpec
from agentrio.engine.models.scripted import ScriptedModel
from agentrio.engine.pending import AskReply, Offered, Withdrawn
from agentrio.engine.runs import RunOrigin
from agentrio.engine.snapshot import snapshot_from_json
from agentrio.protocol.causes import Cause
from agentrio.protocol.events import Confirm, ToolResult

SESSION = "chat-subs"


def _sub_objective(messages: Sequence[Message]) -> str | None:
    """The objective of a sub-agent's conversation (its system prompt names it a
    sub-agent, then its objective), or None for the parent's."""
    if messages and "one of several sub-agents" in messages[0].content:
        return messages[1].content
    return None


def _parent_call(*objectives: str) -> ModelReply:
    return ModelReply(
        tool_calls=[
            ToolCallRequest(id="p1", name="subagents", args={"objectives": list(objectives)})
        ]
    )


async def test_subagents_run_at_once_and_return_together(
    config: Config, wall_clock: Callable[[], float]
) -> None:
    """R80: both sub-agents are running at the same time (each waits for the other to
    start), and their answers come back as one tool result, in objective order; the
    sub-agents are offered neither background tools nor ``subagents`` (R20)."""
    started = {"A": trio.Event(), "B": trio.Event()}

    async def turn(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelReply:
        objective = _sub_objective(messages)
        if objective is None:
            if messages[-1].role == "tool":
                return ModelReply(text="both done")
            return _parent_call("A", "B")
        started[objective].set()
        await started["B" if objective == "A" else "A"].wait()
        return ModelReply(text=f"answer of {objective}")

    model = ScriptedModel([turn, turn, turn, turn])  # type: ignore[list-item]
    async with open_engine(config, model=model, clock=wall_clock) as engine:
        run = await engine.start_task("cli-subs", "split the work")
        with trio.fail_after(10):
            outcome = await run.wait_done()
        events = engine.session("cli-subs").hub.events_of(run.task_hash)
    assert outcome.text == "both done"
    [result] = [e for e in events if isinstance(e, ToolResult)]
    assert result.ok
    assert result.output.startswith(SUBAGENTS_RESULT_HEADER)
    first = result.output.index("## sub-agent 1/2: A")
    second = result.output.index("## sub-agent 2/2: B")
    assert first < result.output.index("answer of A") < second
    assert result.output.index("answer of B") > second
    parent_tools, *sub_tools = model.tool_names[:3]
    assert {"subagents", "background_command", "background_subagents"} <= set(parent_tools)
    for names in sub_tools:
        assert "run_command" in names
        assert not {"subagents", "background_command", "background_subagents"} & set(names)


async def test_each_subagent_result_is_clamped_to_its_share(
    config: Config, wall_clock: Callable[[], float]
) -> None:
    """R80, R11: a verbose sub-agent cannot push its sibling out of the result: each
    section is clamped to an equal share of ``max_result_bytes``, with the marker."""
    limit = 2000
    config = attrs.evolve(config, tools=ToolsConfig(max_result_bytes=limit))

    def turn(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelReply:
        objective = _sub_objective(messages)
        if objective is None:
            return ModelReply(text="ok") if messages[-1].role == "tool" else _parent_call("x", "y")
        return ModelReply(text=f"start of {objective} " + objective * 5000 + f" end of {objective}")

    model = ScriptedModel([turn, turn, turn, turn])  # type: ignore[list-item]
    async with open_engine(config, model=model, clock=wall_clock) as engine:
        run = await engine.start_task(SESSION, "verbose")
        await run.wait_done()
        events = engine.session(SESSION).hub.events_of(run.task_hash)
    [result] = [e for e in events if isinstance(e, ToolResult)]
    for name in ("x", "y"):
        assert f"sub-agent {'1' if name == 'x' else '2'}/2: {name}" in result.output
        assert f"end of {name}" in result.output
    assert result.output.count("bytes elided]...") == 2
    assert len(result.output.encode()) <= limit


async def test_a_failing_subagent_fails_alone(
    config: Config, wall_clock: Callable[[], float]
) -> None:
    """R80: a sub-agent whose model fails ends ``failed``; its sibling's answer stands
    and the parent goes on with both in its result (``ok`` false)."""

    def turn(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelReply:
        objective = _sub_objective(messages)
        if objective is None:
            return ModelReply(text="ok") if messages[-1].role == "tool" else _parent_call("g", "b")
        if objective == "b":
            raise ModelError("provider exploded")
        return ModelReply(text="good answer")

    model = ScriptedModel([turn, turn, turn, turn])  # type: ignore[list-item]
    async with open_engine(config, model=model, clock=wall_clock) as engine:
        run = await engine.start_task(SESSION, "one fails")
        outcome = await run.wait_done()
        events = engine.session(SESSION).hub.events_of(run.task_hash)
    assert outcome.status == "finished"
    [result] = [e for e in events if isinstance(e, ToolResult)]
    assert not result.ok
    assert "good answer" in result.output
    assert "status: failed\nerror: model error: provider exploded" in result.output


async def test_confirmation_is_labelled_and_approval_runs_it(
    config: Config, wall_clock: Callable[[], float], tmp_path: Path
) -> None:
    """R80, R60: a sub-agent's confirmation goes through the registry to the parent's
    front-end with the parent's task hash and window, labelled with the sub-agent (on
    the ask and on the ``confirm`` event); approving it runs the command."""
    made = tmp_path / "made"
    async with open_engine(config, clock=wall_clock) as engine:
        with engine.registry.listen("cli-", windows=["w1"]) as listener:
            run = await engine.start_task(
                "cli-subs1",
                f"subs: run: touch {made} ;; history:",
                origin=RunOrigin(window_hash="w1"),
            )
            notice = await listener.next_notice()
            assert isinstance(notice, Offered)
            request = notice.entry.request
            assert (request.task_hash, request.window_hash) == (run.task_hash, "w1")
            assert request.subagent == f"sub-agent 1/2: run: touch {made}"
            await engine.answer(notice.entry.id, AskReply(approve=True), by=listener)
            outcome = await run.wait_done()
        events = engine.session("cli-subs1").hub.events_of(run.task_hash)
    assert made.exists()
    [confirm] = [e for e in events if isinstance(e, Confirm)]
    assert confirm.subagent == request.subagent
    assert "The 2 sub-agents ended:" in outcome.text
    assert "finished with exit code 0" in outcome.text
    assert "2. history: → finished" in outcome.text


async def _parent_waiting_on_a_subagent(
    engine: object, listener: object, target: Path
) -> tuple[object, Offered]:
    run = await engine.start_task(SESSION, f"subs: run: touch {target} ;; run: touch {target}2")  # type: ignore[attr-defined]
    first = await listener.next_notice()  # type: ignore[attr-defined]
    second = await listener.next_notice()  # type: ignore[attr-defined]
    assert isinstance(first, Offered)
    assert isinstance(second, Offered)
    labels = sorted(n.entry.request.subagent[:13] for n in (first, second))
    assert labels == ["sub-agent 1/2", "sub-agent 2/2"]
    return run, first


async def test_pause_withdraws_subagent_asks_and_keeps_the_parent_resumable(
    config: Config, wall_clock: Callable[[], float], tmp_path: Path
) -> None:
    """R80, R41, R3: pausing the parent ends every sub-agent with the parent's cause;
    their open confirmations are withdrawn, nothing ran, and the parent stays resumable
    with the ``subagents`` call kept as interrupted; the resume message says to call it
    again, and the resumed run does (and the approved command then runs)."""
    target = tmp_path / "paused"
    async with open_engine(config, clock=wall_clock) as engine:
        with engine.registry.listen("chat-") as listener:
            run, _ = await _parent_waiting_on_a_subagent(engine, listener, target)
            assert engine.cancel(run.task_hash, Cause.PAUSED)  # type: ignore[attr-defined]
            withdrawn = [await listener.next_notice(), await listener.next_notice()]
            outcome = await run.wait_done()  # type: ignore[attr-defined]
            assert all(isinstance(n, Withdrawn) for n in withdrawn)
            assert (outcome.status, outcome.cause) == ("paused", Cause.PAUSED)
            row = await engine.store.get_task(SESSION, run.task_hash)  # type: ignore[attr-defined]
            assert row is not None
            assert row.state == "interrupted"
            assert row.snapshot is not None
            snapshot = snapshot_from_json(row.snapshot)
            assert [c.tool_name for c in snapshot.interrupted] == ["subagents"]
            assert not target.exists()

            resumed = await engine.resume(SESSION, run.task_hash)  # type: ignore[attr-defined]
            assert resumed.input.startswith(INTERRUPTED_RESUME_HEADER)
            assert "call subagents again" in resumed.input
            for _ in range(2):
                notice = await listener.next_notice()
                assert isinstance(notice, Offered)
                await engine.answer(notice.entry.id, AskReply(approve=True), by=listener)
            final = await resumed.wait_done()
    assert final.status == "finished"
    assert target.exists()
    assert Path(f"{target}2").exists()


async def test_user_cancel_ends_every_subagent_and_deletes_the_parent(
    config: Config, wall_clock: Callable[[], float], tmp_path: Path
) -> None:
    """R80, R40, R3: a user cancel of the parent reaches every sub-agent; their
    confirmations are withdrawn, nothing ran, and the parent goes to history as
    canceled with no pending record left."""
    target = tmp_path / "canceled"
    async with open_engine(config, clock=wall_clock) as engine:
        with engine.registry.listen("chat-") as listener:
            run, _ = await _parent_waiting_on_a_subagent(engine, listener, target)
            assert engine.cancel(run.task_hash, Cause.USER_CANCELED)  # type: ignore[attr-defined]
            withdrawn = [await listener.next_notice(), await listener.next_notice()]
            outcome = await run.wait_done()  # type: ignore[attr-defined]
        assert await engine.store.get_task(SESSION, run.task_hash) is None  # type: ignore[attr-defined]
    assert all(isinstance(n, Withdrawn) for n in withdrawn)
    assert (outcome.status, outcome.cause) == ("canceled", Cause.USER_CANCELED)
    assert not target.exists()
    assert not Path(f"{target}2").exists()


async def test_cancel_task_in_a_subagent_confirmation_cancels_the_parent(
    config: Config, wall_clock: Callable[[], float], tmp_path: Path
) -> None:
    """R80, R40: "Cancel task" in one sub-agent's confirmation cancels the parent with
    ``user_canceled``, which ends the sibling too and withdraws its confirmation."""
    target = tmp_path / "stopped"
    async with open_engine(config, clock=wall_clock) as engine:
        with engine.registry.listen("chat-") as listener:
            run, first = await _parent_waiting_on_a_subagent(engine, listener, target)
            await engine.answer(
                first.entry.id, AskReply(approve=False, stop=Cause.USER_CANCELED), by=listener
            )
            withdrawn = await listener.next_notice()
            outcome = await run.wait_done()  # type: ignore[attr-defined]
    assert isinstance(withdrawn, Withdrawn)
    assert (outcome.status, outcome.cause) == ("canceled", Cause.USER_CANCELED)
    assert not target.exists()
    assert not Path(f"{target}2").exists()


async def test_a_subagent_question_is_asked_inline_in_any_origin(
    config: Config, wall_clock: Callable[[], float]
) -> None:
    """R80, R11: a sub-agent cannot park its parent, so its ``ask_user`` asks inline
    through the registry even from a ``chat-`` session (labelled); with nobody to
    answer, the call is "not run" and the sub-agent goes on."""
    async with open_engine(config, clock=wall_clock) as engine:
        with engine.registry.listen("chat-") as listener:
            run = await engine.start_task(SESSION, "subs: ask: Which one? | a, b")
            notice = await listener.next_notice()
            assert isinstance(notice, Offered)
            assert notice.entry.request.subagent == "sub-agent 1/1: ask: Which one? | a, b"
            await engine.answer(notice.entry.id, AskReply(answers=["b"]), by=listener)
            answered = await run.wait_done()
        alone = await engine.start_task("chat-subs-alone", "subs: ask: Anyone?")
        unanswered = await alone.wait_done()
    assert (answered.status, unanswered.status) == ("finished", "finished")
    assert "You answered: b." in answered.text
    assert "cannot park its parent task" in unanswered.text
