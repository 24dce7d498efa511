"""engine/tools/base.py: what a tool gets to know and do about its task (R5, R20, R30,
R74, R76; issue 16 "tools get a small immutable tool context").

A tool receives a `ToolContext`, never the run: these tests pin what the context
carries and that it is the narrow, per-turn view the run hands out.
"""

from __future__ import annotations

from typing import Any, cast

import attrs
import pytest

from agentrio.engine.models.base import Message
from agentrio.engine.nursery_tasks import TaskHandle
from agentrio.engine.runs import RunOrigin, TaskRun
from agentrio.engine.sessions import Session
from agentrio.engine.snapshot import QA
from agentrio.engine.tools.base import Services, ToolContext
from agentrio.engine.tools.workdir import Workdir
from agentrio.protocol import events as ev
from agentrio.protocol.causes import Cause


def _run(**changes: Any) -> TaskRun:
    session: Session[TaskRun] = Session("cli-ctx", clock=lambda: 0.0)
    run = TaskRun(
        services=cast(Services, None),  # the context never reads the services
        session=session,
        task_hash="c" * 32,
        objective="o",
        input="i",
        origin=RunOrigin(connection_id="conn", window_hash="w1"),
        handle=TaskHandle(name="t"),
        workdir=Workdir("/srv/work"),
    )
    return attrs.evolve(run, **changes) if changes else run


def test_the_context_names_the_task_and_its_flags() -> None:
    """R5, R20, R30: session, task, origin prefix, window, allow_all and subagent_of
    come from the run; ``turn`` counts the assistant messages so far (R21)."""
    run = _run(allow_all=True, subagent_of="sub_0123abcd")
    run.messages.extend([Message(role="user"), Message(role="assistant")])
    ctx = run.tool_context()
    assert (ctx.session_id, ctx.task_hash, ctx.origin, ctx.window_hash) == (
        "cli-ctx",
        "c" * 32,
        "cli-",
        "w1",
    )
    assert (ctx.allow_all, ctx.subagent_of, ctx.turn) == (True, "sub_0123abcd", 1)


def test_the_context_is_frozen_and_fresh_each_turn() -> None:
    """R74: a tool cannot repoint the context; "allow this turn" starts empty each
    turn (remembered rules are the home's, in the store: tests/engine/test_rules.py)."""
    run = _run()
    first = run.tool_context()
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        first.allow_all = True  # type: ignore[misc]
    first.allow_turn.add("run_command")
    second = run.tool_context()
    assert second.allow_turn == set()
    assert first.workdir is second.workdir is run.workdir  # R86: a `cd` outlives its turn


def test_the_context_acts_on_the_task_through_narrow_calls() -> None:
    """R12, R40: events go to the session's hub under the task's hash, answers join
    the task's previous answers, and a cancel carries its cause to the task's handle."""
    run = _run()
    ctx: ToolContext = run.tool_context()
    event = ctx.emit(ev.Text, text="hi")
    assert run.session.hub.events_of(run.task_hash) == [event]
    ctx.add_answers([QA(question="Q", answer="A")])
    assert run.previous_answers == [QA(question="Q", answer="A")]
    assert ctx.cancel(Cause.USER_ABORTED) is True
    assert run.handle.cause is Cause.USER_ABORTED


def test_deliver_target_names_where_the_result_goes() -> None:
    """R20, R30, R80: a task that runs for itself has no deliver target; a background
    sub-agent delivers to its leg, an in-process sub-agent to its parent task."""
    run = _run()
    ctx = run.tool_context()
    assert ctx.deliver_to is None
    assert attrs.evolve(ctx, subagent_of="sub_0123abcd").deliver_to == "leg sub_0123abcd"
    inner = attrs.evolve(ctx, parent_task=ctx.task_hash, subagent="sub-agent 1/1: x")
    assert inner.deliver_to == f"task {ctx.task_hash}"
