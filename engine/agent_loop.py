"""The agent loop: model call, tool calls, results, until the model stops calling tools.

Every agent of the engine turns this one loop (issue 31 item 4): a task's run
(`agentrio.engine.runs`, background sub-agents' runs included) and each in-process
sub-agent of a ``subagents`` call (`agentrio.engine.tools.subagents`). So whatever holds
of a model call holds for all of them, because it is one call
(`agentrio.engine.compaction.call_model`):

* a rate limit, a server error, a dropped connection or a timeout is retried with
  bounded back-off (`agentrio.engine.models.retry`), each retry announced by a
  ``retrying`` event before its wait, and a cancel during that wait lands at once;
* a context-length refusal elides the agent's own older tool results (and, for a task
  that sees its session's conversation, compacts that) and tries once more;
* each call's usage is counted (`Agent.count`: a sub-agent's into its task's);
* a malformed tool call (bad JSON, unknown tool, missing field) goes back to the model
  as that call's error result (`agentrio.engine.tools.registry.Toolbox.execute`), never
  a failure of the agent.

What differs between agents is what they start from and what they tell people, and
that is theirs to say through `Agent`: a task starts from its session's conversation
and its input, streams its text, announces each call and records it, takes steers and
background reports between turns and may park on a question; a sub-agent starts from
its objective alone with its restricted toolbox (its `ToolContext`), streams nothing
and keeps a line per call for its parent's result.

A `ModelError` the retries could not overcome passes out of `turns` for the caller to
decide on (a task is kept resumable, a sub-agent fails alone); so does cancellation.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import attrs

from agentrio.engine.compaction import TaskRun as ModelCaller
from agentrio.engine.compaction import call_model
from agentrio.engine.models.base import Message, ModelReply, ToolCallRequest, ToolSpec
from agentrio.engine.tools.base import ToolContext, ToolOutcome
from agentrio.engine.tools.registry import Toolbox
from agentrio.protocol import events as ev
from agentrio.protocol.events import Question

__all__ = ["Agent", "Ending", "Failed", "Finished", "Parked", "Shape", "turns"]


@attrs.frozen
class Finished:
    """The model answered without calling a tool: ``text`` is its final answer."""

    text: str


@attrs.frozen
class Parked:
    """A call parked the agent on ``questions`` (R11); only an agent whose shape parks."""

    questions: list[Question]


@attrs.frozen
class Failed:
    error: str
    kept: bool = False  #: a task kept resumable, not ended (`agentrio.engine.runs`)


Ending = Finished | Parked | Failed


@attrs.frozen(kw_only=True)
class Shape:
    """How an agent turns the loop, fixed for its kind."""

    #: What it is called in its turn-limit failure ("task", "sub-agent").
    noun: str
    #: Whether its text is streamed to people as ``text`` events.
    streams: bool
    #: Whether a call may park it (R11); an agent that may not gets the call's outcome
    #: in `Agent.result` like any other.
    parks: bool


class Agent(ModelCaller, Protocol):
    """Whoever turns the loop: what the model call needs of it (`ModelCaller`: its
    system prompt, messages, earlier conversation, usage counter and events) and what
    it does at each step of a turn."""

    #: Calls of the current turn not finished yet: "interrupted" if it stops now.
    open_calls: list[ToolCallRequest]

    @property
    def shape(self) -> Shape: ...

    def tool_context(self) -> ToolContext:
        """What the tools of its next turn get (a fresh "allow this turn" set)."""
        ...

    def take_input(self) -> bool:
        """Add the input that arrived since its last turn (steers, reports) to its
        messages; True when there was some."""
        ...

    def replied(self, reply: ModelReply) -> None:
        """Its model answered ``reply`` (already in its messages)."""
        ...

    def calling(self, call: ToolCallRequest) -> None:
        """``call`` is about to run."""
        ...

    def result(self, call: ToolCallRequest, outcome: ToolOutcome) -> str:
        """``call`` ended with ``outcome``; returns the result as its model reads it."""
        ...


async def turns(agent: Agent, toolbox: Toolbox, *, max_turns: int) -> Ending:
    """Turn ``agent``'s loop from the messages it holds to its ending (module docstring).

    Each turn takes the input waiting, offers the tools its context allows, calls the
    model, then runs the calls the reply asks for, in order, each result going back to
    the model; a reply with no calls ends it, unless input arrived meanwhile."""
    for _turn in range(max_turns):
        agent.take_input()
        ctx = agent.tool_context()
        reply = await _reply(agent, [tool.spec() for tool in toolbox.available(ctx)])
        agent.messages.append(reply.to_message())  # provider items ride along (base.py)
        agent.replied(reply)
        if not reply.tool_calls:
            if agent.take_input():  # a steer or a report that arrived just now
                continue
            return Finished(reply.text)
        park = await _calls(agent, toolbox, ctx, reply.tool_calls)
        if park is not None:
            return Parked(park)
    return Failed(f"the {agent.shape.noun} took more than {max_turns} turns")


async def _reply(agent: Agent, tools: Sequence[ToolSpec]) -> ModelReply:
    """One model call; a streaming agent's text reaches people as it comes (or whole,
    from a model that streamed none)."""
    if not agent.shape.streams:
        return await call_model(agent, tools)
    streamed: list[str] = []

    async def on_text(delta: str) -> None:
        streamed.append(delta)
        agent.emit(ev.Text, text=delta)

    reply = await call_model(agent, tools, on_text=on_text)
    if reply.text and not streamed:
        agent.emit(ev.Text, text=reply.text)
    return reply


async def _calls(
    agent: Agent, toolbox: Toolbox, ctx: ToolContext, calls: list[ToolCallRequest]
) -> list[Question] | None:
    """Run one reply's ``calls`` in order; returns the questions one parked on, if any
    (the calls after it still run: they were asked for in the same turn)."""
    park: list[Question] | None = None
    agent.open_calls = list(calls)
    for call in calls:
        agent.calling(call)
        outcome = await toolbox.execute(ctx, call)
        agent.open_calls.remove(call)
        if outcome.park is not None and agent.shape.parks:
            park = outcome.park
            continue
        content = agent.result(call, outcome)
        agent.messages.append(
            Message(role="tool", content=content, tool_call_id=call.id, name=call.name)
        )
        await ctx.calls.settled(call)  # recorded: no longer in flight in the store either
    return park
