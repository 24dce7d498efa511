"""What a tool is, what it gets to know about its task, what it returns, and the
services it may use.

A tool never sees the run it works for (`agentrio.engine.runs.TaskRun`, mutable and full of
the agent loop's own state): it gets a `ToolContext`, one per turn, holding the task's
names and flags and the few things a tool may really change -- the session's
remembered commands, the turn's "allow this turn" set -- plus callables to emit an
event, cancel the task with a cause, or record answers for the task's snapshot.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import attrs
import trio

from agentrio.engine.causes import Cause
from agentrio.engine.models.base import ToolCallRequest, ToolSpec
from agentrio.engine.snapshot import QA
from agentrio.engine.tools.allowed import AllowedCommands
from agentrio.protocol.events import Event, Question

if TYPE_CHECKING:
    from agentrio.engine.config import Config
    from agentrio.engine.models.base import Model
    from agentrio.engine.pending import PendingRegistry
    from agentrio.engine.processes.sandbox import Sandbox
    from agentrio.engine.store.base import Store
    from agentrio.engine.tools.sudo import PasswordVerifier

__all__ = [
    "Emit",
    "ServiceTool",
    "Services",
    "Tool",
    "ToolContext",
    "ToolOutcome",
    "string_arg",
]

_E = TypeVar("_E", bound=Event)


class Emit(Protocol):
    """Emit one event of the task: ``emit(kind, **fields)`` numbers, stamps and fans
    it out to the session's subscribers, and returns it."""

    def __call__(self, kind: type[_E], **fields: Any) -> _E: ...


@attrs.frozen(kw_only=True, eq=False)
class ToolContext:
    """What a tool call knows about the task it works for, and may do to it.

    One is made per turn (so ``allow_turn`` starts empty each turn). It is frozen: a
    tool cannot point it elsewhere; the objects it holds are the narrow parts a tool
    changes on purpose.
    """

    session_id: str
    task_hash: str
    #: The session's origin prefix (``cli-``, ``chat-``, …; R10, R20).
    origin: str
    #: The REPL window the task was started from; asks go only there (R5).
    window_hash: str
    #: The task runs with every confirmation given in advance.
    allow_all: bool
    #: The leg this task works for when it is a background sub-agent (R30), else None.
    subagent_of: str | None
    #: Assistant turns of this run before this one: calls of one turn share it (R21).
    turn: int
    #: The session's "Always allow" commands (R76): read, and added to on a "remember".
    allowed: AllowedCommands
    #: Tools approved with "Allow this turn" (R74): read, and added to on approval.
    allow_turn: set[str]
    emit: Emit
    #: Cancel the task with a cause (a confirmation's "Cancel task"/"Abort task");
    #: False when it had already ended or been cancelled.
    cancel: Callable[[Cause], bool]
    #: Record answers the user gave, for the task's snapshot (R12 "previous answers").
    add_answers: Callable[[Sequence[QA]], None]
    #: The task an in-process sub-agent works for (R80): its calls run inside that
    #: task's scope and their asks carry that task's hash and window. None otherwise.
    parent_task: str | None = None
    #: The in-process sub-agent's label (``sub-agent N/M: <objective>``), put on its
    #: asks and ``confirm`` events so the person sees who asks (R80); "" otherwise.
    subagent: str = ""

    async def honour_stop(self, action: str | None) -> None:
        """Carry out an ask reply's stop choice: ``cancel_task`` ("Stop and discard")
        cancels the task with cause ``user_canceled``, ``abort_task`` ("Stop, keep to
        resume") with ``user_aborted``; then this raises `trio.Cancelled` at once, so
        nothing after the ask runs and the run's exit path decides the rest. ``None``
        (no stop chosen) returns at once."""
        if action is None:
            return
        self.cancel(Cause.USER_CANCELED if action == "cancel_task" else Cause.USER_ABORTED)
        await trio.lowlevel.checkpoint()

    @property
    def deliver_to(self) -> str | None:
        """The *deliver target* of this request: where its result goes when that is
        not the front-end that started it -- ``leg <id>`` for a background sub-agent
        (its report goes to the leg, R30), ``task <hash>`` for an in-process
        sub-agent (its final answer is the parent's tool result, R80); None for a
        task that runs for itself. Only ``cli-`` requests without one may start
        background legs (R20), and only requests without one may start sub-agents:
        a helper's helpers would have nobody to report to but another helper, and
        background work needs a window to come back to."""
        if self.subagent_of is not None:
            return f"leg {self.subagent_of}"
        if self.parent_task is not None:
            return f"task {self.parent_task}"
        return None


@attrs.frozen(kw_only=True)
class ToolOutcome:
    """The result of one tool call.

    ``skipped`` non-empty means the call was not run (denied, nobody to confirm, not
    available) and says why; the model sees it as the result. ``park`` asks the loop
    to park the task on these questions after the turn's other calls (R11).
    """

    output: str
    ok: bool = True
    skipped: str = ""
    park: list[Question] | None = None


@attrs.frozen(kw_only=True)
class Services:
    """The engine parts tools and runs use; one instance per engine."""

    config: Config
    store: Store
    registry: PendingRegistry
    model: Model
    verifier: PasswordVerifier
    #: Where commands nobody was asked about run (R75); inactive: every command asks.
    sandbox: Sandbox
    #: Wall clock (Unix seconds) for stored times and marker expiry; tests pass a
    #: function of `trio.current_time` so a mock clock drives TTLs.
    clock: Callable[[], float]


class Tool(Protocol):
    name: str

    def spec(self) -> ToolSpec: ...

    def available(self, ctx: ToolContext) -> bool: ...

    async def execute(self, ctx: ToolContext, call: ToolCallRequest) -> ToolOutcome: ...


class ServiceTool:
    """Base of the shipped tools: keeps the engine's `Services`; available everywhere
    unless a subclass says otherwise."""

    name: str

    def __init__(self, services: Services) -> None:
        self._services = services

    def available(self, ctx: ToolContext) -> bool:
        return True


def string_arg(call: ToolCallRequest, name: str, default: str | None = None) -> str:
    """A string argument of ``call``; raises `ValueError` naming it when absent or wrong."""
    value: Any = call.args.get(name, default)
    if not isinstance(value, str):
        raise ValueError(f"argument {name!r} must be a string")
    return value
