"""What a tool is, what it gets to know about its task, what it returns, and the
services it may use.

A tool never sees the run it works for (`agentrio.engine.runs.TaskRun`, mutable and full of
the agent loop's own state): it gets a `ToolContext`, one per turn, holding the task's
names and flags and the few things a tool may really change -- the home's remembered
rules (`ToolContext.rules`), the turn's "allow this turn" set -- plus callables to emit
an event, cancel the task with a cause, or record answers for the task's snapshot.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, Protocol, TypeVar

import attrs
import trio

from agentrio.engine.asks import AskKind, AskReply, AskRequest
from agentrio.engine.errors import AskFailed
from agentrio.engine.models.base import ToolCallRequest, ToolSpec
from agentrio.engine.rules import RuleBook
from agentrio.engine.snapshot import QA
from agentrio.engine.tools.in_flight import CallLedger, asked_only, asking
from agentrio.protocol import events as ev
from agentrio.protocol import wording
from agentrio.protocol.causes import Cause
from agentrio.protocol.events import Event, Question, TokenUsage, ToolDetails
from agentrio.protocol.rules import AllowedRule, RuleOffer

if TYPE_CHECKING:
    from agentrio.engine.config import Config
    from agentrio.engine.models.base import Model
    from agentrio.engine.pending import Entry, PendingRegistry
    from agentrio.engine.processes.sandbox import Sandbox
    from agentrio.engine.store.base import Store
    from agentrio.engine.tools.sudo import PasswordVerifier
    from agentrio.engine.tools.workdir import Workdir

__all__ = [
    "LEG_NEVER_ASKS",
    "Emit",
    "Reach",
    "Refused",
    "ServiceTool",
    "Services",
    "Tool",
    "ToolContext",
    "ToolOutcome",
    "declined",
    "run_tool",
    "string_arg",
]

_E = TypeVar("_E", bound=Event)

#: Why an ask of a background sub-agent's call is refused (R30): a leg never asks.
LEG_NEVER_ASKS: Final = (
    "background sub-agents never ask for confirmation or answers, so it was not run"
)
#: What the model is told when nobody can take an ask, by kind (R4, R8).
_UNHEARD: Final[Mapping[str, str]] = {
    "tool_confirm": "denied: no front-end is listening for confirmations of this session",
    "secret": "no front-end can take the secret value",
    "ask_user": "no front-end can take the question",
}
#: What the model is told when an ask was withdrawn undecided (its listener went away,
#: past its grace: R6, R79), by kind: never a person's deny (R98).
_FAILED: Final[Mapping[str, str]] = {
    "tool_confirm": "the confirmation was withdrawn before anyone decided ({})",
    "secret": "no value received: {}",
    "ask_user": "no answer received: {}",
}


def declined(reason: str) -> str:
    """What the model reads when a question or a secret ask was declined (a reply with
    ``approve`` false, from a front-end that cannot ask anyone: ``agentrio exec``)."""
    return f"not answered, declined: {reason}" if reason else "not answered, declined"


class Refused(Exception):
    """A tool call that runs nothing, and why (``reason``, the model's ``skipped``).

    `ToolContext.ask` raises it; `run_tool` turns it into the call's outcome, so a tool
    that does not catch it still refuses. A tool catches it only to say more (or, like
    ``ask_user``, to park instead)."""

    def __init__(self, reason: str, *, unheard: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        #: True when nobody could take the ask (no listener, or a background leg).
        self.unheard = unheard


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
    #: ... unless its asks are shared: offered to the session's other listeners first
    #: (R99, ``agentrio exec``), that window taking only those nobody else can.
    share_asks: bool
    #: The task runs with every confirmation given in advance.
    allow_all: bool
    #: The leg this task works for when it is a background sub-agent (R30), else None.
    subagent_of: str | None
    #: Assistant turns of this run before this one: calls of one turn share it (R21).
    turn: int
    #: Tools approved with "Allow this turn" (R74): read, and added to on approval.
    allow_turn: set[str]
    #: Where the task's commands run, a real path (``workdir.path``, R86): a relative
    #: ``cwd`` is taken from it, and a ``cd`` moves it (`agentrio.engine.workdirs`).
    workdir: Workdir
    emit: Emit
    #: Cancel the task with a cause (a confirmation's "Cancel task"/"Abort task");
    #: False when it had already ended or been cancelled.
    cancel: Callable[[Cause], bool]
    #: Record answers the user gave, for the task's snapshot (R12 "previous answers").
    add_answers: Callable[[Sequence[QA]], None]
    #: The engine's parts; `ask` goes through its registry and password verifier.
    services: Services
    #: Count a model call made for the task (an in-process sub-agent's, R80) in the
    #: task's usage and its session's (issue 31 item 7).
    count_usage: Callable[[TokenUsage], None]
    #: The task an in-process sub-agent works for (R80): its calls run inside that
    #: task's scope and their asks carry that task's hash and window. None otherwise.
    parent_task: str | None = None
    #: The in-process sub-agent's label (``sub-agent N/M: <objective>``), put on its
    #: asks and ``confirm`` events so the person sees who asks (R80); "" otherwise.
    subagent: str = ""
    #: The run's calls in flight and those of the stopped run it resumes (issue 34
    #: item 5, `agentrio.engine.tools.in_flight`); an in-process sub-agent shares it.
    calls: CallLedger = attrs.field(factory=CallLedger)
    #: The person's answers in this task so far, oldest first (R12 "previous
    #: answers", a resume's last): an MCP server's form asked again after its task
    #: parked on it is answered from them (`agentrio.engine.mcp.elicit`).
    answered: Sequence[QA] = ()

    async def ask(
        self,
        kind: AskKind,
        *,
        tool_name: str = "",
        tool_args: Mapping[str, Any] | None = None,
        questions: Sequence[Question] = (),
        restricted: bool = False,
        subagent: str | None = None,
        offers: Sequence[AllowedRule] = (),
        details: ToolDetails | None = None,
    ) -> AskReply:
        """Ask the person of this task, the one door every tool goes through (R1-R8).

        ``kind`` is ``"tool_confirm"`` (approve ``tool_name`` called with ``tool_args``,
        exactly as shown), ``"secret"`` (one hidden field: ``questions[0]``, the key in
        ``tool_args["key"]``) or ``"ask_user"`` (``questions``). ``restricted`` marks a
        confirmation touching a restricted path: the system password is asked unless
        cached, and checked here (R7). ``subagent`` labels who asks (default: this
        context's in-process sub-agent, R80). ``offers``: rules offered as choices of
        their own (R92; one picked is kept, stamped). ``details``: its effect (issue 32).

        In order: a background leg never asks (R30) and nobody listening (R4) refuse;
        the ask is registered and announced to event followers (``confirm`` or
        ``secret_ask``, before anyone can answer); a failed ask (R6) refuses; a stop
        choice cancels the task with its cause and raises `trio.Cancelled`; a denied
        confirmation or a wrong password refuses. Every refusal is `Refused`, which
        `run_tool` turns into the call's "not run" outcome. What returns is the reply
        to act on: for a confirmation, an approval (its ``remember``/``allow_turn``
        are the tool's to apply)."""
        registry = self.services.registry
        verifier = self.services.verifier
        need_password = restricted and not await verifier.credentials_cached()
        request = AskRequest(
            kind=kind,
            session_id=self.session_id,
            task_hash=self.task_hash,
            window_hash=self.window_hash,
            shared=self.share_asks,
            tool_name=tool_name,
            tool_args=dict(tool_args or {}),
            questions=list(questions),
            restricted=restricted,
            need_password=need_password,
            subagent=self.subagent if subagent is None else subagent,
            offers=[RuleOffer(kind=rule.kind, covers=rule.covers) for rule in offers],
            details=details,
        )
        if self.subagent_of is not None:
            raise Refused(LEG_NEVER_ASKS, unheard=True)
        if not registry.has_listener(self.session_id, request):
            raise Refused(_UNHEARD[kind], unheard=True)
        entries: list[Entry] = []

        def announce(entry: Entry) -> None:
            entries.append(entry)
            self._announce(request, entry.id)

        try:
            reply = await asking(registry.ask(request, on_registered=announce))
        except AskFailed as exc:
            raise Refused(_FAILED[kind].format(exc)) from None
        await self._honour_stop(reply.stop)
        if kind != "tool_confirm":
            return reply
        if not reply.approve:
            raise Refused(wording.denied(reply.reason, reply.denied_by))
        if need_password:
            ok, error = (
                await verifier.verify(reply.password)
                if reply.password
                else (False, "no password entered")
            )
            registry.report_verify(entries[0], ok, error)
            if not ok:
                raise Refused(f"denied: system password check failed ({error})")
        chosen = next((rule for rule in offers if rule.kind == reply.rule), None)
        if chosen is not None:
            await self.rules.add(attrs.evolve(chosen, added_at=self.services.clock()))
        return reply

    @property
    def rules(self) -> RuleBook:
        """The home's remembered rules (R76, R92): `RuleBook.covering` before asking,
        `RuleBook.add` on a "remember"."""
        return RuleBook(self.services.store)

    def _announce(self, request: AskRequest, confirm_hash: str) -> None:
        """The event that tells front-ends following events (the web page) of an ask;
        a secret's names the key, never a value. ``ask_user`` questions have none."""
        if request.kind == "tool_confirm":
            self.emit(
                ev.Confirm,
                confirm_hash=confirm_hash,
                tool_name=request.tool_name,
                args=request.tool_args,
                restricted=request.restricted,
                subagent=request.subagent,
                offers=request.offers,
                details=request.details,
            )
        elif request.kind == "secret":
            self.emit(
                ev.SecretAsk,
                confirm_hash=confirm_hash,
                key=str(request.tool_args.get("key", "")),
                text=request.questions[0].text,
                subagent=request.subagent,
            )

    async def _honour_stop(self, stop: Cause | None) -> None:
        """Carry out an ask reply's stop choice (`ask` does, for every ask): the task
        is cancelled with that cause ("Stop and discard": ``user_canceled``, "Stop,
        keep to resume": ``user_aborted``); then this raises `trio.Cancelled` at once,
        so nothing after the ask runs and the run's exit path decides the rest.
        ``None`` (no stop chosen) returns at once."""
        if stop is None:
            return
        asked_only()  # stopped from its own confirmation: the call never ran
        self.cancel(stop)
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
    #: Typed details for front-ends (``tool_result.details``): what ``output`` says
    #: in prose for the model, so that no renderer parses it back.
    details: ToolDetails | None = None


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


@attrs.frozen(kw_only=True)
class Reach:
    """What a tool declares about where it may run (see the module docstring).

    ``unasked``: some of its calls run with no person asked (a read-only command in
    the sandbox, a history lookup); False when every call asks (``ask_user``,
    ``store_secret``, an MCP tool without a rule). ``in_subagents``: offered to
    in-process sub-agents (R80), whose asks go to the parent's window.
    ``in_legs``: offered to background sub-agents' runs (R30), which never ask."""

    unasked: bool
    in_subagents: bool
    in_legs: bool


class Tool(Protocol):
    """A tool: its ``name`` and schema (``spec``), where it may run (``reach``,
    `agentrio.engine.tools.registry`), whether this call's run may use it now
    (``available``), and its call (``execute``: ask through `ToolContext.ask`, raise
    `Refused` or `ValueError` to refuse, return the outcome)."""

    name: str
    reach: Reach

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


async def run_tool(tool: Tool, ctx: ToolContext, call: ToolCallRequest) -> ToolOutcome:
    """Execute one call of ``tool``: bad arguments (`ValueError`) and a refusal
    (`Refused`) become its outcome; every call goes through here."""
    try:
        with ctx.calls.running(call):
            return await tool.execute(ctx, call)
    except ValueError as exc:  # bad arguments from the model
        return ToolOutcome(ok=False, output=f"invalid call of {call.name}: {exc}")
    except Refused as refused:
        return ToolOutcome(ok=False, output="", skipped=refused.reason)


def string_arg(call: ToolCallRequest, name: str, default: str | None = None) -> str:
    """A string argument of ``call``; raises `ValueError` naming it when absent or wrong."""
    value: Any = call.args.get(name, default)
    if not isinstance(value, str):
        raise ValueError(f"argument {name!r} must be a string")
    return value
