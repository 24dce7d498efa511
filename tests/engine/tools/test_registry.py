"""engine/tools/registry.py and `ToolContext.ask`: one registry of tools, one door for
asking a person (R20, R30, R60, R80, R90, R91; issue 32 "One door").

The toolbox a task, an in-process sub-agent and a background leg get is computed from
each tool's declared `Reach`; a tool asks only through `ToolContext.ask`, which refuses
for it when nobody can answer and honours a stop choice, so a tool that forgets to
handle a refusal still runs nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import attrs
import pytest
import trio
import trio.testing

from agentrio.engine.assembly import open_engine
from agentrio.engine.config import Config
from agentrio.engine.models.base import ModelReply, ToolCallRequest, ToolSpec
from agentrio.engine.models.scripted import ScriptedModel
from agentrio.engine.pending import AskReply, Offered
from agentrio.engine.runs import RunOrigin
from agentrio.engine.tools.base import Reach, ToolContext, ToolOutcome
from agentrio.engine.tools.registry import Toolbox
from agentrio.protocol.causes import Cause
from agentrio.protocol.events import Confirm, ToolSkipped


class _Touch:
    """A tool that asks, then creates ``target``: it does not catch `Refused`, so the
    door alone must stop it."""

    name = "touch_after_ask"

    def __init__(self, target: Path, reach: Reach) -> None:
        self.target = target
        self.reach = reach

    def spec(self) -> ToolSpec:
        return ToolSpec(name=self.name, description="touch", parameters={"type": "object"})

    def available(self, ctx: ToolContext) -> bool:
        return True

    async def execute(self, ctx: ToolContext, call: ToolCallRequest) -> ToolOutcome:
        await ctx.ask("tool_confirm", tool_name=self.name, tool_args={"path": str(self.target)})
        self.target.touch()
        return ToolOutcome(output="touched")


_ASKS = Reach(unasked=False, in_subagents=True, in_legs=False)


def _model(*replies: ModelReply) -> ScriptedModel:
    return ScriptedModel(list(replies))


def _call_touch() -> ModelReply:
    return ModelReply(tool_calls=[ToolCallRequest(id="t1", name="touch_after_ask", args={})])


async def test_each_run_gets_the_tools_its_reach_allows(
    config: Config, autojump_clock: trio.testing.MockClock, wall_clock: Callable[[], float]
) -> None:
    """R20, R30, R80, R91: one toolbox; a cli- task gets every tool, an in-process
    sub-agent no background tools and no sub-agents, a background leg only tools that
    may run unasked and are declared for legs."""
    async with open_engine(config, clock=wall_clock) as engine:
        run = await engine.start_task("cli-reach", "hello", origin=RunOrigin("c1", "w1"))
        await run.wait_done()
        task = run.tool_context()
        sub = attrs.evolve(task, parent_task=task.task_hash, subagent="sub-agent 1/1: x")
        leg = attrs.evolve(task, subagent_of="sub_0123abcd")
        names = {
            who: [tool.name for tool in engine.toolbox.available(ctx)]
            for who, ctx in (("task", task), ("sub", sub), ("leg", leg))
        }
    assert names == {
        "task": [
            "run_command",
            "read_file",
            "edit_file",
            "write_file",
            "ask_user",
            "store_secret",
            "chat_history",
            "background_command",
            "background_subagents",
            "subagents",
        ],
        "sub": [
            "run_command",
            "read_file",
            "edit_file",
            "write_file",
            "ask_user",
            "store_secret",
            "chat_history",
        ],
        "leg": ["run_command", "read_file", "chat_history"],
    }


def test_a_registration_is_checked(tmp_path: Path) -> None:
    """R30, R91: names are unique, and a tool that always asks cannot be sent to legs
    (a leg never asks); a removed tool is no longer offered."""
    box = Toolbox([_Touch(tmp_path / "a", _ASKS)])
    with pytest.raises(ValueError, match="already registered"):
        box.add(_Touch(tmp_path / "b", _ASKS))
    with pytest.raises(ValueError, match="cannot run in legs"):
        Toolbox([_Touch(tmp_path / "c", Reach(unasked=False, in_subagents=False, in_legs=True))])
    assert box.remove("touch_after_ask") is not None
    assert box.get("touch_after_ask") is None
    assert list(box) == []


async def test_a_tool_not_offered_to_a_leg_is_not_run(
    config: Config,
    autojump_clock: trio.testing.MockClock,
    wall_clock: Callable[[], float],
    tmp_path: Path,
) -> None:
    """R30, R91: what is executed is decided by the same reach as what is offered: a
    leg calling a tool not declared for legs gets "not available" and nothing runs."""
    target = tmp_path / "leg-touched"
    async with open_engine(config, clock=wall_clock) as engine:
        engine.toolbox.add(_Touch(target, Reach(unasked=True, in_subagents=True, in_legs=False)))
        run = await engine.start_task("cli-leg", "hello", origin=RunOrigin("c1", "w1"))
        await run.wait_done()
        leg = attrs.evolve(run.tool_context(), subagent_of="sub_0123abcd")
        call = ToolCallRequest(id="t1", name="touch_after_ask", args={})
        outcome = await engine.toolbox.execute(leg, call)
    assert outcome.skipped == "tool 'touch_after_ask' is not available in this task"
    assert not target.exists()


async def test_the_door_refuses_for_a_tool_when_nobody_listens(
    config: Config,
    autojump_clock: trio.testing.MockClock,
    wall_clock: Callable[[], float],
    tmp_path: Path,
) -> None:
    """R8, R90: the tool does not catch the refusal; the call is still "not run", the
    model is told why, and the file was never created."""
    target = tmp_path / "unheard"
    model = _model(_call_touch(), ModelReply(text="done"))
    async with open_engine(config, model=model, clock=wall_clock) as engine:
        engine.toolbox.add(_Touch(target, _ASKS))
        run = await engine.start_task("chat-door", "touch it")
        await run.wait_done()
        events = engine.session("chat-door").hub.events_of(run.task_hash)
    [skipped] = [e for e in events if isinstance(e, ToolSkipped)]
    assert skipped.reason == "denied: no front-end is listening for confirmations of this session"
    assert not target.exists()


@pytest.mark.parametrize(
    ("reply", "status", "reason"),
    [
        (AskReply(approve=False, reason="not now"), "finished", "denied by the user: not now"),
        (AskReply(stop=Cause.USER_CANCELED), "canceled", None),
        (AskReply(stop=Cause.USER_ABORTED), "aborted", None),
    ],
)
async def test_the_door_announces_and_honours_the_reply(
    config: Config,
    autojump_clock: trio.testing.MockClock,
    wall_clock: Callable[[], float],
    tmp_path: Path,
    reply: AskReply,
    status: str,
    reason: str | None,
) -> None:
    """R1, R40, R90: the door publishes the ``confirm`` event before anyone can answer;
    a deny is the call's refusal, a stop choice ends the task with its cause; in no
    case does the tool's side effect happen."""
    target = tmp_path / "answered"
    model = _model(_call_touch(), ModelReply(text="done"))
    async with open_engine(config, model=model, clock=wall_clock) as engine:
        engine.toolbox.add(_Touch(target, _ASKS))
        with engine.registry.listen("chat-") as listener:
            run = await engine.start_task("chat-door", "touch it")
            notice = await listener.next_notice()
            assert isinstance(notice, Offered)
            await engine.answer(notice.entry.id, reply, by=listener)
            outcome = await run.wait_done()
        events = engine.session("chat-door").hub.events_of(run.task_hash)
    [confirm] = [e for e in events if isinstance(e, Confirm)]
    assert (confirm.confirm_hash, confirm.tool_name) == (notice.entry.id, "touch_after_ask")
    assert outcome.status == status
    skipped = [e.reason for e in events if isinstance(e, ToolSkipped)]
    assert skipped == ([] if reason is None else [reason])
    assert not target.exists()
