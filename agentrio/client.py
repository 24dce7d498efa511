"""The client: a small Trio API over ``/v1/ws`` and the HTTP-only routes.

::

    async with connect() as c:                       # address and token from the home
        run = await c.run("chat-demo", "run: echo hi", on_ask=lambda ask: True)
        async for event in run.events():
            print(event)
        print((await run.wait_done()).status)

The address comes from ``<home>/daemon.json`` ``{host, port}`` and the token from
``<home>/token``, where the home is ``home=``, else ``$AGENTRIO_HOME``, else
``~/.config/agentrio`` — unless ``url``/``token`` are given (`agentrio.connecting`).

**One reader task per connection** decodes every frame and hands it on without ever
blocking (`agentrio.routing` says where each frame goes). What it hands to a script
waits in bounded inboxes that drop their oldest item when full (`agentrio.inbox`): a
script that never reads an iterator loses old items, it never stalls the connection
nor grows memory without bound.

**Control requests** (cancel, pause, steer, reply, listen, subscribe, list_pending,
list_legs, background_cancel, list_allowed, forget_allowed) all take one path,
`Client._call` (`agentrio.routing.ControlCalls`): an ``error`` answering one raises
`ClientError` ``(code, message)`` in its caller.

**Errors**: every failure is a `ClientError` (`agentrio.errors`); the libraries'
own errors are translated at one boundary, `agentrio.transport`.

The REPL uses this same client as a frame pipe: it sends frames it builds itself
(`Client.send_frame`), reads every frame through an ``on_frame`` observer, and makes
HTTP calls with `Client.request`.
"""

from __future__ import annotations

import inspect
import itertools
import logging
import os
from collections.abc import Callable
from typing import Any, Protocol

import trio

from agentrio.errors import ClientError, Disconnected, StartFailed
from agentrio.handles import (
    AskNotice,
    Decision,
    Listener,
    Rule,
    RunHandle,
    Subscription,
    as_decision,
)
from agentrio.inbox import Inbox, Limits
from agentrio.protocol.asks import Ack, AskInfo, OpenAsks, answer_fields
from agentrio.protocol.causes import Cause
from agentrio.protocol.codec import decode, unstructure
from agentrio.protocol.errors import FrameDecodeError
from agentrio.protocol.frames import (
    AllowedList,
    AllowedRule,
    Ask,
    BackgroundCancel,
    Cancel,
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
    Run,
    ServerFrame,
    Steer,
    Subscribe,
    Welcome,
)
from agentrio.protocol.http import (
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
from agentrio.routing import ControlCalls, ControlResult, Router
from agentrio.transport import (
    HttpApi,
    HttpReply,
)

__all__ = ["Client", "Connection"]

log = logging.getLogger("agentrio.client")


class Connection(Protocol):
    """What the client needs of a frame connection (`agentrio.transport.FrameConnection`;
    tests pass fakes). Failures are `ClientError`\\s, a closed connection `Disconnected`."""

    welcome: Welcome | None

    async def send(self, frame: Any) -> None: ...

    async def receive(self) -> ServerFrame: ...


class Client:
    """A connection to the daemon. Make one with `agentrio.connect` (or
    `agentrio.open_client`)."""

    def __init__(
        self,
        conn: Connection,
        http: HttpApi,
        nursery: trio.Nursery,
        *,
        ws_url: str = "",
        base_url: str = "",
        token: str = "",
        limits: Limits | None = None,
        on_frame: Callable[[ServerFrame], None] | None = None,
        on_unreadable: Callable[[FrameDecodeError], None] | None = None,
    ) -> None:
        self.ws_url = ws_url
        self.base_url = base_url
        #: The raw frame connection (`send_frame` is the checked way to use it).
        self.connection = conn
        self.http = http
        self.limits = limits or Limits()
        self._token = token
        self._nursery = nursery
        self._on_unreadable = on_unreadable
        self._ids = itertools.count(1)
        self._router = Router(
            ControlCalls(conn, self._shut),
            self.limits,
            apply_rule=self._start_rule,
            on_frame=on_frame,
        )
        self._closed: ClientError | None = None
        self._closed_event = trio.Event()

    @property
    def closed(self) -> bool:
        return self._closed is not None

    @property
    def welcome(self) -> Welcome | None:
        """The daemon's ``welcome`` (its version)."""
        return self.connection.welcome

    async def wait_closed(self) -> ClientError:
        """Wait until the connection closes; the error that closed it (a `Disconnected`
        saying who closed it and how)."""
        await self._closed_event.wait()
        assert self._closed is not None
        return self._closed

    # ------------------------------------------------------------------ runs

    async def run(
        self,
        session_id: str,
        text: str,
        *,
        window_hash: str = "",
        allow_all: bool = False,
        on_ask: Rule | None = None,
        cwd: str | os.PathLike[str] | None = None,
        share_asks: bool = False,
    ) -> RunHandle:
        """Start a task; returns once it is ``accepted`` (its hash is known, so it can
        be cancelled). Raises `StartFailed` when the daemon refused to start it.

        With ``on_ask``, the task's asks are answered by that rule instead of being
        queued on `RunHandle.asks`; the rule runs in the client's nursery, so an
        exception it raises ends the connection and propagates out of `connect`. A
        ``chat-`` (or other non-``cli-``) task's asks reach this connection only if
        it listens (`listen`) on a prefix of the session id (R8).

        ``cwd`` (an absolute path, or relative to the session's directory) becomes the
        session's working directory first (R86). By default (None) it is where this
        script is: the process's working directory, or the session's directory as this
        connection last knew it (`default_cwd`), as the REPL sends its own; ``""``
        sends none, so the session's stays.

        ``share_asks``: the task's asks go first to the session's other listeners (a
        ``listen`` of its prefix, a subscriber, a REPL window open on it), and reach
        this connection only when none of them can take one (R99, ``agentrio exec``)."""
        request_id = self._new_id("r")
        frame = Run(
            request_id=request_id,
            session_id=session_id,
            input=text,
            window_hash=window_hash,
            allow_all=allow_all,
            cwd=self._cwd_for(session_id, cwd) or "",
            share_asks=share_asks,
        )
        return await self._start(frame, on_ask)

    def default_cwd(self, session_id: str | None) -> str:
        """The ``cwd`` a task of ``session_id`` is started with when the script names
        none: the session's directory as this connection last knew it (the absolute
        ``cwd`` a task of it was started with, or the directory a ``workdir`` event of
        it named after a ``cd``: the next task goes on there), else the process's
        working directory."""
        known = self._router.workdirs.get(session_id) if session_id else None
        return known or os.getcwd()

    def _cwd_for(self, session_id: str | None, cwd: str | os.PathLike[str] | None) -> str | None:
        """What a start sends as ``cwd`` (None: nothing); an absolute one is now the
        session's directory as far as this connection knows."""
        if cwd is None:
            return self.default_cwd(session_id)
        given = os.fspath(cwd)
        if session_id and os.path.isabs(given):
            self._router.workdirs[session_id] = given
        return given or None

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
        handle = RunHandle(self, frame.request_id, frame.session_id, on_ask, self.limits)
        self._router.requests[frame.request_id] = handle
        try:
            await self.connection.send(frame)
        except Disconnected as exc:
            self._router.requests.pop(frame.request_id, None)
            self._shut(exc)
            raise
        await handle.wait_accepted()
        if not handle.task_hash:
            if handle.done is not None:
                raise StartFailed(handle.done)
            await handle.wait_done()  # raises why it never started
        return handle

    async def cancel(self, task_hash: str, *, session_id: str = "") -> None:
        """Cancel a task this connection started (R40, R46); ``forbidden`` when another
        connection started it. A task not running in the daemon is a stale cancel, no
        error: with ``session_id`` a ``canceled`` event is recorded there (SPEC §7)."""
        await self._call(
            Cancel(task_hash=task_hash, cause=Cause.USER_CANCELED, session_id=session_id)
        )

    async def pause(self, task_hash: str) -> None:
        """Pause a task this connection started: it stays resumable (R41)."""
        await self._call(Cancel(task_hash=task_hash, cause=Cause.PAUSED))

    async def steer(self, session_id: str, task_hash: str, text: str) -> None:
        """Inject ``text`` at the start of the running task's next turn (R35)."""
        await self._call(Steer(session_id=session_id, task_hash=task_hash, input=text))

    # ------------------------------------------------------------------ asks

    async def listen(self, prefix: str) -> Listener:
        """Become a listener for asks of sessions starting with ``prefix`` (``""``:
        all) and return its iterator. Listening twice on one prefix returns the same
        `Listener`."""
        listeners = self._router.listeners
        listener = listeners.get(prefix)
        if listener is None:
            listener = Listener(self, prefix, self.limits)
            listeners[prefix] = listener
            try:
                await self._call(Listen(prefix=prefix))
            except ClientError:
                del listeners[prefix]
                raise
        return listener

    def asks(self) -> Inbox[AskNotice]:
        """Asks that no `RunHandle` and no `Listener` of this client takes."""
        return self._router.unrouted

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
        stop: Cause | None = None,
        rule: str = "",
    ) -> None:
        """Answer ask ``ask_id`` (or a subscribed session's ``confirm_hash``); ``rule``
        chooses one of a confirmation's ``offers`` by its kind (approve and remember
        it). Raises `ClientError` ``gone`` when it is already answered or withdrawn;
        ``forbidden`` for a ``password`` unless this client's ``hello`` names the REPL
        (R7: the system password is the REPL's alone; the ask stays open)."""
        await self._call(
            Reply(
                id=ask_id,
                approve=approve,
                answers=answers,
                password=password,
                remember=remember,
                allow_turn=allow_turn,
                reason=reason,
                stop=stop,
                rule=rule,
            )
        )

    async def decide(self, ask_id: str, decision: Decision | bool) -> None:
        """`reply` with a `Decision` (or a bool: approve / deny)."""
        d = as_decision(decision)
        await self._call(Reply(id=ask_id, **answer_fields(d)))

    async def acknowledge(self, ask_id: str) -> None:
        """``ack``: this front-end has put ask ``ask_id`` where its person sees it
        (issue 34): the ask's state says acknowledged, by this client's name. An ask
        already gone is acknowledged with nothing to record."""
        await self._call(Ack(id=ask_id))

    # ------------------------------------------------------------------ queries

    async def pending(self, session_id: str = "", *, origin: str = "") -> list[PendingTaskInfo]:
        """The session's resumable tasks (``list_pending``); with ``origin`` instead
        (``"cli-"``), those of every session of that origin, each naming its session."""
        result = await self._call(ListPending(session_id=session_id, origin=origin))
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
        """The home's remembered rules (``list_allowed``, R76, R92)."""
        result = await self._call(ListAllowed(session_id=session_id))
        assert isinstance(result, AllowedList), result
        return list(result.rules)

    async def forget_allowed(self, session_id: str, rule_id: str) -> list[AllowedRule]:
        """Remove one remembered rule (or ``"all"``); the rules left (R76, R92)."""
        result = await self._call(ForgetAllowed(session_id=session_id, rule_id=rule_id))
        assert isinstance(result, AllowedList), result
        return list(result.rules)

    async def subscribe(self, session_id: str) -> Subscription:
        """Every event of ``session_id``, replayed then live (one `Subscription` per
        session and connection)."""
        subscriptions = self._router.subscriptions
        subscription = subscriptions.get(session_id)
        if subscription is None:
            subscription = Subscription(session_id, self.limits)
            subscriptions[session_id] = subscription
            try:
                await self._call(Subscribe(session_id=session_id))
            except ClientError:
                del subscriptions[session_id]
                raise
        return subscription

    # ------------------------------------------------------------------ raw frames

    async def send_frame(self, frame: Any) -> None:
        """Send a frame as it is, for frames this API does not cover (the REPL sends
        all of its own). Its answers reach only an ``on_frame`` observer; do not mix
        raw control frames with this API's control calls on one connection (an answer
        could be taken for another's). Raises `Disconnected` once closed."""
        self._check_open()
        try:
            await self.connection.send(frame)
        except Disconnected as exc:
            self._shut(exc)
            raise

    # ------------------------------------------------------------------ HTTP

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, str] | None = None,
        json: Any = None,
    ) -> HttpReply:
        """An authenticated request to ``path`` of the daemon's HTTP API; the reply
        whatever its status. Raises `Unreachable`/`Timeout` when it got none."""
        return await self.http.request(
            method, self.base_url + path, params=params, json=json, token=self._token
        )

    async def send(
        self,
        text: str,
        *,
        session_id: str | None = None,
        pending_task: str | None = None,
        allow_all: bool = False,
        cwd: str | os.PathLike[str] | None = None,
    ) -> SendStarted | SendSteered:
        """``POST /v1/send`` (R35): start a task as a web front-end would (in ``cwd``,
        as `run`: by default where this script is, `default_cwd`; ``""`` sends none),
        steer a running one, or resume a pending one (which keep their directory: no
        ``cwd`` is sent with ``pending_task``)."""
        if pending_task is not None:  # the daemon refuses a cwd with it ("": none)
            where = None if cwd is None else os.fspath(cwd) or None
        else:
            where = self._cwd_for(session_id, cwd)
        body = SendRequest(
            input=text,
            session_id=session_id,
            pending_task=pending_task,
            allow_all=allow_all,
            cwd=where,
        )
        reply = await self._http("POST", "/v1/send", json=unstructure(body))
        if reply.status == 202:
            return decode(reply.content, SendStarted)
        return decode(reply.content, SendSteered)

    async def confirm(self, session_id: str, confirm_hash: str, decision: Decision | bool) -> None:
        """``POST …/confirm/{confirm_hash}``: answer a ``confirm`` event over HTTP."""
        d = as_decision(decision)
        body = ConfirmRequest(**answer_fields(d))
        await self._http(
            "POST", f"/v1/session/{session_id}/confirm/{confirm_hash}", json=unstructure(body)
        )

    async def history(
        self, session_id: str, *, keyword: str = "", limit: int = 50
    ) -> list[HistoryEntry]:
        """Finished, failed and canceled tasks of the session, newest first."""
        reply = await self._http(
            "GET",
            f"/v1/session/{session_id}/task/history",
            params={"keyword": keyword, "limit": str(limit)},
        )
        return list(decode(reply.content, HistoryList).tasks)

    async def history_record(self, session_id: str, task_hash: str) -> HistoryRecord:
        """One run's full action record."""
        reply = await self._http("GET", f"/v1/session/{session_id}/task/{task_hash}/history")
        return decode(reply.content, HistoryRecord)

    async def drop(self, session_id: str, task_hash: str) -> None:
        """Delete a pending task (``not_found``; ``conflict`` while it runs)."""
        await self._http("DELETE", f"/v1/session/{session_id}/task/{task_hash}")

    async def open_asks(self, session_id: str) -> list[AskInfo]:
        """``GET …/asks``: the session's open asks and their state (issue 34)."""
        reply = await self._http("GET", f"/v1/session/{session_id}/asks")
        return list(decode(reply.content, OpenAsks).asks)

    async def health(self) -> Health:
        reply = await self._http("GET", "/v1/health")
        return decode(reply.content, Health)

    async def _http(self, method: str, path: str, **kwargs: Any) -> HttpReply:
        """`request`, with an error status raised as the daemon's `ClientError`."""
        reply = await self.request(method, path, **kwargs)
        if reply.status >= 400:
            try:
                body: ErrorBody = decode(reply.content, ErrorBody)
            except FrameDecodeError:
                raise ClientError(
                    f"http_{reply.status}", reply.text[:200] or reply.reason
                ) from None
            raise ClientError(body.error.code, body.error.message)
        return reply

    # ------------------------------------------------------------------ internals

    def _new_id(self, prefix: str) -> str:
        return f"{prefix}{next(self._ids)}"

    def _check_open(self) -> None:
        if self._closed is not None:
            raise self._closed

    async def _call(self, frame: Any) -> ControlResult:
        """The one path of control requests: their list reply, or their error raised."""
        self._check_open()
        return await self._router.calls.call(frame)

    async def _read_loop(self) -> None:
        dispatch = self._router.dispatch
        try:
            while True:
                try:
                    frame = await self.connection.receive()
                except FrameDecodeError as exc:
                    if self._on_unreadable is not None:
                        self._on_unreadable(exc)
                    else:
                        log.warning("skipped a frame this client cannot read: %s", exc)
                    continue
                dispatch(frame)
        except Disconnected as exc:
            self._shut(exc)

    def _start_rule(self, rule: Rule, ask: Ask) -> None:
        self._nursery.start_soon(self._apply_rule, rule, ask)

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
        self._router.shut(error)
        self._closed_event.set()
