"""The engine facade: start, steer, cancel, resume and answer tasks.

`agentrio.engine.assembly.open_engine` builds one with its own nursery for all runs. The daemon
serves an `Engine`; tests and scripts can use one in-process (`agentrio.engine`'s example).
Nothing here is tied to a connection: a front-end passes a `RunOrigin`, and
`disconnect` cancels what that connection started with cause ``disconnected`` (R43).
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, Final

import attrs
import trio

from agentrio.engine.ask_life import AskLife, session_emitter
from agentrio.engine.background.manager import BackgroundManager
from agentrio.engine.background.routing import reoffers
from agentrio.engine.errors import BadRequest, Conflict, Forbidden, NotFound
from agentrio.engine.ids import ORIGINS, check_session_id, check_task_hash, new_task_hash
from agentrio.engine.markers import MARKER_TTL_S
from agentrio.engine.messages import CONFLICT_RUNNING, resume_said
from agentrio.engine.models.base import Model
from agentrio.engine.nursery_tasks import Supervisor, TaskHandle
from agentrio.engine.pending import AskReply, AskRequest, Entry, Listener
from agentrio.engine.rules import RuleBook
from agentrio.engine.runs import PreludeCall, RunOrigin, TaskRun, resume_input
from agentrio.engine.sessions import Session, SessionRegistry
from agentrio.engine.snapshot import Snapshot, snapshot_from_json
from agentrio.engine.stops import run_accounted
from agentrio.engine.store.base import Store, TaskRow, marker_key
from agentrio.engine.tools.base import Services
from agentrio.engine.tools.shipped import shipped_toolbox
from agentrio.engine.tools.workdir import Workdir
from agentrio.engine.workdirs import move_session, start_workdir
from agentrio.protocol import events as ev
from agentrio.protocol.causes import Cause
from agentrio.protocol.frames import AllowedRule, LegInfo, PendingTaskInfo
from agentrio.protocol.http import HistoryEntry, HistoryRecord

if TYPE_CHECKING:
    from agentrio.engine.mcp.servers import McpServers

__all__ = ["Engine", "SendResult"]

log = logging.getLogger("agentrio.engine")

#: Origins of ended runs remembered for routing their late events.
ORIGINS_KEPT: Final = 10_000
#: The most tasks one listing by origin returns (the newest).
PENDING_BY_ORIGIN_LIMIT: Final = 200
#: How long shutdown waits for runs to record their end (R53 allows 5 s in all).
SHUTDOWN_WAIT_S: Final = 3.0


@attrs.frozen
class SendResult:
    """What ``POST /v1/send`` did: started/resumed a run, or steered one (R35)."""

    session_id: str
    run: TaskRun | None = None
    steered: bool = False


class Engine:
    """Sessions, runs and the pending registry of one process. See the module doc.

    Built complete: every part (the session registry, the background manager, the
    toolboxes) exists once the constructor returns. Its loops (the idle-session sweep,
    the store's upkeep) run in ``nursery`` from `open_engine`, which is how an engine
    is made."""

    def __init__(
        self, services: Services, nursery: trio.Nursery, *, decision_model: Model | None = None
    ) -> None:
        self.services = services
        self.registry = services.registry
        self.store = services.store
        self.config = services.config
        self.started_at = time.monotonic()
        self._supervisor = Supervisor(nursery)
        #: The engine's own loops: the idle-session sweep and the store's upkeep.
        self._upkeep = Supervisor(nursery)
        #: Background jobs and legs (R20-R30); they start tasks through this engine.
        self.background = BackgroundManager(services, nursery, self, decision_model=decision_model)
        #: Every live session: made on first use, dropped once idle.
        self.sessions: SessionRegistry[TaskRun] = SessionRegistry(
            clock=services.clock,
            idle_s=self.config.server.session_idle_s,
            replay_bytes=self.config.server.replay_bytes,
            queue_bytes=self.config.server.subscriber_queue_bytes,
            idle_bytes=self.config.server.idle_sessions_bytes,
            leg_limit=self.config.background.max_tasks or None,
            holders=(self.registry, self.background),
        )
        #: Every tool (`agentrio.engine.tools.registry`): a task, an in-process
        #: sub-agent (R80) and a background leg (R30) each get what its `Reach` allows.
        self.toolbox = shipped_toolbox(services, self.background)
        #: The MCP servers (``[mcp.NAME]``, docs/mcp.md); None without any, so their
        #: code (and the SDK) is never imported then.
        self.mcp: McpServers | None = None
        if self.config.mcp:
            from agentrio.engine.mcp.servers import McpServers

            self.mcp = McpServers.for_engine(services, self.toolbox)
        #: Every open ask's state, told by the registry (issue 34, ``ask_state``).
        wait_s = self.config.server.ack_wait_s
        self.ask_life = AskLife(session_emitter(self.session), services.clock, ack_wait_s=wait_s)
        self.registry.observe = self.ask_life.changed
        self._by_connection: dict[str, set[TaskRun]] = {}
        #: Who started each recent run, kept after it ends so front-ends can route
        #: its late events (leg reports) and follow-ups to the right window.
        self._origins: OrderedDict[str, RunOrigin] = OrderedDict()

    async def start_upkeep(self) -> None:
        """Offer the questions of parked tasks again (R11) and start the engine's own
        loops; `agentrio.engine.assembly.open_engine` calls it once, `shutdown` cancels the
        loops."""
        await self.reoffer_parked()
        await self._upkeep.start(
            self.sessions.run_sweeps, handle=TaskHandle(name="idle-session sweep")
        )
        await self._upkeep.start(_maintain, self.store, handle=TaskHandle(name="store upkeep"))
        await self._upkeep.start(
            self.registry.run_graces, handle=TaskHandle(name="ask graces (R79)")
        )
        await self._upkeep.start(self.ask_life.run_late, handle=TaskHandle(name="late asks"))
        if self.mcp is not None:  # in the background: a slow server delays nothing
            await self._upkeep.start(self.mcp.run, handle=TaskHandle(name="MCP servers"))

    # ------------------------------------------------------------------ sessions

    def session(self, session_id: str) -> Session[TaskRun]:
        """The live session ``session_id`` (made, or rebuilt after it was dropped, on
        first use)."""
        return self.sessions.session(session_id)

    def find_run(self, task_hash: str, session_id: str | None = None) -> TaskRun | None:
        """The run of ``task_hash`` in this process, queued or executing."""
        if session_id is not None:
            session = self.sessions.get(session_id)
            return session.runs.get(task_hash) if session else None
        for session in self.sessions.live():
            run = session.runs.get(task_hash)
            if run is not None:
                return run
        return None

    # ------------------------------------------------------------------ starting

    async def start_task(
        self,
        session_id: str,
        text: str,
        *,
        origin: RunOrigin | None = None,
        allow_all: bool = False,
        objective: str | None = None,
        subagent_of: str | None = None,
        prelude: Sequence[PreludeCall] = (),
        cwd: str | None = None,
    ) -> TaskRun:
        """Start a task; returns once its marker is published and its cancel path is
        registered (R46, R50), before it waits for a slot.

        ``objective`` defaults to ``text`` (a background follow-up passes the job's);
        ``subagent_of`` names the leg a background sub-agent run works for (R30);
        ``prelude`` holds calls made before the model's first turn (a follow-up's
        offer of its sub-agents' commands, R84); ``cwd``: `start_workdir`."""
        if not self.session(session_id) or not text.strip():  # the id checked first
            raise BadRequest("input is empty")
        where = await start_workdir(self, session_id, cwd, leg=subagent_of is not None)
        run = self._new_run(
            self.session(session_id),  # the live one: the session may be new since the await
            new_task_hash(),
            objective or text,
            text,
            origin,
            allow_all,
            where,
            subagent_of=subagent_of,
            prelude=list(prelude),
        )
        await self._launch(run)
        return run

    def _new_run(
        self,
        session: Session[TaskRun],
        task_hash: str,
        objective: str,
        first_input: str,
        origin: RunOrigin | None,
        allow_all: bool,
        workdir: str,
        **extra: Any,
    ) -> TaskRun:
        run = TaskRun(
            services=self.services,
            session=session,
            task_hash=task_hash,
            objective=objective,
            input=first_input,
            origin=origin or RunOrigin(),
            handle=TaskHandle(name=f"task {session.id}/{task_hash}"),
            workdir=Workdir(workdir),
            allow_all=allow_all,
            created_at=self.services.clock(),
            **extra,
        )
        if run.subagent_of is None:  # a `cd` of a task for itself moves its session
            run.workdir.moved = partial(move_session, self.store, run.emit, session.id)
        return run

    def run_origin(self, task_hash: str) -> RunOrigin | None:
        """The origin of the latest run of ``task_hash`` (running or recently ended)."""
        return self._origins.get(task_hash)

    async def _launch(self, run: TaskRun) -> None:
        session = run.session
        self._origins[run.task_hash] = run.origin
        self._origins.move_to_end(run.task_hash)
        while len(self._origins) > ORIGINS_KEPT:
            self._origins.popitem(last=False)
        session.runs[run.task_hash] = run
        session.latest_task = run.task_hash
        connection = run.origin.connection_id
        if connection:
            self._by_connection.setdefault(connection, set()).add(run)
            run.on_end.append(self._forget_connection)
        run.on_end.append(self.background.on_task_end)
        run.on_end.append(self._run_ended)
        await self._supervisor.start(
            run_accounted, run, self.toolbox, self.background, handle=run.handle
        )

    async def _forget_connection(self, run: TaskRun) -> None:
        runs = self._by_connection.get(run.origin.connection_id)
        if runs is not None:
            runs.discard(run)
            if not runs:
                del self._by_connection[run.origin.connection_id]

    async def _run_ended(self, run: TaskRun) -> None:
        self.sessions.run_ended(run.session)

    async def send(
        self,
        text: str,
        *,
        session_id: str | None = None,
        pending_task: str | None = None,
        allow_all: bool = False,
        origin: RunOrigin | None = None,
        cwd: str | None = None,
    ) -> SendResult:
        """``POST /v1/send`` (R35): start a task (in ``cwd``); with ``pending_task``, steer
        it while it runs here, or resume it with ``text`` (`resume`'s ``message``)."""
        session_id = session_id or f"chat-{new_task_hash()[:12]}"
        session = self.session(session_id)
        if pending_task is None:
            run = await self.start_task(
                session_id, text, origin=origin, allow_all=allow_all, cwd=cwd
            )
            return SendResult(session_id=session_id, run=run)
        if cwd is not None:
            raise BadRequest("cwd starts a task: a steer or a resume keeps its directory")
        check_task_hash(pending_task)
        running = session.runs.get(pending_task)
        if running is not None:
            self.steer(session_id, pending_task, text)
            return SendResult(session_id=session_id, steered=True)
        run = await self.resume(
            session_id, pending_task, message=text, origin=origin, allow_all=allow_all
        )
        return SendResult(session_id=session_id, run=run)

    def steer(self, session_id: str, task_hash: str, text: str) -> None:
        """Add ``text`` at the start of the running task's next turn (R35)."""
        run = self.find_run(task_hash, session_id)
        if run is None:
            raise NotFound(f"task {task_hash} is not running in session {session_id}")
        if not text.strip():
            raise BadRequest("steer text is empty")
        run.steers.append(text)

    # ------------------------------------------------------------------ cancel

    def cancel(
        self,
        task_hash: str,
        cause: Cause,
        *,
        session_id: str | None = None,
        connection_id: str | None = None,
    ) -> bool:
        """Cancel one task with ``cause`` (R40, R41, R52). With ``connection_id`` only a
        task that connection started may be cancelled (R46): others raise `Forbidden`.
        Returns False when the task does not run here (or already ended)."""
        run = self.find_run(task_hash, session_id)
        if run is None:
            return False
        if connection_id is not None and run.origin.connection_id != connection_id:
            raise Forbidden(f"task {task_hash} was not started by this connection")
        return run.handle.cancel(cause)

    def record_stale_cancel(self, session_id: str, task_hash: str) -> None:
        """A cancel for a task that does not run here: leave a ``canceled`` event."""
        self.session(session_id).hub.emit(
            task_hash, ev.Canceled, cause=str(Cause.USER_CANCELED), kept=False
        )

    def disconnect(self, connection_id: str) -> int:
        """Cancel every run ``connection_id`` started, cause ``disconnected`` (R43)."""
        runs = list(self._by_connection.get(connection_id, ()))
        return sum(run.handle.cancel(Cause.DISCONNECTED) for run in runs)

    # ------------------------------------------------------------------ legs

    def cancel_leg(self, session_id: str, leg_id: str) -> int:
        """Cancel one background leg, or every leg of the session with ``"all"``, cause
        ``user_canceled`` (R44); returns how many. An unknown leg raises `NotFound`."""
        check_session_id(session_id)
        return self.background.cancel_leg(session_id, leg_id)

    def list_legs(self, session_id: str) -> list[LegInfo]:
        """The session's queued and running background legs (R22, R47)."""
        check_session_id(session_id)
        return self.background.list_legs(session_id)

    @property
    def rules(self) -> RuleBook:
        """The home's remembered rules, kept in the store (R76, R92)."""
        return RuleBook(self.services.store)

    async def allowed(self, session_id: str) -> list[AllowedRule]:
        """The home's remembered rules (R76, R92), asked for by ``session_id``: rules
        belong to the home, so every session lists (and is covered by) the same."""
        check_session_id(session_id)
        return await self.rules.rules()

    async def forget_allowed(
        self, session_id: str, rule_id: str
    ) -> tuple[list[AllowedRule], list[AllowedRule]]:
        """Remove one remembered rule, or all with ``"all"``: the rules left and the
        rules removed (R76, R92). Raises `NotFound` for an unknown rule id."""
        check_session_id(session_id)
        removed = await self.rules.forget(rule_id)
        if not removed and rule_id != "all":
            raise NotFound(f"no remembered rule {rule_id[:64]!r}")
        return await self.rules.rules(), removed

    # ------------------------------------------------------------------ resume

    async def resume(
        self,
        session_id: str,
        task_hash: str,
        *,
        answers: list[str] | None = None,
        message: str | None = None,
        origin: RunOrigin | None = None,
        allow_all: bool = False,
    ) -> TaskRun:
        """Resume a pending task as a new run (R11, R12, R36, R37, R42). ``message``
        (``POST /v1/send``) answers a parked task's saved questions; a task with none
        reads a non-empty one right after the resume message, as a steer.

        The claim is one atomic compare-and-set in the store: of N concurrent resumes,
        in this process or another, exactly one wins; the rest raise `Conflict` with
        ``[Conflict] pending task: running``. A parked task resumed without answers
        asks its questions inline first, when the caller's window can take them.
        """
        session = self.session(session_id)
        check_task_hash(task_hash)
        if task_hash in session.runs:
            raise Conflict(CONFLICT_RUNNING)
        row = await self.store.get_task(session_id, task_hash)
        if row is None:
            raise NotFound(f"no pending task {task_hash} in session {session_id}")
        questions = row.questions if row.state == "parked" else []
        if message is not None and questions:
            answers = [message]
        ask_inline = bool(questions) and answers is None
        if ask_inline and not self._can_ask(session_id, task_hash, origin, questions):
            raise BadRequest(f"task {task_hash} waits for answers to its questions; send answers")
        # A session rebuilt after it was dropped (or after a restart) knows its latest
        # task only from the store.
        latest = session.latest_task or await self.store.latest_task(session_id)
        where = await start_workdir(self, session_id, None)  # before the claim
        moves = latest not in (None, task_hash) and not row.has_jobs
        claimed = await self.store.claim(
            session_id,
            task_hash,
            now=self.services.clock(),
            ttl=MARKER_TTL_S,
            new_task_hash=new_task_hash() if moves else None,
        )
        if row.ask_id and self.registry.get(row.ask_id) is not None:
            self.registry.remove(row.ask_id, "resumed")
        snapshot = (
            snapshot_from_json(claimed.snapshot)
            if claimed.snapshot
            else Snapshot(objective=row.objective, messages=[])
        )
        run = self._new_run(
            self.session(session_id),  # the live one: the session may be new since the awaits
            claimed.task_hash,
            row.objective,
            "",
            origin,
            allow_all,
            where,
            resumed_from=task_hash,
            previous_answers=list(snapshot.previous_answers),
        )
        run.created_at = row.created_at
        run.completed = list(snapshot.completed)
        if ask_inline:
            run.input = f"(resuming {task_hash}: asking its saved questions)"
            run.said = resume_said(questions, None)
            run.resume_snapshot = snapshot
        else:
            run.input = resume_input(run, snapshot, answers)
            run.prelude = reoffers(self.services, snapshot)  # R84
        if message and message.strip() and not questions:
            run.steers.append(message)
        await self._launch(run)
        return run

    def _can_ask(
        self, session_id: str, task_hash: str, origin: RunOrigin | None, questions: list[Any]
    ) -> bool:
        request = AskRequest(
            kind="ask_user",
            session_id=session_id,
            task_hash=task_hash,
            window_hash=(origin or RunOrigin()).window_hash,
            questions=questions,
        )
        return self.registry.has_listener(session_id, request)

    async def answer(self, entry_id: str, reply: AskReply, *, by: Listener | None = None) -> Entry:
        """Answer an ask. A reply to a *parked* question resumes its task exactly like
        ``POST …/resume`` with answers (R11), and is subject to R37."""
        entry = self.registry.resolve(entry_id, reply, by=by)
        if entry.parked:
            request = entry.request
            await self.resume(
                request.session_id,
                request.task_hash,
                answers=list(reply.answers or []),
                origin=RunOrigin(window_hash=request.window_hash),
            )
        return entry

    # ------------------------------------------------------------------ queries

    async def pending_tasks(self, session_id: str) -> list[PendingTaskInfo]:
        """Only actually resumable tasks: no live marker, not running here (R45, R51)."""
        check_session_id(session_id)
        rows = await self.store.list_resumable(session_id, now=self.services.clock())
        session = self.sessions.get(session_id)  # a query makes no session
        running = session.runs if session is not None else {}
        return [row.info() for row in rows if row.task_hash not in running]

    async def pending_by_origin(self, origin: str) -> list[PendingTaskInfo]:
        """The resumable tasks of every session of ``origin`` (``cli-``, ``chat-``, …),
        newest first, each naming its session: a reopened REPL starts a new ``cli-``
        session and finds here the work its earlier ones left (R41, R42). At most
        `PENDING_BY_ORIGIN_LIMIT`. No new exposure: a token holder may already list any
        session's pending tasks by its id; this only spares the guessing."""
        if origin not in ORIGINS:
            raise BadRequest(f"invalid origin {origin[:64]!r}: one of {', '.join(ORIGINS)}")
        rows = await self.store.list_resumable_by_origin(
            origin, now=self.services.clock(), limit=PENDING_BY_ORIGIN_LIMIT
        )
        return [
            row.info(with_session=True)
            for row in rows
            if self.find_run(row.task_hash, row.session_id) is None
        ]

    async def questions(self, session_id: str, task_hash: str) -> list[Any]:
        row = await self._pending_row(session_id, task_hash)
        return list(row.questions)

    async def drop_pending(self, session_id: str, task_hash: str) -> None:
        """Delete a pending task (404 unknown, 409 while it runs)."""
        row = await self._pending_row(session_id, task_hash)
        key = marker_key(session_id, task_hash)
        running = self.find_run(task_hash, session_id) is not None
        if running or await self.store.marker_alive(key, now=self.services.clock()):
            raise Conflict(CONFLICT_RUNNING)
        if row.ask_id and self.registry.get(row.ask_id) is not None:
            self.registry.remove(row.ask_id, "task dropped")
        await self.store.delete_task(session_id, task_hash)

    async def _pending_row(self, session_id: str, task_hash: str) -> TaskRow:
        check_session_id(session_id)
        check_task_hash(task_hash)
        row = await self.store.get_task(session_id, task_hash)
        if row is None:
            raise NotFound(f"no pending task {task_hash} in session {session_id}")
        return row

    async def history(
        self, session_id: str, *, keyword: str = "", limit: int = 50
    ) -> list[HistoryEntry]:
        check_session_id(session_id)
        if not 1 <= limit <= 500:
            raise BadRequest("limit must be from 1 to 500")
        rows = await self.store.list_history(session_id, keyword=keyword, limit=limit)
        return [
            HistoryEntry(
                task_hash=r.task_hash,
                end_at=r.end_at,
                objective=r.objective,
                model=r.model,
                reasoning=r.reasoning,
                status=r.status,
            )
            for r in rows
        ]

    async def history_record(self, session_id: str, task_hash: str) -> HistoryRecord:
        check_session_id(session_id)
        check_task_hash(task_hash)
        row = await self.store.get_history(session_id, task_hash)
        if row is None:
            raise NotFound(f"no finished task {task_hash} in session {session_id}")
        return HistoryRecord(task_hash=row.task_hash, content=row.content)

    # ------------------------------------------------------------------ lifecycle

    async def reoffer_parked(self) -> int:
        """Offer the questions of tasks parked before this engine started to listeners
        again (R11: a reply from a listener resumes the task). Returns how many.

        ``cli-`` questions are not offered: the store does not keep the window that
        asked, and offered without one a script's ``listen("cli-")`` could take a REPL
        window's question (R78). They are asked again when a window resumes the task
        (``/pending``, R42)."""
        rows = [row for row in await self.store.list_parked() if row.origin != "cli-"]
        for row in rows:
            if row.ask_id and self.registry.get(row.ask_id) is not None:
                continue
            entry = self.registry.offer_parked(
                AskRequest(
                    kind="ask_user",
                    session_id=row.session_id,
                    task_hash=row.task_hash,
                    questions=list(row.questions),
                )
            )
            await self.store.put_task(attrs.evolve(row, ask_id=entry.id))
        return len(rows)

    def statistics(self) -> dict[str, Any]:
        sessions = [s.statistics() for s in self.sessions.live()]
        return {
            "sessions": len(sessions),
            "sessions_dropped": self.sessions.statistics().dropped_total,
            "tasks_running": sum(s.tasks_running for s in sessions),
            "tasks_queued": sum(s.tasks_queued for s in sessions),
            "legs_running": sum(s.legs_running for s in sessions),
            "events_dropped": sum(s.hub.dropped_total for s in sessions),
            "subscribers": sum(s.hub.subscribers for s in sessions),
            "pending": attrs.asdict(self.registry.statistics()),
            "supervisor": attrs.asdict(self._supervisor.statistics()),
            "background": attrs.asdict(self.background.statistics()),
        }

    @property
    def task_count(self) -> int:
        return sum(len(s.runs) for s in self.sessions.live())

    async def shutdown(self) -> None:
        """Cancel every run with cause ``shutdown`` and wait for their exits (R53); then
        stop the engine's own loops."""
        runs = [run for s in self.sessions.live() for run in s.runs.values()]
        self.background.shutdown()  # legs first: no follow-up starts from here on
        self._supervisor.cancel_all(Cause.SHUTDOWN)
        with trio.move_on_after(SHUTDOWN_WAIT_S):
            for run in runs:
                await run.handle.wait_finished()
        self._upkeep.cancel_all(Cause.SHUTDOWN)


async def _maintain(store: Store, *, task_status: trio.TaskStatus[None]) -> None:
    """The store's upkeep (`Store.maintain`) as a supervised loop."""
    task_status.started()
    await store.maintain()
