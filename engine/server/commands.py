"""The daemon's one command layer: what each request does, whichever transport carried it.

HTTP routes (`agentrio.engine.server.app`) and WebSocket frames
(`agentrio.engine.server.ws`) used to each hold their own copy of the commands, and the
copies drifted apart (a cancel of a task not running here was a stale cancel over HTTP
and ``not_found`` over WS). Now a
transport only **decodes** its input into protocol objects, **authorizes** the caller
(what only it can know: which connection started a run, which asks it was shown, which
session a URL names) and **encodes** the result; the command itself is one method
here, so the same request gets the same outcome and the same error on both.

Every method takes decoded protocol objects (a frame, a body, ids from a path),
validates the ids it is given, and returns a protocol result object, or raises one of
`agentrio.engine.errors` — each with one error code, which the transports report as they
report any error (HTTP status + body, or an ``error`` frame).

| command | HTTP | WebSocket | result |
|---|---|---|---|
| `send` | ``POST /v1/send`` | — | `SendStarted` / `SendSteered` |
| `start` | (``POST /v1/send``) | ``run`` | the `TaskRun` |
| `resume` | ``POST …/task/{h}/resume`` | ``pending`` | the `TaskRun` |
| `steer` | (``POST /v1/send`` + ``pending_task``) | ``steer`` | — |
| `cancel` | ``POST …/cancel/{h}``, ``…/pause/{h}`` | ``cancel`` | `CancelResult` |
| `reply` | ``POST …/confirm/{id}`` | ``reply`` | — |
| `acknowledge` | ``POST …/ack/{id}`` | ``ack`` | — |
| `pending` | ``GET …/task``, ``GET /v1/pending?origin=`` | ``list_pending`` | `PendingTasks` |
| `legs` | ``GET …/legs`` | ``list_legs`` | `Legs` |
| `cancel_leg` | ``POST …/legs/{leg}/cancel`` | ``background_cancel`` | `LegCancelResult` |
| `allowed` | ``GET …/allowed`` | ``list_allowed`` | `AllowedRules` |
| `forget_allowed` | ``DELETE …/allowed/{rule}`` | ``forget_allowed`` | `AllowedRules` |
| `model` | ``GET``/``PUT …/model`` | ``set_model`` | `SessionModel` |
| `compact` | ``POST …/compact`` | ``compact`` | `Compaction` |
| `questions`, `drop`, `history`, `history_record` | ``GET``/``DELETE`` routes | — | bodies |

Listening, subscribing and event streams are not commands: they are the state of one
connection or stream, and stay with their transport.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from typing import Final

import trio

from agentrio.engine.compaction import compact_session
from agentrio.engine.core import Engine
from agentrio.engine.errors import AlreadyResolved, BadRequest, Conflict, Forbidden, NotFound
from agentrio.engine.ids import ORIGINS, check_session_id, check_task_hash
from agentrio.engine.pending import Entry, Listener
from agentrio.engine.recent import DEFAULT_RECENT, recent_exchanges
from agentrio.engine.runs import RunOrigin, TaskRun
from agentrio.engine.server.cluster import Cluster
from agentrio.engine.stops import STOP_WAIT_S
from agentrio.protocol import events as ev
from agentrio.protocol import wording
from agentrio.protocol.asks import answer_of
from agentrio.protocol.frames import (
    BackgroundCancel,
    Cancel,
    Compact,
    ForgetAllowed,
    ListAllowed,
    ListLegs,
    ListPending,
    ModelChoice,
    Reply,
    Run,
    SetModel,
    Steer,
)
from agentrio.protocol.http import (
    AllowedRules,
    CancelResult,
    Compaction,
    HistoryList,
    HistoryRecord,
    LegCancelResult,
    Legs,
    PendingTasks,
    Questions,
    RecentExchanges,
    ResumeRequest,
    SendRequest,
    SendStarted,
    SendSteered,
    SessionList,
    SessionModel,
)

__all__ = [
    "SESSION_LIST_LIMIT",
    "Authorize",
    "Commands",
    "check_ask_id",
    "check_leg_id",
    "check_rule_id",
]

#: How much longer than a receipt's own wait for legs (`STOP_WAIT_S`) an HTTP cancel
#: waits for its run to end: the run's own exit (its store write) comes first.
RECEIPT_EXTRA_S: Final = 5.0
#: At most this many session ids in one `SessionList`.
SESSION_LIST_LIMIT: Final = 500

#: Ask ids (``confirm_hash``) are 32 lowercase hex, like task hashes.
_ASK_ID: Final = re.compile(r"[0-9a-f]{32}")
#: Leg ids (``cmd_``/``sub_`` + 8 hex), or ``all`` for every leg of the session.
_LEG_ID: Final = re.compile(r"(?:cmd|sub)_[0-9a-f]{8}|all")
#: Remembered-command ids (``rule_`` + 8 hex), or ``all``.
_RULE_ID: Final = re.compile(r"rule_[0-9a-f]{8}|all")

#: A transport's check of who may answer an ask: raises `Forbidden` or `NotFound`
#: for a caller that may not, else returns the listener the answer comes through
#: (None when it comes through none, e.g. over HTTP).
Authorize = Callable[[Entry], Listener | None]


def check_ask_id(ask_id: str) -> str:
    """``ask_id`` if it has the form of an ask id, else `BadRequest`."""
    if not _ASK_ID.fullmatch(ask_id):
        raise BadRequest(f"invalid ask id {ask_id[:64]!r}: 32 lowercase hex expected")
    return ask_id


def check_leg_id(leg_id: str) -> str:
    """``leg_id`` if it names a leg (or is ``all``), else `BadRequest`."""
    if not _LEG_ID.fullmatch(leg_id):
        raise BadRequest(f"invalid leg id {leg_id[:64]!r}: cmd_/sub_ + 8 hex or 'all' expected")
    return leg_id


def check_rule_id(rule_id: str) -> str:
    """``rule_id`` if it names a remembered command (or is ``all``), else `BadRequest`."""
    if not _RULE_ID.fullmatch(rule_id):
        raise BadRequest(f"invalid rule id {rule_id[:64]!r}: rule_ + 8 hex or 'all' expected")
    return rule_id


class Commands:
    """The commands of one engine (see the module doc). Holds no state of its own, so
    any number of transports may share one."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        #: The other daemons on the same Redis (issue 21), once the server has joined
        #: them; None when alone. Asked when what a request names is not here.
        self.cluster: Cluster | None = None

    # ------------------------------------------------------------------ tasks

    async def send(self, body: SendRequest) -> SendStarted | SendSteered:
        """``POST /v1/send`` (R35): start a task (a ``chat-`` session is made when none
        is named), steer ``pending_task`` while it runs here, or resume it."""
        if body.session_id is not None:
            check_session_id(body.session_id)
        try:
            result = await self.engine.send(
                body.input,
                session_id=body.session_id,
                pending_task=body.pending_task,
                allow_all=body.allow_all,
                cwd=body.cwd,
            )
        except Conflict:
            # Claimed by a run: on another daemon, that run takes it as a steer (R35).
            if self.cluster is None or body.session_id is None or body.pending_task is None:
                raise
            session_id, task_hash = body.session_id, body.pending_task
            if not await self.cluster.control.steer(session_id, task_hash, body.input):
                raise
            return SendSteered(session_id=session_id)
        if result.steered or result.run is None:
            return SendSteered(session_id=result.session_id)
        return SendStarted(session_id=result.session_id, task_hash=result.run.task_hash)

    async def start(self, frame: Run, *, origin: RunOrigin) -> TaskRun:
        """Start a task for ``origin`` (R5, R46, R50): returns once its cancel path
        exists, before its first event."""
        return await self.engine.start_task(
            check_session_id(frame.session_id),
            frame.input,
            origin=origin,
            allow_all=frame.allow_all,
            cwd=frame.cwd or None,
        )

    async def resume(
        self,
        session_id: str,
        task_hash: str,
        body: ResumeRequest,
        *,
        origin: RunOrigin | None = None,
    ) -> TaskRun:
        """Resume a pending task as a new run (R11, R36, R37, R42): `Conflict` when a
        run holds it, `NotFound` when there is none."""
        return await self.engine.resume(
            check_session_id(session_id),
            check_task_hash(task_hash),
            answers=body.answers,
            origin=origin,
        )

    async def steer(self, frame: Steer) -> None:
        """Add text at the start of the running task's next turn (R35), on whichever
        daemon runs it: `NotFound` when none does, `BadRequest` for empty text."""
        session_id = check_session_id(frame.session_id)
        task_hash = check_task_hash(frame.task_hash)
        try:
            self.engine.steer(session_id, task_hash, frame.input)
        except NotFound:
            if self.cluster is None or not frame.input.strip():
                raise
            if not await self.cluster.control.steer(session_id, task_hash, frame.input):
                raise

    async def cancel(
        self, frame: Cancel, *, connection_id: str | None = None, receipt: bool = False
    ) -> CancelResult:
        """Cancel (cause ``user_canceled``, R40) or pause (``paused``, R41) a task.

        A task running here is cancelled (``cancelled`` is False when it was already
        ending). With ``connection_id`` only a run that connection started may be
        cancelled (R46): another raises `Forbidden`. A task *not* running here is a
        stale cancel (SPEC §7), never an error: a cancel records a ``canceled`` event
        in the named session and answers ``stale``; a pause has nothing to stop and
        records nothing. Without a session (a ``cancel`` frame may omit it) nothing
        can be recorded. Without ``connection_id`` (HTTP) a task running on another
        daemon of the cluster is cancelled there (issue 21); a connection's own runs
        are always here.

        With ``receipt`` (HTTP: the reply is the caller's only news of the stop) the
        answer waits, bounded, until the run has ended and says what the stop ended
        (``stopped``, `agentrio.engine.stops`); a ``cancel`` frame is answered at once
        and its run's ``done`` carries the receipt.
        """
        task_hash = check_task_hash(frame.task_hash)
        session_id = check_session_id(frame.session_id) if frame.session_id else None
        engine = self.engine
        if engine.find_run(task_hash, session_id) is None:
            if self.cluster is not None and connection_id is None and session_id is not None:
                elsewhere = await self.cluster.control.cancel(session_id, task_hash, frame.cause)
                if elsewhere is not None:
                    return CancelResult(cancelled=elsewhere)
            if frame.cause.keeps_pending:  # a pause (or abort) has nothing to stop here
                return CancelResult(cancelled=False)
            if session_id is not None:
                engine.record_stale_cancel(session_id, task_hash)
            return CancelResult(cancelled=False, stale=True)
        run = engine.find_run(task_hash, session_id)
        cancelled = engine.cancel(
            task_hash, frame.cause, session_id=session_id, connection_id=connection_id
        )
        if not (receipt and cancelled and run is not None):
            return CancelResult(cancelled=cancelled)
        with trio.move_on_after(STOP_WAIT_S + RECEIPT_EXTRA_S):
            return CancelResult(cancelled=True, stopped=(await run.wait_done()).stopped)
        return CancelResult(cancelled=True)

    # ------------------------------------------------------------------ asks

    async def reply(
        self,
        frame: Reply,
        *,
        authorize: Authorize,
        sessions: Collection[str] = (),
        password_ok: bool = False,
    ) -> None:
        """Answer one ask (R1, R8 B, R11). The id is checked first (`BadRequest`), then
        whether the ask is still open (`AlreadyResolved`), then the transport's
        ``authorize``; a reply to a parked question resumes its task (R37 applies).

        A confirmation's ``password`` (R7) is taken only where ``password_ok`` says the
        transport is the REPL's (a connection whose ``hello`` names it; a ``secret``
        ask's value may still come as ``password``, as older clients sent it); from
        anywhere else the reply is refused (`Forbidden`, `wording.PASSWORD_REPL_ONLY`)
        before it touches the ask, which stays open: the system password is never typed
        into a page, a chat or a script, and only the REPL passes one to ``sudo -S -v``.

        An ask of a task on another daemon (issue 21) is answered there: one shown
        here through a listener after ``authorize``, any other only when it belongs
        to one of ``sessions`` (those the caller may answer unshown: the session an
        HTTP path names, the sessions a connection subscribed to)."""
        entry = self.engine.registry.get(check_ask_id(frame.id))
        confirming = entry is None or entry.request.kind == "tool_confirm"  # not a secret
        if frame.password is not None and confirming and not password_ok:
            raise Forbidden(wording.PASSWORD_REPL_ONLY)
        if entry is None or entry.resolved:
            if self.cluster is None:
                raise AlreadyResolved(f"ask {frame.id} is already resolved or gone")
            shown = self.cluster.asks.shown(frame.id)
            via = authorize(shown) if shown is not None else None
            if via is None and not sessions:
                raise AlreadyResolved(f"ask {frame.id} is already resolved or gone")
            await self.cluster.asks.answer(frame.id, frame, via=via, sessions=sessions)
            return
        by = authorize(entry)
        await self.engine.answer(frame.id, answer_of(frame), by=by)

    async def acknowledge(
        self, ask_id: str, client: str, *, authorize: Authorize, sessions: Collection[str] = ()
    ) -> None:
        """Front-end ``client`` drew ask ``ask_id`` (issue 34, R97): its state says so.
        ``authorize`` is `reply`'s (raising for an ask the caller may not answer). An
        ask gone leaves nothing to record; one of a task on another daemon is
        acknowledged there: through the listener it was shown by here, or by session
        (one of ``sessions``, as `reply`)."""
        entry = self.engine.registry.get(check_ask_id(ask_id))
        if entry is not None and not entry.resolved:
            authorize(entry)
            self.engine.ask_life.acknowledge(entry, client)
        elif self.cluster is not None:
            shown = self.cluster.asks.shown(ask_id)
            via = authorize(shown) if shown is not None else None
            await self.cluster.asks.acknowledge(ask_id, client, via=via, sessions=sessions)

    # ------------------------------------------------------------------ queries

    async def pending(self, frame: ListPending) -> PendingTasks:
        """The actually resumable tasks (R45, R51) of the session, or of every session
        of the origin (each task then names its session). Exactly one of the two:
        `BadRequest` otherwise, or for an origin that is none of ``cli-``, ``chat-``,
        ``tg-``, ``dc-``."""
        if bool(frame.session_id) == bool(frame.origin):
            raise BadRequest("list_pending takes exactly one of session_id and origin")
        if frame.origin:
            return PendingTasks(tasks=await self.engine.pending_by_origin(frame.origin))
        return PendingTasks(tasks=await self.engine.pending_tasks(frame.session_id))

    async def sessions(self, origin: str) -> SessionList:
        """The sessions of ``origin`` that started a task (at most `SESSION_LIST_LIMIT`):
        the web page lists the daemon's ``chat-`` sessions, not only those this browser
        remembers. `BadRequest` for an origin that is none of ``cli-``, ``chat-``,
        ``tg-``, ``dc-``. No new exposure, as `pending` by origin."""
        if origin not in ORIGINS:
            raise BadRequest(f"invalid origin {origin[:64]!r}: one of {', '.join(ORIGINS)}")
        found = await self.engine.store.session_ids(origin, limit=SESSION_LIST_LIMIT)
        return SessionList(sessions=found)

    async def questions(self, session_id: str, task_hash: str) -> Questions:
        """The saved questions of a parked task (`NotFound` for an unknown task)."""
        found = await self.engine.questions(check_session_id(session_id), task_hash)
        return Questions(task_hash=task_hash, questions=found)

    async def drop(self, session_id: str, task_hash: str) -> None:
        """Delete a pending task: `NotFound` unknown, `Conflict` while it runs."""
        await self.engine.drop_pending(check_session_id(session_id), check_task_hash(task_hash))

    async def history(self, session_id: str, *, keyword: str = "", limit: int = 50) -> HistoryList:
        """Finished, failed and canceled tasks, newest first (`BadRequest` for a limit
        outside 1-500)."""
        entries = await self.engine.history(session_id, keyword=keyword, limit=limit)
        return HistoryList(tasks=entries)

    async def history_record(self, session_id: str, task_hash: str) -> HistoryRecord:
        """One run's full action record (`NotFound` for an unknown task)."""
        return await self.engine.history_record(session_id, task_hash)

    async def recent(self, session_id: str, limit: int = DEFAULT_RECENT) -> RecentExchanges:
        """The session's last exchanges, for a window reopened on it (issue 31)."""
        return await recent_exchanges(self.engine.store, check_session_id(session_id), limit)

    # ------------------------------------------------------------------ legs

    def legs(self, frame: ListLegs) -> Legs:
        """The session's queued and running background legs (R22, R47)."""
        return Legs(legs=self.engine.list_legs(frame.session_id))

    def cancel_leg(self, frame: BackgroundCancel) -> LegCancelResult:
        """Cancel one leg, or every leg of the session with ``all`` (R44): `BadRequest`
        for a malformed id, `NotFound` for an unknown leg."""
        session_id = check_session_id(frame.session_id)
        cancelled = self.engine.cancel_leg(session_id, check_leg_id(frame.leg_id))
        return LegCancelResult(cancelled=cancelled)

    # ------------------------------------------------------------------ allowed

    async def allowed(self, frame: ListAllowed) -> AllowedRules:
        """The home's remembered rules (R76, R92)."""
        return AllowedRules(rules=await self.engine.allowed(frame.session_id))

    # ------------------------------------------------------------------ model

    def model(self, frame: SetModel) -> SessionModel:
        """The session's model after choosing ``frame.name`` (none: just report it);
        `BadRequest` naming the choices for a name that is no model (issue 31)."""
        from agentrio.engine.models.catalog import DEFAULT, ModelCatalog

        session_id = check_session_id(frame.session_id)
        model = self.engine.services.model
        catalog = model if isinstance(model, ModelCatalog) else ModelCatalog(model)
        if frame.name:
            try:
                catalog.choose(session_id, frame.name)
            except KeyError:
                known = ", ".join(catalog.choices)
                raise BadRequest(f"unknown model {frame.name!r} (choose one of {known})") from None
        choices = [ModelChoice(name=n, model=m) for n, m in catalog.choices.items()]
        name = catalog.chosen(session_id) if catalog is model else DEFAULT
        return SessionModel(name=name, model=catalog.choices[name], choices=choices)

    async def compact(self, frame: Compact) -> Compaction:
        """Compact the session's conversation now (issue 31 item 3, ``/compact``): the
        session's watchers are told by a ``compacted`` event (reason ``request``,
        belonging to no task), as of a compaction a task made."""
        session_id = check_session_id(frame.session_id)
        session = self.engine.session(session_id)  # its usage counts the summary's
        summarised = await compact_session(self.engine.services, session_id, session)
        session.hub.emit("", ev.Compacted, summarised=summarised, reason="request")
        return Compaction(summarised=summarised)

    async def forget_allowed(self, frame: ForgetAllowed) -> AllowedRules:
        """Remove one remembered rule, or all with ``all`` (R76, R92): the rules left
        and those removed. `BadRequest` for a malformed id, `NotFound` for an unknown
        rule."""
        session_id = check_session_id(frame.session_id)
        left, removed = await self.engine.forget_allowed(session_id, check_rule_id(frame.rule_id))
        return AllowedRules(rules=left, removed=removed)
