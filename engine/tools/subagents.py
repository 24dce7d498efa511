"""The ``subagents`` tool: in-process sub-agents, run as children of the calling task (R80).

The model gives several objectives at once; each gets a sub-agent -- the agent loop
every task turns (`agentrio.engine.agent_loop`: model call with its retries, tool
calls, results), with its own conversation started from its objective -- and they all
run concurrently in a nursery opened *inside this tool call*, so inside the calling task's
cancel scope. That placement is the whole cancel story: a cancel, pause or abort of the
parent (`agentrio.engine.nursery_tasks.TaskHandle.cancel`, with its `Cause`) cancels every
sub-agent at once, and the parent's exit path reads that one cause. Nothing here keeps
a handle or cancels a scope of its own.

A sub-agent works through a `ToolContext` derived from the parent's:

* the same session, task hash and window, so its confirmations and questions go
  through the pending registry to the parent's front-end (R5, R78) -- and, being asked
  inside the parent's scope, they are withdrawn the moment the parent is cancelled
  (R3);
* ``parent_task`` set, which gives it a deliver target
  (`agentrio.engine.tools.base.ToolContext.deliver_to`): its result goes to the parent, so it
  gets no background tools and no ``subagents`` (R20): their `Reach` keeps them from
  sub-agents (`agentrio.engine.tools.registry`);
* ``subagent``, its label (``sub-agent N/M: <objective>``), carried by its asks and
  ``confirm`` events so the person sees who is asking;
* the parent's ``cancel`` (a confirmation's "Cancel task" / "Abort task" stops the
  parent and with it every sibling) and ``add_answers`` (answers join the parent's
  snapshot), and a fresh "allow this turn" set per sub-agent turn.

A sub-agent emits few events of its own: the ``confirm`` of its calls, and the
``retrying`` of its model calls and a ``compacted`` (its own older results elided on a
context-length refusal), each labelled with it. Its tool calls are not the parent's,
and their ids would clash with the parent's and each other's. Its model calls' usage
counts in the parent task's (`ToolContext.count_usage`). What it did comes back in
the result: when all have ended, one result holds a section per sub-agent (status,
calls made, final answer), each clamped to an equal share of ``[tools]
max_result_bytes`` so a verbose sub-agent cannot push its siblings out; the run clamps
the whole once more like any result (R11, R24).

A sub-agent that fails (model error, too many turns) fails alone; its siblings go on.
"""

from __future__ import annotations

import json
import logging
from typing import Any, Final, TypeVar

import attrs
import trio

from agentrio.engine.agent_loop import Failed, Finished, Shape, turns
from agentrio.engine.conversation import Calibration, StoredConversation
from agentrio.engine.messages import (
    SUBAGENT_CANNOT_PARK,
    SUBAGENTS_RESULT_HEADER,
    SUBAGENTS_TOOL,
    subagent_label,
    subagent_section,
)
from agentrio.engine.models.base import Message, ModelError, ModelReply, ToolCallRequest, ToolSpec
from agentrio.engine.snapshot import clamp
from agentrio.engine.system_prompt import Surroundings, subagent_prompt, surroundings
from agentrio.engine.tools.base import Reach, Services, ServiceTool, ToolContext, ToolOutcome
from agentrio.engine.tools.registry import Toolbox
from agentrio.engine.tools.workdir import Workdir
from agentrio.protocol.events import Event, SubagentEnd, TokenUsage, ToolDetails

__all__ = ["MAX_SUBAGENTS", "SubagentsTool"]

log = logging.getLogger("agentrio.subagents")

_E = TypeVar("_E", bound=Event)

#: The most sub-agents one call may start: each is a concurrent model conversation.
MAX_SUBAGENTS: Final = 8
#: Room for one ``\n...[N bytes elided]...\n`` marker of `clamp`.
_MARKER_BYTES: Final = 40
#: How much of one sub-agent call's output its ``calls:`` line keeps.
_CALL_LINE_CHARS: Final = 160


class SubagentsTool(ServiceTool):
    """See the module docstring. ``tools`` is the engine's toolbox; a sub-agent is
    offered what each tool's `Reach` allows it (no background tools, no ``subagents``:
    a sub-agent's sub-agents would report to a helper, never to a person)."""

    name = SUBAGENTS_TOOL
    reach = Reach(unasked=True, in_subagents=False, in_legs=False)  # R20

    def __init__(self, services: Services, tools: Toolbox) -> None:
        super().__init__(services)
        self._tools = tools

    def spec(self) -> ToolSpec:
        return ToolSpec(
            name=self.name,
            description=(
                "Start several sub-agents at once, one per objective, and wait for all of "
                "them; their final answers come back together as this call's result. Each "
                "works on its own objective with the usual tools; its confirmations and "
                "questions go to the user labelled with the sub-agent. Sub-agents cannot "
                f"start background work or further sub-agents. At most {MAX_SUBAGENTS}."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "objectives": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "One objective per sub-agent, each understandable alone.",
                    }
                },
                "required": ["objectives"],
            },
        )

    async def execute(self, ctx: ToolContext, call: ToolCallRequest) -> ToolOutcome:
        objectives = _objectives(call.args)
        labels = [subagent_label(i, len(objectives), o) for i, o in enumerate(objectives)]
        results: list[SubagentEnd | None] = [None] * len(objectives)
        place = await surroundings(self._services, ctx.origin, ctx.workdir.path)

        async def one(index: int) -> None:
            results[index] = await self._run_one(ctx, place, labels[index], objectives[index])

        # The children live in this call, so in the parent's scope (R80).
        async with trio.open_nursery() as nursery:
            for index in range(len(objectives)):
                nursery.start_soon(one, index)
        ended = [result for result in results if result is not None]
        share = _share(self._services.config.tools.max_result_bytes, len(ended))
        sections = [
            clamp(
                subagent_section(
                    label=r.label, status=r.status, error=r.error, final=r.final, calls=r.calls
                ),
                share,
            )
            for r in ended
        ]
        return ToolOutcome(
            ok=all(r.status == "finished" for r in ended),
            output="\n\n".join([SUBAGENTS_RESULT_HEADER, *sections]),
            details=ToolDetails(subagents=ended),
        )

    async def _run_one(
        self, parent: ToolContext, place: Surroundings, label: str, objective: str
    ) -> SubagentEnd:
        """One sub-agent through the agent loop; a failure ends it alone. Cancellation
        is not caught: it belongs to the parent's exit path. Its system prompt is a
        task's, told it is this sub-agent (`agentrio.engine.system_prompt`), with the
        tools of its first turn."""
        agent = _Subagent(
            services=self._services,
            parent=parent,
            label=label,
            workdir=parent.workdir.for_subagent(),  # starts where the task is; moves alone
            messages=[Message(role="user", content=objective)],
        )
        agent.system = subagent_prompt(place, self._tools.available(agent.tool_context()), label)
        try:
            ending = await turns(agent, self._tools, max_turns=self._services.config.max_turns)
        except ModelError as exc:
            error = f"model error: {exc}"
        except Exception as exc:
            log.exception("sub-agent %r of task %s failed", label, parent.task_hash)
            error = f"internal error: {type(exc).__name__}: {exc}"
        else:
            if isinstance(ending, Finished):
                return SubagentEnd(
                    label=label, status="finished", final=ending.text, calls=agent.calls
                )
            error = ending.error if isinstance(ending, Failed) else SUBAGENT_CANNOT_PARK
        return SubagentEnd(label=label, status="failed", error=error, calls=agent.calls)


@attrs.define(eq=False)
class _Subagent:
    """One in-process sub-agent as the agent loop sees it (`agentrio.engine.agent_loop.Agent`).

    It starts from its objective alone (no earlier conversation: ``stored`` None),
    streams nothing, and never parks its parent: a call that would is "not run". Its
    events are its parent's, labelled (``retrying``, ``compacted``: the only ones the
    loop emits for an agent that does not stream); its usage counts in its parent's.
    """

    services: Services
    parent: ToolContext
    label: str
    workdir: Workdir
    messages: list[Message]
    system: str = ""
    context: list[Message] = attrs.field(factory=list)
    stored: StoredConversation | None = None
    open_calls: list[ToolCallRequest] = attrs.field(factory=list)
    calibration: Calibration = attrs.field(factory=Calibration)
    #: A line per call made (`_call_line`), for the parent's result.
    calls: list[str] = attrs.field(factory=list)
    usage: TokenUsage = attrs.field(factory=TokenUsage)

    shape = Shape(noun="sub-agent", streams=False, parks=False)

    @property
    def session_id(self) -> str:
        return self.parent.session_id

    def emit(self, kind: type[_E], **fields: Any) -> _E:
        return self.parent.emit(kind, subagent=self.label, **fields)

    def count(self, used: TokenUsage) -> None:
        self.usage = self.usage + used
        self.parent.count_usage(used)

    def tool_context(self) -> ToolContext:
        """The parent's context, as this sub-agent's (module docstring), for one turn."""
        return attrs.evolve(
            self.parent,
            workdir=self.workdir,
            parent_task=self.parent.task_hash,
            subagent=self.label,
            turn=sum(1 for message in self.messages if message.role == "assistant"),
            allow_turn=set(),
        )

    def take_input(self) -> bool:
        return False  # nobody steers a sub-agent

    def replied(self, reply: ModelReply) -> None:
        pass

    def calling(self, call: ToolCallRequest) -> None:
        pass

    def result(self, call: ToolCallRequest, outcome: ToolOutcome) -> str:
        """The call's result as its model reads it, clamped like a task's."""
        if outcome.park is not None:
            content = f"not run: {SUBAGENT_CANNOT_PARK}"
        elif outcome.skipped:
            content = f"not run: {outcome.skipped}"
        else:
            content = clamp(outcome.output, self.services.config.tools.max_result_bytes)
        self.calls.append(_call_line(call, content))
        return content


def _objectives(args: dict[str, Any]) -> list[str]:
    raw = args.get("objectives")
    if isinstance(raw, str):
        raw = [raw]
    if not isinstance(raw, list) or not raw or not all(isinstance(v, str) for v in raw):
        raise ValueError("argument 'objectives' must be a non-empty list of strings")
    values = [value.strip() for value in raw]
    if not all(values):
        raise ValueError("argument 'objectives' must not hold empty strings")
    if len(values) > MAX_SUBAGENTS:
        raise ValueError(f"at most {MAX_SUBAGENTS} objectives per call, got {len(values)}")
    return values


def _share(limit: int, count: int) -> int:
    """The bytes each of ``count`` sections may keep so that the whole result --
    header, separators and each section's elision marker included -- fits ``limit``
    and the run's own clamp leaves it whole."""
    room = limit - len(SUBAGENTS_RESULT_HEADER) - count * (2 + _MARKER_BYTES)
    return max(0, room // max(1, count))


def _call_line(request: ToolCallRequest, content: str) -> str:
    """``run_command {"command": "ls"} → exit 0``: the call and the first line of its
    result, short; the full result stayed with the sub-agent's model."""
    args = json.dumps(request.args, ensure_ascii=False)
    first = content.strip().splitlines()[0] if content.strip() else "(empty)"
    line = f"{request.name} {args} → {first}"
    return line if len(line) <= _CALL_LINE_CHARS else line[: _CALL_LINE_CHARS - 1] + "…"
