"""One task's run: its start, its turns and its single exit path.

A run goes: write its row and online marker, say "started" (its cancel path now
exists, R46/R50), wait for a session slot, then turns — model call, tool calls,
results, the one loop every agent turns (`agentrio.engine.agent_loop`, configured by
`TaskRun`'s side of it) — until the model stops calling tools, the task parks on a
question, fails, or is cancelled.

However it ends, `_finish` is the one place that decides what becomes of the task's
pending record, from the outcome or the handle's `Cause` (R40, R41, R45):

| end | history | pending record | final event |
|---|---|---|---|
| finished | finished | deleted | ``done`` |
| parked (R11) | — | kept, with questions | ``pending`` |
| failed on the model (R62) | — | kept, resumable, with why | ``failed`` (``kept``) |
| failed otherwise | failed | deleted | ``failed`` |
| cancel, ``user_canceled`` | canceled, ``[Canceled]`` | deleted | ``canceled`` |
| cancel, any other cause | — | kept, resumable | ``canceled`` |
| the same, while a question was open | — | kept, with that question (R13) | ``canceled`` |

A model failure (issue 31 item 6) keeps the task with why (``Snapshot.failure``); its
resume calls the model again (R37). A background sub-agent's run fails for good.

A confirmation open at such a cancel is never an approval (R6): its call stays
*interrupted* in the snapshot, so the resumed task proposes it again and it asks again.
"""

from __future__ import annotations

import json
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, Literal, TypeVar

import attrs
import trio

from agentrio.engine.agent_loop import Ending, Failed, Finished, Parked, Shape, turns
from agentrio.engine.compaction import load_context
from agentrio.engine.conversation import (
    Calibration,
    StoredConversation,
    close_open_calls,
    exchange_json,
)
from agentrio.engine.kept_questions import open_questions
from agentrio.engine.markers import MARKER_TTL_S, keep_marker_alive
from agentrio.engine.messages import CANCELED_REPLY, resume_message, resume_said
from agentrio.engine.models.base import Message, ModelError, ModelReply, ToolCallRequest
from agentrio.engine.models.catalog import session_model
from agentrio.engine.nursery_tasks import TaskHandle, cancel_scope
from agentrio.engine.pending import AskRequest
from agentrio.engine.sessions import Session
from agentrio.engine.snapshot import (
    QA,
    CompletedCall,
    InterruptedCall,
    Snapshot,
    clamp,
    make_snapshot,
    snapshot_to_json,
)
from agentrio.engine.store.base import HistoryRow, StoreError, TaskRow
from agentrio.engine.system_prompt import task_prompt
from agentrio.engine.tools.ask_user import ask_inline
from agentrio.engine.tools.base import Services, Tool, ToolContext, ToolOutcome, run_tool
from agentrio.engine.tools.in_flight import CallLedger
from agentrio.engine.tools.registry import Toolbox
from agentrio.engine.tools.workdir import Workdir
from agentrio.protocol import events as ev
from agentrio.protocol import wording
from agentrio.protocol.causes import Cause
from agentrio.protocol.events import Question, TokenUsage
from agentrio.protocol.frames import DoneStatus, done_status
from agentrio.protocol.stops import StopReceipt

__all__ = [
    "PreludeCall",
    "RunOrigin",
    "TaskOutcome",
    "TaskRun",
    "execute_task",
    "resume_input",
]

log = logging.getLogger("agentrio.runs")

_E = TypeVar("_E", bound=ev.Event)


@attrs.frozen
class RunOrigin:
    """Who started a run: the connection (for cancel rights and disconnects, R43, R46)
    and the REPL window (asks route only to it, R5). Empty for HTTP-started runs.
    ``share_asks``: the window takes its asks only when no other listener of the
    session can (R99, ``agentrio exec``)."""

    connection_id: str = ""
    window_hash: str = ""
    share_asks: bool = False


@attrs.frozen
class PreludeCall:
    """A call a run makes before its model's first turn, for someone other than its
    model: a job's follow-up offers the commands its background sub-agents could not
    run (R84, `agentrio.engine.tools.run_commands`).

    It runs through ``tool`` (which need not be offered to the model), inside the run's
    scope, announced and recorded like any call (so a stop while it runs leaves it
    *interrupted*); ``section(result)`` is then added to the run's first message, where
    the model reads it."""

    tool: Tool
    call: ToolCallRequest
    section: Callable[[str], str]


@attrs.frozen
class TaskOutcome:
    status: DoneStatus
    error: str = ""
    cause: Cause | None = None
    text: str = ""
    kept: bool = False  #: a ``failed`` task kept resumable (module docstring)
    stopped: StopReceipt | None = None  #: what a cancel or pause ended (`agentrio.engine.stops`)


@attrs.define(eq=False)
class TaskRun:
    """The live state of one task in this process."""

    services: Services
    session: Session[TaskRun]
    task_hash: str
    #: The original objective (the first input), kept across resumes.
    objective: str
    #: The first user message of this run (the input, or a resume message).
    input: str
    origin: RunOrigin
    handle: TaskHandle
    #: Where this run's commands run (`agentrio.engine.workdirs`): ``workdir.path``.
    workdir: Workdir
    allow_all: bool = False
    resumed_from: str | None = None
    #: A resumed run's ``task_started.said``: what the person did (`resume_said`).
    said: str = ""
    created_at: float = 0.0
    previous_answers: list[QA] = attrs.field(factory=list)
    messages: list[Message] = attrs.field(factory=list)
    steers: deque[str] = attrs.field(factory=deque)
    #: Background reports waiting to be added at the start of the next turn (R26).
    reports: deque[str] = attrs.field(factory=deque)
    completed: list[CompletedCall] = attrs.field(factory=list)
    #: Calls of the current turn not finished yet: "interrupted" if the run stops now.
    open_calls: list[ToolCallRequest] = attrs.field(factory=list)
    record: list[str] = attrs.field(factory=list)
    queued: bool = True
    last_error: str = ""
    reasoning: str = ""
    outcome: TaskOutcome | None = None
    #: Set when a parked task is resumed without answers: its questions are asked
    #: inline first (R42).
    resume_snapshot: Snapshot | None = None
    #: Called once the outcome is recorded (background jobs hook in here, R44).
    on_end: list[Callable[[TaskRun], Awaitable[None]]] = attrs.field(factory=list)
    #: The leg this run works for when it is a background sub-agent (R30): it gets no
    #: background tools and asks no questions; a call that needs a confirmation is not
    #: run. None for tasks that run for themselves.
    subagent_of: str | None = None
    #: Calls made before the model's first turn (`PreludeCall`); emptied once made.
    prelude: list[PreludeCall] = attrs.field(factory=list)
    #: The system prompt every model call of this run starts with
    #: (`agentrio.engine.system_prompt`), made when its turns begin.
    system: str = ""
    #: The session's earlier conversation as this run sends it, and what it was fitted
    #: from (None: the run sees no earlier conversation), `agentrio.engine.compaction`.
    context: list[Message] = attrs.field(factory=list)
    stored: StoredConversation | None = None
    #: What this run's model calls consumed.
    usage: TokenUsage = attrs.field(factory=TokenUsage)
    #: Its calls in flight, and what the stopped run it resumes left in flight (issue 34).
    calls: CallLedger = attrs.field(factory=CallLedger)

    @property
    def session_id(self) -> str:
        return self.session.id

    def emit(self, kind: type[_E], **fields: Any) -> _E:
        return self.session.hub.emit(self.task_hash, kind, **fields)

    def tool_context(self) -> ToolContext:
        """What the tools of this run's next turn get to know and do (a fresh
        "allow this turn" set each turn)."""
        return ToolContext(
            session_id=self.session.id,
            task_hash=self.task_hash,
            origin=self.session.origin,
            window_hash=self.origin.window_hash,
            share_asks=self.origin.share_asks,
            allow_all=self.allow_all,
            subagent_of=self.subagent_of,
            turn=sum(1 for message in self.messages if message.role == "assistant"),
            allow_turn=set(),
            workdir=self.workdir,
            emit=self.emit,
            cancel=self.handle.cancel,
            add_answers=self.previous_answers.extend,
            services=self.services,
            answered=self.previous_answers,
            calls=self.calls,
            count_usage=self.count,
        )

    async def wait_done(self) -> TaskOutcome:
        await self.handle.wait_finished()
        assert self.outcome is not None
        return self.outcome

    # What the agent loop asks of a task (`agentrio.engine.agent_loop.Agent`): it
    # streams its text, announces and records each call, takes steers and reports
    # between turns, and may park on a question.
    shape = Shape(noun="task", streams=True, parks=True)

    @property
    def calibration(self) -> Calibration:
        return self.session.calibration

    def count(self, used: TokenUsage) -> None:
        self.usage = self.usage + used
        self.session.usage = self.session.usage + used

    def take_input(self) -> bool:
        """Add steers and background reports waiting (R26, R35); True if any."""
        taken = bool(self.steers or self.reports)
        while self.steers:
            text = self.steers.popleft()
            self.emit(ev.SteerInjected, text=text)
            self.messages.append(Message(role="user", content=text))
            self.record.append(f"user (steer): {text}")
        while self.reports:
            text = self.reports.popleft()
            self.messages.append(Message(role="user", content=text))
            self.record.append(f"report: {text}")
        return taken

    def replied(self, reply: ModelReply) -> None:
        if reply.reasoning:
            self.reasoning = reply.reasoning
        if reply.text:
            self.record.append(f"assistant: {reply.text}")

    def calling(self, call: ToolCallRequest) -> None:
        self.emit(ev.ToolCall, call_id=call.id, tool_name=call.name, args=call.args)

    def result(self, call: ToolCallRequest, outcome: ToolOutcome) -> str:
        return _record(self, call, outcome)


async def execute_task(
    run: TaskRun, toolbox: Toolbox, *, task_status: trio.TaskStatus[None]
) -> None:
    """Run ``run`` inside its handle's scope (the supervisor entered it) to its end."""
    services = run.services
    ending: Ending | None = None
    stored = False
    try:
        # Stored, alive and the session's latest task (R36) in one write (a resumed
        # run's claim already did the first two, but this row carries the new run's
        # origin and model).
        await services.store.put_task(
            _row(run, "running"), marker_expires_at=services.clock() + MARKER_TTL_S, latest=True
        )
        stored = True
        run.calls.journal = partial(_journal, run)  # issue 34 item 5: calls in flight, durably
        task_status.started()
        run.emit(
            ev.TaskStarted,
            input=run.input,
            origin=run.session.origin,
            resumed_from=run.resumed_from,
            said=run.said,
        )
        run.record.append(_user_line(run))
        async with trio.open_nursery() as nursery:
            nursery.start_soon(
                partial(
                    keep_marker_alive,
                    services.store,
                    run.session_id,
                    run.task_hash,
                    clock=services.clock,
                )
            )
            try:
                async with run.session.slots:
                    run.queued = False
                    ending = await _turns(run, toolbox)
            except ModelError as exc:
                ending = Failed(f"model error: {exc}", kept=run.subagent_of is None)
            except Exception as exc:
                log.exception("task %s failed", run.task_hash)
                ending = Failed(f"internal error: {type(exc).__name__}: {exc}")
            finally:
                cancel_scope(nursery.cancel_scope, Cause.SUPERSEDED)
    finally:
        # Shielded, not time-boxed: the store's own busy timeout bounds it, and a
        # deadline here would also fire under a test's autojumping mock clock while
        # the store works in its thread.
        with trio.CancelScope(shield=True):
            if stored:
                await _finish(run, ending)
            else:  # never accepted (its row could not be written): leave nothing behind
                await _forget(run)


async def _forget(run: TaskRun) -> None:
    """End a run whose first write failed: its sender got the store's error, so no row,
    history or kept task may appear for it (issue 18)."""
    run.outcome = TaskOutcome(status="failed", error="the task could not be stored")
    run.session.runs.pop(run.task_hash, None)
    for hook in run.on_end:
        try:
            await hook(run)
        except Exception:
            log.exception("end hook of task %s failed", run.task_hash)


def _user_line(run: TaskRun) -> str:
    """The record's line for what the person said: on a resume their answers (or
    "resumed"), never the engine's resume message, which is meant for the model and
    which the history's "Show record" showed (issue 33 item 11)."""
    return f"user: {run.said or 'resumed'}" if run.resumed_from else f"user: {run.input}"


def resume_input(run: TaskRun, snapshot: Snapshot, answers: list[str] | None) -> str:
    """The first message of a resumed run (R12); answers join ``previous_answers``."""
    run.said = resume_said(snapshot.questions, answers)
    run.calls.interrupted = [call for call in snapshot.interrupted if call.ran]  # issue 34
    if snapshot.questions and answers is not None:
        run.previous_answers.extend(
            QA(question=q.text, answer=a) for q, a in zip(snapshot.questions, answers, strict=False)
        )
        return resume_message(snapshot, answers=answers, reason="ask_user")
    return resume_message(snapshot, answers=None, reason="interrupted")


async def _turns(run: TaskRun, toolbox: Toolbox) -> Ending:
    """Set the run's first turn up -- a resumed run's saved questions asked first, its
    prelude calls made, its first message, system prompt and the session's earlier
    conversation -- and turn the agent loop (`agentrio.engine.agent_loop`) from there."""
    if run.resume_snapshot is not None:
        # Kept until answered: a run that stops while asking keeps the task exactly as
        # it was, questions and all (R13).
        snapshot = run.resume_snapshot
        answers = await ask_inline(run.tool_context(), snapshot.questions)
        if answers is None:
            return Parked(list(snapshot.questions))
        run.resume_snapshot = None
        run.input = resume_input(run, snapshot, answers)
        run.record.append(_user_line(run))
    if run.prelude:
        run.input = await _run_prelude(run)
    run.messages.append(Message(role="user", content=run.input))
    run.system = await task_prompt(run, toolbox.available(run.tool_context()))
    if run.subagent_of is None:  # a background sub-agent starts from its objective
        await load_context(run)
    return await turns(run, toolbox, max_turns=run.services.config.max_turns)


async def _run_prelude(run: TaskRun) -> str:
    """Make the run's prelude calls (`PreludeCall`) in order; returns its first message
    with each one's section added. A call stopped midway stays in ``open_calls``, so
    the task's snapshot lists it as interrupted."""
    ctx = run.tool_context()
    text = run.input
    while run.prelude:
        prelude = run.prelude.pop(0)
        call = prelude.call
        run.open_calls = [call]
        run.emit(ev.ToolCall, call_id=call.id, tool_name=call.name, args=call.args)
        outcome = await run_tool(prelude.tool, ctx, call)
        run.open_calls = []
        text = f"{text}\n\n{prelude.section(_record(run, call, outcome))}"
        await ctx.calls.settled(call)
    return text


def _record(run: TaskRun, call: ToolCallRequest, outcome: ToolOutcome) -> str:
    """Record a finished call's event, completed call and action record; returns the
    result as the model reads it (clamped, or ``not run: <why>``)."""
    limit = run.services.config.tools.max_result_bytes
    if outcome.skipped:
        run.emit(ev.ToolSkipped, call_id=call.id, tool_name=call.name, reason=outcome.skipped)
        content = f"not run: {outcome.skipped}"
    else:
        content = clamp(outcome.output, limit)
        run.emit(
            ev.ToolResult,
            call_id=call.id,
            tool_name=call.name,
            ok=outcome.ok,
            output=content,
            details=outcome.details,
        )
        if not outcome.ok:
            run.last_error = content[:500]
    run.completed.append(
        CompletedCall(call_id=call.id, tool_name=call.name, args=call.args, output=content)
    )
    run.record.append(f"tool {call.name} {json.dumps(call.args, ensure_ascii=False)}: {content}")
    return content


async def _journal(run: TaskRun) -> None:
    """Write the running task's row with its snapshot as of now: completed calls, and
    the open ones as interrupted (`agentrio.engine.tools.in_flight`), so a daemon killed
    from here on leaves it resumable knowing what was in flight. Shielded: a write
    abandoned by a stop could land after the exit path's and bring back an ended task.

    A store that cannot take the write (Redis restarting) does not stop the call: the
    task runs on through the outage as it did before this record existed (R51, R72),
    and while the store is down a killed daemon could not have kept the task anyway.
    The warning says which call went unrecorded."""
    row = _row(run, "running", snapshot=snapshot_to_json(_snapshot(run, [])))
    with trio.CancelScope(shield=True):
        try:
            await run.services.store.put_task(row)
        except StoreError as exc:
            log.warning(
                "task %s: the calls in flight were not recorded (%s); the call goes on",
                run.task_hash,
                exc,
            )


def _row(run: TaskRun, state: Literal["running", "parked", "interrupted"], **extra: Any) -> TaskRow:
    now = run.services.clock()
    return TaskRow(
        session_id=run.session_id,
        task_hash=run.task_hash,
        state=state,
        objective=run.objective,
        origin=run.session.origin,
        model=session_model(run.services.model, run.session_id).name,
        created_at=run.created_at or now,
        updated_at=now,
        snapshot=extra.pop("snapshot", None),
        questions=extra.pop("questions", []),
        has_jobs=extra.pop("has_jobs", False),
        ask_id=extra.pop("ask_id", None),
        resumed_from=run.resumed_from,
    )


def _snapshot(run: TaskRun, questions: list[Question]) -> Snapshot:
    if run.resume_snapshot is not None:  # stopped before its saved questions were answered
        kept = run.resume_snapshot
        return attrs.evolve(kept, questions=questions, reports=[*kept.reports, *run.reports])
    return make_snapshot(
        run.objective,
        run.messages,
        completed=run.completed,
        interrupted=[
            InterruptedCall(call_id=c.id, tool_name=c.name, args=c.args, ran=run.calls.ran(c))
            for c in run.open_calls
        ],
        questions=questions,
        previous_answers=run.previous_answers,
        remaining_steps="",
        reports=list(run.reports),
    )


async def _finish(run: TaskRun, ending: Ending | None) -> None:
    """The one exit path: record the outcome from ``ending`` or the handle's cause, in
    one store write (history or kept row, and the marker's deletion)."""
    try:
        match ending:
            case Finished(text):
                # The turn loop recorded the final reply already.
                await _end_in_history(run, "finished", "")
                run.emit(ev.Done, text=text, usage=run.usage, session_usage=run.session.usage)
                run.outcome = TaskOutcome(status="finished", text=text)
            case Parked(questions):
                ask_id = await _end_parked(run, questions)
                run.emit(ev.Pending, questions=questions, ask_id=ask_id)
                run.outcome = TaskOutcome(status="parked")
            case Failed(error, kept=True):
                run.last_error = error
                snapshot = attrs.evolve(_snapshot(run, []), failure=error)
                await _end_kept(run, _row(run, "interrupted", snapshot=snapshot_to_json(snapshot)))
                run.emit(ev.Failed, error=error, kept=True)
                run.outcome = TaskOutcome(status="failed", error=error, kept=True)
            case Failed(error):
                run.last_error = error
                await _end_in_history(run, "failed", f"error: {error}", note=f"[Failed: {error}]")
                run.emit(ev.Failed, error=error)
                run.outcome = TaskOutcome(status="failed", error=error)
            case None:
                cause = run.handle.cause or Cause.SHUTDOWN
                asked = (
                    open_questions(run.resume_snapshot, run.open_calls)
                    if cause.keeps_pending
                    else None
                )
                if asked is not None:  # stopped while asking: the question is kept (R13)
                    await _end_parked(run, asked)
                elif cause.keeps_pending:
                    snapshot = _snapshot(run, [])
                    await _end_kept(
                        run, _row(run, "interrupted", snapshot=snapshot_to_json(snapshot))
                    )
                else:
                    last = f"\nlast error: {run.last_error}" if run.last_error else ""
                    await _end_in_history(
                        run, "canceled", f"assistant: {CANCELED_REPLY}{last}", note=CANCELED_REPLY
                    )
                run.emit(ev.Canceled, cause=str(cause), kept=cause.keeps_pending)
                run.outcome = TaskOutcome(status=done_status(cause), cause=cause)
    except Exception as exc:  # the store failed: say so, never hang the caller
        # Nothing was reported yet (each case emits only after its write): a task whose
        # end was not recorded is reported failed, never finished (issue 18).
        log.exception("could not record the end of task %s", run.task_hash)
        if run.outcome is None:
            error = f"store error: {exc}"
            run.emit(ev.Failed, error=error)
            run.outcome = TaskOutcome(status="failed", error=error)
    finally:
        run.session.runs.pop(run.task_hash, None)
        for hook in run.on_end:
            try:
                await hook(run)
            except Exception:
                log.exception("end hook of task %s failed", run.task_hash)


async def _end_parked(run: TaskRun, questions: list[Question]) -> str:
    """Keep the task parked on ``questions`` (R11), offered to its origin's listeners;
    returns the parked ask's id."""
    snapshot = _snapshot(run, questions)
    entry = run.services.registry.offer_parked(_parked_request(run, questions))
    row = _row(
        run, "parked", snapshot=snapshot_to_json(snapshot), questions=questions, ask_id=entry.id
    )
    await _end_kept(run, row)
    return entry.id


def _parked_request(run: TaskRun, questions: list[Question]) -> AskRequest:
    return AskRequest(
        kind="ask_user",
        session_id=run.session_id,
        task_hash=run.task_hash,
        window_hash=run.origin.window_hash,
        questions=questions,
    )


async def _end_kept(run: TaskRun, row: TaskRow) -> None:
    await run.services.store.end_run(run.session_id, run.task_hash, history=None, keep=row)


async def _end_in_history(
    run: TaskRun, status: Literal["finished", "failed", "canceled"], last: str, note: str = ""
) -> None:
    """Record the run in history, with its exchange (its messages and the ``note`` a
    failure or cancel leaves) unless it is a background sub-agent's."""
    used = run.usage
    tokens = wording.usage_line(
        used.input_tokens, used.cached_input_tokens, used.output_tokens, used.cost_usd
    )
    record = [*run.record, last] if last else list(run.record)
    # A model that reports no tokens (the built-in one) leaves no usage line to read.
    reported = used.input_tokens or used.output_tokens
    content = "\n".join([*record, f"usage: {tokens}"] if reported else record)
    notes = [Message(role="assistant", content=note)] if note else []
    exchange = "" if run.subagent_of else exchange_json(close_open_calls([*run.messages, *notes]))
    history = HistoryRow(
        session_id=run.session_id,
        task_hash=run.task_hash,
        end_at=run.services.clock(),
        objective=run.objective,
        model=session_model(run.services.model, run.session_id).name,
        reasoning=run.reasoning,
        status=status,
        content=content,
        exchange=exchange,
    )
    await run.services.store.end_run(run.session_id, run.task_hash, history=history, keep=None)
