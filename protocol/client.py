"""The scripting client: a small Trio API over ``/v1/ws`` and the HTTP-only routes.

::

    async with connect() as c:                       # address and token from the home
        run = await c.run("chat-demo", "run: echo hi", on_ask=lambda ask: True)
        async for event in run.events():
            print(event)
        print((await run.wait_done()).status)

The address comes from ``<home>/daemon.json`` ``{host, port}`` and the token from
``<home>/token``, where the home is ``home=``, else ``$AGENTRIO_HOME``, else
``~/.config/agentrio`` — unless ``url``/``token`` are given.

**One reader task per connection** decodes every frame and hands it to whoever waits
for it, without ever blocking (its queues are unbounded: a script that never reads an
iterator only grows memory, it never stalls the connection):

- ``accepted``/``event``/``done`` go to the `RunHandle` of the ``run``/``pending``
  request (by ``request_id``, then by task hash);
- ``ask`` goes, in this order, to the `RunHandle` of a task this client started (its
  `RunHandle.asks` iterator, or its ``on_ask`` rule), else to the `Listener` whose
  prefix is the longest that the session id starts with, else to `Client.asks`.
  ``withdrawn`` and ``verify`` follow the ask they name;
- ``event`` frames of a session this client `Client.subscribe`\\d also go to that
  `Subscription` (each consumer drops the copies it has seen: the daemon sends a task's
  events once for the run and once for the subscription);
- ``pending_list``, ``leg_list``, ``allowed`` and ``error`` frames answer control requests.

**Control requests** (cancel, pause, steer, reply, listen, subscribe, list_pending,
list_legs, background_cancel) have no reply frame of their own when they succeed. The
daemon handles one client frame at a time and sends its answer (an ``error``, a list)
before it reads the next, so each control frame is followed by a *barrier*: a
``reply`` to an ask id that cannot exist, which the daemon always answers with an
``error`` carrying that id as ``ref``. Whatever arrives between the two belongs to the
control request; an ``error`` there raises `ClientError` ``(code, message)`` in its
caller. No guessing, no timeouts.
"""

from __future__ import annotations

import inspect
import itertools
import json
import logging
import math
import os
import secrets
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any, Final, Generic, TypeAlias, TypeVar
from urllib.parse import urlsplit

import attrs
import httpx
import trio
import trio_websocket

from protocol.codec import decode, unstructure
from protocol.errors import FrameDecodeError
from protocol.events import Done, Event
from protocol.frames import (
    Accepted,
    AllowedList,
    AllowedRule,
    Ask,
    BackgroundCancel,
    Cancel,
    DoneFrame,
    ErrorFrame,
    EventFrame,
    ForgetAllowed,
    LegInfo,
    LegList,
    ListAllowed,
    Listen,
    ListLegs,
    ListPending,
    PendingFrame,
    PendingList,
    PendingTaskInfo,
    Reply,
    ReplyAction,
    Run,
    ServerFrame,
    Steer,
    Subscribe,
    Verify,
    Withdrawn,
)
from protocol.http import (
    ConfirmRequest,
    ErrorBody,
    Health,
    HistoryEntry,
    HistoryList,
    HistoryRecord,
    SendRequest,
    SendStarted,
    SendSteered,
)
from protocol.transport import AuthRefused, FrameConnection, open_frame_connection

__all__ = [
    "AskNotice",
    "Client",
    "ClientError",
    "DaemonNotFound",
    "Decision",
    "EventCursor",
    "Listener",
    "Rule",
    "RunHandle",
    "StartFailed",
    "Subscription",
    "connect",
    "default_home",
    "new_window_hash",
    "read_address",
]

log = logging.getLogger("agentrio.client")

#: What a `Listener` or `RunHandle.asks` yields.
AskNotice: TypeAlias = Ask | Withdrawn | Verify
#: How the client names itself in ``hello``.
CLIENT_NAME: Final = "agentrio-client/1"
#: Seconds an HTTP helper waits for the daemon.
HTTP_TIMEOUT_S: Final = 30.0
_BARRIER: Final = "agentrio-client-barrier-"

T = TypeVar("T")


class ClientError(Exception):
    """The daemon refused a request (``code`` is the protocol error code, e.g.
    ``not_found``, ``forbidden``, ``conflict``, ``gone``), or the client could not
    reach it (``unreachable``, ``unauthorized``, ``disconnected``, ``no_daemon``)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class DaemonNotFound(ClientError):
    """The home names no serving daemon (no ``daemon.json``) or has no token."""

    def __init__(self, message: str) -> None:
        super().__init__("no_daemon", message)


class StartFailed(ClientError):
    """A ``run``/``pending`` ended before it was accepted: ``done`` holds the daemon's
    ``done`` frame (status ``failed``), ``message`` its error — e.g. exactly
    ``[Conflict] pending task: running`` for a resume that lost (R37)."""

    def __init__(self, done: DoneFrame) -> None:
        code = "conflict" if done.error.startswith("[Conflict]") else "start_failed"
        super().__init__(code, done.error or done.status)
        self.done = done


@attrs.frozen(kw_only=True)
class Decision:
    """An answer to an ask. Confirmations use ``approve`` (+ ``reason`` when denying,
    ``remember``, ``allow_turn``, ``action``, ``password``); questions use
    ``answers``, one per question."""

    approve: bool | None = None
    answers: list[str] | None = attrs.field(default=None, repr=False)
    password: str | None = attrs.field(default=None, repr=False)
    remember: bool = False
    allow_turn: bool = False
    reason: str = ""
    action: ReplyAction | None = None

    @classmethod
    def allow(cls, *, remember: bool = False, allow_turn: bool = False) -> Decision:
        return cls(approve=True, remember=remember, allow_turn=allow_turn)

    @classmethod
    def deny(cls, reason: str = "") -> Decision:
        return cls(approve=False, reason=reason)

    @classmethod
    def answer(cls, *answers: str) -> Decision:
        return cls(answers=list(answers))


#: A rule decides an ask: a `Decision`, or a bool (approve / deny).
Rule: TypeAlias = Callable[[Ask], Decision | bool | Awaitable[Decision | bool]]


def _as_decision(value: Decision | bool) -> Decision:
    if isinstance(value, Decision):
        return value
    return Decision.allow() if value else Decision.deny("denied by rule")


# ---------------------------------------------------------------------- consumers


class _Inbox(Generic[T]):
    """An unbounded queue read by one consumer at a time; ends when closed."""

    def __init__(self) -> None:
        self._send, self._receive = trio.open_memory_channel[T](math.inf)

    def put(self, item: T) -> None:
        try:
            self._send.send_nowait(item)
        except trio.ClosedResourceError:
            log.debug("dropped %r: its consumer has ended", item)

    def close(self) -> None:
        self._send.close()

    async def receive(self) -> T:
        """The next item; raises `trio.EndOfChannel` once closed and drained."""
        return await self._receive.receive()

    def __aiter__(self) -> _Inbox[T]:
        return self

    async def __anext__(self) -> T:
        try:
            return await self._receive.receive()
        except trio.EndOfChannel:
            raise StopAsyncIteration from None


class Listener(_Inbox[AskNotice]):
    """Asks of sessions whose id starts with ``prefix`` (R2), as an async iterator of
    `Ask` frames and the `Withdrawn`/`Verify` notices that follow them. Ends when the
    connection closes. Answer with `Client.reply` or `Client.decide`."""

    def __init__(self, client: Client, prefix: str) -> None:
        super().__init__()
        self.client = client
        self.prefix = prefix


class Subscription(_Inbox[EventFrame]):
    """Every event of one session (recent ones replayed first), as `EventFrame`s
    (``task_hash`` says which task). A subscriber also counts as a listener for the
    session's confirmations (R8 B): they arrive as ``confirm`` events; answer them
    with `Client.reply` ``(event.confirm_hash, …)``."""

    def __init__(self, session_id: str) -> None:
        super().__init__()
        self.session_id = session_id
        self._seen: set[int] = set()

    def offer(self, frame: EventFrame) -> None:
        if frame.event.seq not in self._seen:
            self._seen.add(frame.event.seq)
            self.put(frame)


class RunHandle:
    """One ``run`` or ``pending`` request: its task hash (once ``accepted``), its
    events, its asks and its one ``done``.

    `events` may be iterated any number of times, each time from the first event; it
    ends after the task's last event. `asks` yields the task's asks (unless the run was
    started with ``on_ask``, which answers them).
    """

    def __init__(self, client: Client, request_id: str, session_id: str, on_ask: Rule | None):
        self.client = client
        self.request_id = request_id
        self.session_id = session_id
        self.on_ask = on_ask
        #: The task hash; empty until ``accepted`` arrived.
        self.task_hash = ""
        #: The ``done`` frame, once it arrived.
        self.done: DoneFrame | None = None
        #: Every event received so far, in order.
        self.events_so_far: list[Event] = []
        self._asks: _Inbox[AskNotice] = _Inbox()
        self._seen: set[int] = set()
        self._accepted = trio.Event()
        self._finished = trio.Event()
        self._changed = trio.Event()
        self._failure: ClientError | None = None

    @property
    def final_text(self) -> str:
        """The text of the task's ``done`` event ("" unless it finished)."""
        for event in reversed(self.events_so_far):
            if isinstance(event, Done):
                return event.text
        return ""

    def events(self) -> EventCursor:
        """The task's events from the first one; the iteration ends after ``done``.
        A plain iterator, not an async generator: breaking out of it needs no
        cleanup."""
        return EventCursor(self)

    def asks(self) -> _Inbox[AskNotice]:
        """The task's asks (and their withdrawn / verify notices)."""
        return self._asks

    async def wait_done(self) -> DoneFrame:
        """The ``done`` frame (any status); raises `ClientError` ``disconnected`` when
        the connection closed first."""
        await self._finished.wait()
        if self.done is None:
            assert self._failure is not None
            raise self._failure
        return self.done

    async def cancel(self) -> None:
        """Cancel the task (cause ``user_canceled``: deleted after a history entry)."""
        await self.client.cancel(self._hash())

    async def pause(self) -> None:
        """Pause the task (cause ``paused``: kept resumable)."""
        await self.client.pause(self._hash())

    async def steer(self, text: str) -> None:
        await self.client.steer(self.session_id, self._hash(), text)

    def _hash(self) -> str:
        if not self.task_hash:
            raise ClientError("not_accepted", "the run has no task hash yet")
        return self.task_hash

    # -- the reader's side

    def _accept(self, frame: Accepted) -> None:
        self.task_hash = frame.task_hash
        self._accepted.set()

    def _event(self, event: Event) -> None:
        if self._finished.is_set() or event.seq in self._seen:
            return
        self._seen.add(event.seq)
        self.events_so_far.append(event)
        self._changed.set()
        self._changed = trio.Event()

    def _finish(self, done: DoneFrame | None, failure: ClientError | None = None) -> None:
        if self._finished.is_set():
            return
        self.done, self._failure = done, failure
        self._finished.set()
        self._accepted.set()
        self._changed.set()
        self._asks.close()


class EventCursor:
    """Iterates a `RunHandle`'s events from the first; see `RunHandle.events`."""

    def __init__(self, handle: RunHandle) -> None:
        self._handle = handle
        self._index = 0

    def __aiter__(self) -> EventCursor:
        return self

    async def __anext__(self) -> Event:
        handle = self._handle
        await trio.lowlevel.checkpoint()  # before taking an event: a cancel loses none
        while self._index >= len(handle.events_so_far):
            if handle._finished.is_set():
                raise StopAsyncIteration
            await handle._changed.wait()
        self._index += 1
        return handle.events_so_far[self._index - 1]


@attrs.define
class _Op:
    """One control request waiting for its barrier."""

    barrier: str
    result: PendingList | LegList | AllowedList | None = None
    error: ClientError | None = None
    answered: bool = False
    finished: trio.Event = attrs.field(factory=trio.Event)


# ---------------------------------------------------------------------- the client


class Client:
    """A connection to the daemon. Make one with `connect`."""

    def __init__(
        self,
        conn: FrameConnection,
        http: httpx.AsyncClient,
        nursery: trio.Nursery,
        *,
        ws_url: str,
        base_url: str,
    ) -> None:
        self.ws_url = ws_url
        self.base_url = base_url
        #: The raw frame connection, for frames this API does not cover.
        self.connection = conn
        self.http = http
        self._nursery = nursery
        self._ids = itertools.count(1)
        self._requests: dict[str, RunHandle] = {}
        self._by_task: dict[str, RunHandle] = {}
        self._listeners: dict[str, Listener] = {}
        self._subscriptions: dict[str, Subscription] = {}
        self._ask_sinks: dict[str, _Inbox[AskNotice]] = {}
        self._held: list[Ask] = []
        self._unrouted: _Inbox[AskNotice] = _Inbox()
        self._ops: deque[_Op] = deque()
        self._op_lock = trio.Lock()
        self._closed: ClientError | None = None

    @property
    def closed(self) -> bool:
        return self._closed is not None

    # ------------------------------------------------------------------ runs

    async def run(
        self,
        session_id: str,
        text: str,
        *,
        window_hash: str = "",
        allow_all: bool = False,
        on_ask: Rule | None = None,
    ) -> RunHandle:
        """Start a task; returns once it is ``accepted`` (its hash is known, so it can
        be cancelled). Raises `StartFailed` when the daemon refused to start it.

        With ``on_ask``, the task's asks are answered by that rule instead of being
        queued on `RunHandle.asks`; the rule runs in the client's nursery, so an
        exception it raises ends the connection and propagates out of `connect`. A
        ``chat-`` (or other non-``cli-``) task's asks reach this connection only if
        it listens (`listen`) on a prefix of the session id (R8)."""
        request_id = self._new_id("r")
        frame = Run(
            request_id=request_id,
            session_id=session_id,
            input=text,
            window_hash=window_hash,
            allow_all=allow_all,
        )
        return await self._start(frame, on_ask)

    async def resume(
        self,
        session_id: str,
        task_hash: str,
        answers: list[str] | None = None,
        *,
        window_hash: str = "",
        on_ask: Rule | None = None,
    ) -> RunHandle:
        """Resume a pending task (the ``pending`` frame, R42); its run may get a new
        task hash (R36). Raises `StartFailed` (code ``conflict`` when another resume
        won, R37; ``start_failed`` otherwise, e.g. an unknown task)."""
        frame = PendingFrame(
            request_id=self._new_id("p"),
            session_id=session_id,
            task_hash=task_hash,
            window_hash=window_hash,
            answers=answers,
        )
        return await self._start(frame, on_ask)

    async def _start(self, frame: Run | PendingFrame, on_ask: Rule | None) -> RunHandle:
        self._check_open()
        handle = RunHandle(self, frame.request_id, frame.session_id, on_ask)
        self._requests[frame.request_id] = handle
        try:
            await self.connection.send(frame)
        except trio_websocket.ConnectionClosed:
            self._requests.pop(frame.request_id, None)
            self._shut(ClientError("disconnected", "the daemon closed the connection"))
            raise ClientError("disconnected", "the daemon closed the connection") from None
        await handle._accepted.wait()
        if not handle.task_hash:
            if handle.done is not None:
                raise StartFailed(handle.done)
            assert handle._failure is not None
            raise handle._failure
        return handle

    async def cancel(self, task_hash: str) -> None:
        """Cancel a task this connection started (R40, R46): ``not_found`` when it does
        not run, ``forbidden`` when another connection started it."""
        await self._call(Cancel(task_hash=task_hash, pause=False))

    async def pause(self, task_hash: str) -> None:
        """Pause a task this connection started: it stays resumable (R41)."""
        await self._call(Cancel(task_hash=task_hash, pause=True))

    async def steer(self, session_id: str, task_hash: str, text: str) -> None:
        """Inject ``text`` at the start of the running task's next turn (R35)."""
        await self._call(Steer(session_id=session_id, task_hash=task_hash, input=text))

    # ------------------------------------------------------------------ asks

    async def listen(self, prefix: str) -> Listener:
        """Become a listener for asks of sessions starting with ``prefix`` (``""``:
        all) and return its iterator. Listening twice on one prefix returns the same
        `Listener`."""
        listener = self._listeners.get(prefix)
        if listener is None:
            listener = Listener(self, prefix)
            self._listeners[prefix] = listener
            try:
                await self._call(Listen(prefix=prefix))
            except ClientError:
                del self._listeners[prefix]
                raise
        return listener

    def asks(self) -> _Inbox[AskNotice]:
        """Asks that no `RunHandle` and no `Listener` of this client takes."""
        return self._unrouted

    async def reply(
        self,
        ask_id: str,
        *,
        approve: bool | None = None,
        answers: list[str] | None = None,
        password: str | None = None,
        remember: bool = False,
        allow_turn: bool = False,
        reason: str = "",
        action: ReplyAction | None = None,
    ) -> None:
        """Answer ask ``ask_id`` (or a subscribed session's ``confirm_hash``). Raises
        `ClientError` ``gone`` when it is already answered or withdrawn."""
        await self._call(
            Reply(
                id=ask_id,
                approve=approve,
                answers=answers,
                password=password,
                remember=remember,
                allow_turn=allow_turn,
                reason=reason,
                action=action,
            )
        )

    async def decide(self, ask_id: str, decision: Decision | bool) -> None:
        """`reply` with a `Decision` (or a bool: approve / deny)."""
        d = _as_decision(decision)
        await self.reply(
            ask_id,
            approve=d.approve,
            answers=d.answers,
            password=d.password,
            remember=d.remember,
            allow_turn=d.allow_turn,
            reason=d.reason,
            action=d.action,
        )

    # ------------------------------------------------------------------ queries

    async def pending(self, session_id: str) -> list[PendingTaskInfo]:
        """The session's resumable tasks (``list_pending``)."""
        result = await self._call(ListPending(session_id=session_id))
        assert isinstance(result, PendingList), result
        return list(result.tasks)

    async def legs(self, session_id: str) -> list[LegInfo]:
        """The session's queued and running background legs (``list_legs``)."""
        result = await self._call(ListLegs(session_id=session_id))
        assert isinstance(result, LegList), result
        return list(result.legs)

    async def cancel_leg(self, session_id: str, leg_id: str) -> None:
        """Cancel one background leg, or all of the session's with ``"all"`` (R44)."""
        await self._call(BackgroundCancel(session_id=session_id, leg_id=leg_id))

    async def allowed(self, session_id: str) -> list[AllowedRule]:
        """The session's remembered "Always allow" commands (``list_allowed``, R76)."""
        result = await self._call(ListAllowed(session_id=session_id))
        assert isinstance(result, AllowedList), result
        return list(result.rules)

    async def forget_allowed(self, session_id: str, rule_id: str) -> list[AllowedRule]:
        """Remove one remembered command (or ``"all"``); the rules left (R76)."""
        result = await self._call(ForgetAllowed(session_id=session_id, rule_id=rule_id))
        assert isinstance(result, AllowedList), result
        return list(result.rules)

    async def subscribe(self, session_id: str) -> Subscription:
        """Every event of ``session_id``, replayed then live (one `Subscription` per
        session and connection)."""
        subscription = self._subscriptions.get(session_id)
        if subscription is None:
            subscription = Subscription(session_id)
            self._subscriptions[session_id] = subscription
            try:
                await self._call(Subscribe(session_id=session_id))
            except ClientError:
                del self._subscriptions[session_id]
                raise
        return subscription

    # ------------------------------------------------------------------ HTTP

    async def send(
        self,
        text: str,
        *,
        session_id: str | None = None,
        pending_task: str | None = None,
        allow_all: bool = False,
    ) -> SendStarted | SendSteered:
        """``POST /v1/send`` (R35): start a task as a web front-end would, steer a
        running one, or resume a pending one."""
        body = SendRequest(
            input=text, session_id=session_id, pending_task=pending_task, allow_all=allow_all
        )
        response = await self._http("POST", "/v1/send", json=unstructure(body))
        if response.status_code == 202:
            return decode(response.content, SendStarted)
        return decode(response.content, SendSteered)

    async def confirm(self, session_id: str, confirm_hash: str, decision: Decision | bool) -> None:
        """``POST …/confirm/{confirm_hash}``: answer a ``confirm`` event over HTTP."""
        d = _as_decision(decision)
        body = ConfirmRequest(
            approve=bool(d.approve),
            remember=d.remember,
            allow_turn=d.allow_turn,
            reason=d.reason,
            action=d.action,
            password=d.password,
            answers=d.answers,
        )
        await self._http(
            "POST", f"/v1/session/{session_id}/confirm/{confirm_hash}", json=unstructure(body)
        )

    async def history(
        self, session_id: str, *, keyword: str = "", limit: int = 50
    ) -> list[HistoryEntry]:
        """Finished, failed and canceled tasks of the session, newest first."""
        response = await self._http(
            "GET",
            f"/v1/session/{session_id}/task/history",
            params={"keyword": keyword, "limit": str(limit)},
        )
        return list(decode(response.content, HistoryList).tasks)

    async def history_record(self, session_id: str, task_hash: str) -> HistoryRecord:
        """One run's full action record."""
        response = await self._http("GET", f"/v1/session/{session_id}/task/{task_hash}/history")
        return decode(response.content, HistoryRecord)

    async def drop(self, session_id: str, task_hash: str) -> None:
        """Delete a pending task (``not_found``; ``conflict`` while it runs)."""
        await self._http("DELETE", f"/v1/session/{session_id}/task/{task_hash}")

    async def health(self) -> Health:
        response = await self._http("GET", "/v1/health")
        return decode(response.content, Health)

    async def _http(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            response = await self.http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise ClientError("unreachable", f"{method} {path}: {exc}") from None
        if response.status_code >= 400:
            try:
                body: ErrorBody = decode(response.content, ErrorBody)
            except FrameDecodeError:
                raise ClientError(
                    f"http_{response.status_code}", response.text[:200] or response.reason_phrase
                ) from None
            raise ClientError(body.error.code, body.error.message)
        return response

    # ------------------------------------------------------------------ control

    def _new_id(self, prefix: str) -> str:
        return f"{prefix}{next(self._ids)}"

    def _check_open(self) -> None:
        if self._closed is not None:
            raise self._closed

    async def _call(self, frame: Any) -> PendingList | LegList | AllowedList | None:
        """Send a control frame plus its barrier; return its list reply, raise its
        error (see the module docstring)."""
        self._check_open()
        op = _Op(barrier=_BARRIER + self._new_id(""))
        with trio.CancelScope(shield=True):
            # Frame, barrier and queue entry must stay together: a half-sent pair would
            # pin every later answer to the wrong request.
            async with self._op_lock:
                self._ops.append(op)
                try:
                    await self.connection.send(frame)
                    await self.connection.send(Reply(id=op.barrier))
                except trio_websocket.ConnectionClosed:
                    self._shut(ClientError("disconnected", "the daemon closed the connection"))
        await op.finished.wait()
        if op.error is not None:
            raise op.error
        return op.result

    # ------------------------------------------------------------------ reader

    async def _read_loop(self) -> None:
        try:
            while True:
                try:
                    frame = await self.connection.receive()
                except FrameDecodeError as exc:
                    log.warning("skipped a frame this client cannot read: %s", exc)
                    continue
                self._dispatch(frame)
        except trio_websocket.ConnectionClosed as exc:
            reason = exc.reason.reason if exc.reason is not None else ""
            self._shut(ClientError("disconnected", reason or "the daemon closed the connection"))

    def _dispatch(self, frame: ServerFrame) -> None:
        match frame:
            case Accepted():
                handle = self._requests.get(frame.request_id)
                if handle is not None:
                    handle._accept(frame)
                    self._by_task[frame.task_hash] = handle
                    self._reroute_held()
            case EventFrame():
                run = self._by_task.get(frame.task_hash)
                if run is not None:
                    run._event(frame.event)
                subscription = self._subscriptions.get(frame.session_id)
                if subscription is not None:
                    subscription.offer(frame)
            case DoneFrame():
                handle = self._requests.pop(frame.request_id, None)
                if handle is not None:
                    handle._finish(frame)
                    if self._by_task.get(handle.task_hash) is handle:
                        del self._by_task[handle.task_hash]
                    self._reroute_held()
            case Ask():
                self._route_ask(frame)
            case Withdrawn():
                self._ask_sinks.pop(frame.id, self._unrouted).put(frame)
            case Verify():
                self._ask_sinks.get(frame.id, self._unrouted).put(frame)
            case ErrorFrame():
                self._error(frame)
            case PendingList() | LegList() | AllowedList():
                if self._ops and not self._ops[0].answered:
                    self._ops[0].result, self._ops[0].answered = frame, True
                else:
                    log.warning("unexpected %s frame", type(frame).TYPE)
            case _:
                log.debug("ignored a %s frame", type(frame).TYPE)

    def _error(self, frame: ErrorFrame) -> None:
        if frame.ref.startswith(_BARRIER):
            while self._ops:
                op = self._ops.popleft()
                op.finished.set()
                if op.barrier == frame.ref:
                    break
            return
        handle = self._requests.pop(frame.ref, None) if frame.ref else None
        if handle is not None:
            handle._finish(None, ClientError(frame.code, frame.message))
            return
        if self._ops and not self._ops[0].answered:
            self._ops[0].error = ClientError(frame.code, frame.message)
            self._ops[0].answered = True
        else:
            log.warning("daemon error %s: %s", frame.code, frame.message)

    def _route_ask(self, ask: Ask) -> None:
        waiting = any(
            not h.task_hash and h.session_id == ask.session_id for h in self._requests.values()
        )
        run = self._by_task.get(ask.task_hash)
        if run is None and waiting:
            self._held.append(ask)  # may be the ask of a run whose ``accepted`` is on its way
            return
        if run is not None and run.on_ask is not None:
            self._ask_sinks[ask.id] = run._asks  # its notices: nobody needs to read them
            self._nursery.start_soon(self._apply_rule, run.on_ask, ask)
            return
        sink: _Inbox[AskNotice]
        if run is not None:
            sink = run._asks
        else:
            prefixes = [p for p in self._listeners if ask.session_id.startswith(p)]
            sink = self._listeners[max(prefixes, key=len)] if prefixes else self._unrouted
        self._ask_sinks[ask.id] = sink
        sink.put(ask)

    def _reroute_held(self) -> None:
        held, self._held = self._held, []
        for ask in held:
            self._route_ask(ask)

    async def _apply_rule(self, rule: Rule, ask: Ask) -> None:
        decision = rule(ask)
        if inspect.isawaitable(decision):
            decision = await decision
        try:
            await self.decide(ask.id, decision)
        except ClientError as exc:
            if exc.code not in ("gone", "disconnected"):
                raise
            log.info("ask %s was gone before the rule's answer: %s", ask.id, exc.message)

    def _shut(self, error: ClientError) -> None:
        if self._closed is not None:
            return
        self._closed = error
        for op in self._ops:
            if not op.answered:
                op.error = error
            op.finished.set()
        self._ops.clear()
        for handle in list(self._requests.values()):
            handle._finish(None, error)
        self._requests.clear()
        self._by_task.clear()
        inboxes: list[_Inbox[Any]] = [
            *self._listeners.values(),
            *self._subscriptions.values(),
            self._unrouted,
        ]
        for inbox in inboxes:
            inbox.close()


# ---------------------------------------------------------------------- connecting


def default_home() -> Path:
    """``$AGENTRIO_HOME`` or ``~/.config/agentrio`` (the daemon's own rule)."""
    env = os.environ.get("AGENTRIO_HOME")
    return Path(env).expanduser() if env else Path.home() / ".config" / "agentrio"


def read_address(home: Path) -> tuple[str, int]:
    """``(host, port)`` from ``<home>/daemon.json`` (blocking: a small file read).
    Raises `DaemonNotFound` when no daemon serves from that home."""
    try:
        data = json.loads((home / "daemon.json").read_text(encoding="utf-8"))
        host, port = data["host"], data["port"]
    except (OSError, ValueError, KeyError, TypeError):
        raise DaemonNotFound(
            f"no daemon.json in {home}: start one with `agentrio daemon`"
        ) from None
    if not isinstance(host, str) or not isinstance(port, int) or isinstance(port, bool):
        raise DaemonNotFound(f"{home / 'daemon.json'}: host or port is malformed")
    return host, port


def _home_of(home: str | Path | None) -> Path:
    return Path(home).expanduser() if home is not None else default_home()


def _urls(url: str) -> tuple[str, str]:
    """``(ws_url, base_url)`` of a ``ws://…/v1/ws`` or ``http://host:port`` address."""
    parts = urlsplit(url)
    if parts.scheme in ("ws", "wss"):
        http_scheme = "https" if parts.scheme == "wss" else "http"
        return url, f"{http_scheme}://{parts.netloc}"
    if parts.scheme in ("http", "https"):
        ws_scheme = "wss" if parts.scheme == "https" else "ws"
        return f"{ws_scheme}://{parts.netloc}/v1/ws", f"{parts.scheme}://{parts.netloc}"
    raise ClientError("bad_url", f"expected ws://host:port/v1/ws or http://host:port, got {url!r}")


async def _resolve(
    url: str | None, token: str | None, home: str | Path | None
) -> tuple[str, str, str]:
    the_home = _home_of(home)
    if url is None:
        host, port = await trio.to_thread.run_sync(read_address, the_home)
        url = f"http://{host}:{port}"
    if token is None:
        try:
            token = (await trio.Path(the_home / "token").read_text(encoding="utf-8")).strip()
        except OSError:
            raise DaemonNotFound(f"no token in {the_home}: has a daemon run there?") from None
    ws_url, base_url = _urls(url)
    return ws_url, base_url, token


@asynccontextmanager
async def connect(
    url: str | None = None,
    token: str | None = None,
    *,
    home: str | Path | None = None,
    client_name: str = CLIENT_NAME,
) -> AsyncIterator[Client]:
    """Connect to the daemon and say ``hello``; the `Client` lives inside the block.

    ``url`` (``http://host:port`` or ``ws://host:port/v1/ws``) and ``token`` default to
    the home's ``daemon.json`` and ``token``. Raises `ClientError` ``unauthorized``
    (wrong token), ``unreachable`` (nothing listens) or `DaemonNotFound`. On exit the
    connection closes; the daemon then cancels the runs it started with cause
    ``disconnected`` (kept resumable, R43) and fails its open asks (R6).
    """
    ws_url, base_url, the_token = await _resolve(url, token, home)
    async with AsyncExitStack() as stack:
        try:
            conn = await stack.enter_async_context(
                open_frame_connection(ws_url, the_token, client=client_name)
            )
        except AuthRefused as exc:
            raise ClientError("unauthorized", str(exc)) from None
        except (OSError, trio_websocket.HandshakeError) as exc:
            raise ClientError("unreachable", f"{ws_url}: {exc}") from None
        http = await stack.enter_async_context(
            httpx.AsyncClient(
                base_url=base_url,
                headers={"Authorization": f"Bearer {the_token}"},
                timeout=HTTP_TIMEOUT_S,
            )
        )
        # The body runs inside the reader's nursery, but its own exception is re-raised
        # outside it, so `except ClientError:` around `async with connect()` works
        # (a nursery would wrap it in an ExceptionGroup).
        body_error: BaseException | None = None
        async with trio.open_nursery() as nursery:
            client = Client(conn, http, nursery, ws_url=ws_url, base_url=base_url)
            nursery.start_soon(client._read_loop)
            try:
                yield client
            except BaseException as exc:
                body_error = exc
            finally:
                client._shut(ClientError("disconnected", "the client closed the connection"))
                nursery.cancel_scope.cancel()
        if body_error is not None:
            raise body_error


def new_window_hash() -> str:
    """A random window hash, for scripts that want asks of ``cli-`` runs (R5)."""
    return f"w{secrets.token_hex(8)}"
