"""``/v1/ws``: one WebSocket connection of a REPL window or a script (SPEC §8).

A connection is one reader loop plus the tasks it starts in its own nursery:

- **hello first.** The upgrade is accepted (after the Origin check, R70); the first
  message must be ``hello`` with protocol 1 and either the token or a nonce for the
  mutual challenge (``challenge`` / ``prove``, `agentrio.protocol.challenge`), else the socket
  closes with 4401. No frame is acted on before ``welcome``. Until then a message may
  be at most 4 KiB, nothing is compressed, it all must happen within
  `HELLO_TIMEOUT_S`, and at most `MAX_UNAUTHENTICATED` TCP connections may be at it
  at once (`agentrio.engine.server.ws_limits`, issue 29 finding 7).
- **run / pending.** Each starts a forwarder task: it subscribes to the session's hub
  *before* the engine starts the task (so no event is missed), answers ``accepted``
  with the task hash, forwards that task's events as ``event`` frames, then sends
  exactly one ``done``. A request with a bad field (session id, task hash, empty
  input: `BadRequest`) or a window open on another connection (`Forbidden`) is
  refused with one ``error`` frame (``ref`` = its ``request_id``) and nothing else:
  no task was made. A well-formed request that cannot be carried out (`Conflict`
  R37, `NotFound`) still ends in its one ``done``, status ``failed``.
- **asks (R5, R78).** The connection's ``cli-`` listener owns the window hashes this
  connection sent in ``run``/``pending`` (`agentrio.engine.pending.Listener.own_window`): the
  registry gives a window's asks to it and to no other listener. They arrive as
  ``ask`` frames, withdrawals as ``withdrawn``. ``listen {prefix}`` adds listeners for
  script front-ends (never a window's asks). A ``share_asks`` run's asks (R99) go to
  its session's other listeners, its own window taking those none can. A ``reply``
  is accepted only for an ask shown to this connection (by the listener that showed
  it), or for an ask of a session it ``subscribe``\\d to (R8 B) that is not a
  window's (the registry refuses that, R78). A ``password`` (R7) is taken only from
  a REPL's connection (its ``hello`` names it); its check comes back as ``verify``.
- **commands.** Every other frame is decoded, authorized here (R46: only runs this
  connection started may be cancelled; R5/R8: only asks it was shown, or of sessions
  it subscribed to, may be answered) and handed to the command layer
  (`agentrio.engine.server.commands`) that the HTTP routes call too, so both answer alike. A
  frame with a ``request_id`` is answered once it was handled: by its list frame
  carrying the ``request_id``, else by ``ok`` (`agentrio.engine.server.ws_frames`).
- **bad input (R71).** Every frame that cannot be acted on — broken JSON, unknown
  type, wrong field, over 1 MiB, an engine error — gets an ``error`` frame with a
  ``ref`` (request id, else ask id or task hash, when known); the connection lives on.
- **close.** The connection's runs are cancelled with cause ``disconnected`` (R43)
  and its listeners closed, which fails its claimed asks (R6: never an approval).

Sends are serialised by one lock. A subscriber (a ``subscribe``, a run's or window's
forwarder) more than ``[server] subscriber_queue_bytes`` behind ends the connection
(4008, `agentrio.engine.sessions.SlowConsumer`). Every close is time-boxed
(`CLOSE_TIMEOUT_S`: a client that stopped reading holds neither a connection nor the
shutdown, `agentrio.engine.server.sockets`). A send to a gone socket raises `ConnectionGone`.
"""

from __future__ import annotations

import logging
import secrets
from functools import partial
from typing import Any, Final

import trio
from starlette.websockets import WebSocket, WebSocketDisconnect

from agentrio.engine.core import Engine
from agentrio.engine.errors import AgentrioError, AlreadyResolved, BadRequest, Forbidden
from agentrio.engine.ids import check_session_id, check_task_hash
from agentrio.engine.nursery_tasks import cancel_scope
from agentrio.engine.pending import AskRequest, Entry, Listener, Offered, Verified, Withdrawn
from agentrio.engine.runs import RunOrigin, TaskRun
from agentrio.engine.server.auth import origin_allowed
from agentrio.engine.server.cluster import attached_events, listeners_changed
from agentrio.engine.server.commands import Commands
from agentrio.engine.server.context import ServerContext
from agentrio.engine.server.ws_frames import (
    ack,
    answer_command,
    ask_frame,
    ref_of_frame,
    ref_of_text,
    verify_frame,
)
from agentrio.engine.server.ws_hello import HELLO_TIMEOUT_S, authenticate
from agentrio.engine.server.ws_limits import restrict_unauthenticated
from agentrio.engine.sessions import SlowConsumer
from agentrio.protocol.causes import Cause
from agentrio.protocol.codec import MAX_MESSAGE_BYTES, decode_client_frame, dumps
from agentrio.protocol.errors import (
    CLOSE_SHUTDOWN,
    CLOSE_SLOW_CONSUMER,
    ErrorCode,
    FrameDecodeError,
)
from agentrio.protocol.events import Canceled, Done, Failed, TaskStarted
from agentrio.protocol.events import Pending as PendingEvent
from agentrio.protocol.frames import (
    PROTOCOL_VERSION,
    Accepted,
    Ack,
    ClientFrame,
    DoneFrame,
    ErrorFrame,
    EventFrame,
    Hello,
    Listen,
    Ok,
    OpenWindow,
    PendingFrame,
    Prove,
    Reply,
    Run,
    Subscribe,
    Welcome,
    names_repl,
)
from agentrio.protocol.frames import Withdrawn as WithdrawnFrame
from agentrio.protocol.http import ResumeRequest
from agentrio.protocol.stops import StopReceipt

__all__ = [
    "CLOSE_TIMEOUT_S",
    "HELLO_TIMEOUT_S",
    "MAX_UNAUTHENTICATED",
    "Connection",
    "ConnectionGone",
    "ask_frame",
    "verify_frame",
    "websocket_endpoint",
]

log = logging.getLogger("agentrio.server.ws")

#: Unauthenticated TCP WebSockets open at once; more are refused before the upgrade (403).
MAX_UNAUTHENTICATED: Final = 32
#: Longest wait for a close frame to go out (then the server aborts the socket, R53/R81).
CLOSE_TIMEOUT_S: Final = 1.0


class ConnectionGone(Exception):
    """The socket closed under a send; the connection is over."""


async def websocket_endpoint(websocket: WebSocket) -> None:
    """The ``/v1/ws`` route: Origin check, the unauthenticated limits, ``hello``, then
    `Connection.serve`."""
    ctx: ServerContext = websocket.app.state.ctx
    origin = websocket.headers.get("origin")
    if not origin_allowed(origin, ctx.allowed_origins, ctx.own_origins):
        ctx.refusals.warning(
            "origin", "refused a WebSocket upgrade from origin %r", origin[:200] if origin else ""
        )
        await websocket.close(code=1008)  # before accept: hypercorn answers 403
        return
    # Only the daemon's user can reach the Unix socket (hypercorn names no server
    # address for it): the cap is for TCP, where any local process can connect.
    local = websocket.scope.get("server") is None
    if not local and ctx.unauthenticated >= MAX_UNAUTHENTICATED:
        ctx.refusals.warning(
            "unauthenticated",
            "refused a WebSocket upgrade: %d connections have not authenticated yet",
            ctx.unauthenticated,
        )
        await websocket.close(code=1013)
        return
    restriction = restrict_unauthenticated(websocket)
    if restriction is None:
        await websocket.close(code=1011)
        return
    counted = 0 if local else 1
    ctx.unauthenticated += counted
    try:
        await websocket.accept()
        authenticated = await authenticate(websocket, ctx.token)
    finally:
        ctx.unauthenticated -= counted
    if authenticated is None:
        return
    restriction.lift()
    client = authenticated.client
    connection = Connection(
        websocket, ctx.engine, closing=ctx.closing, commands=ctx.commands, client=client
    )
    key = authenticated.http_key
    if key:
        ctx.http_keys.add(key)
    ctx.connections += 1
    try:
        await connection.send(Welcome(protocol=PROTOCOL_VERSION, daemon_version=ctx.version))
        await connection.serve()
    except* ConnectionGone:
        pass
    finally:
        ctx.connections -= 1
        ctx.http_keys.discard(key)


#: Events that end a run: after one of these its forwarder stops.
_FINAL_EVENTS: Final = (Done, Failed, Canceled, PendingEvent)


class Connection:
    """One authenticated ``/v1/ws`` connection (see the module doc)."""

    def __init__(
        self,
        websocket: WebSocket,
        engine: Engine,
        *,
        closing: trio.Event,
        commands: Commands | None = None,
        client: str = "",
    ) -> None:
        self.id = f"conn_{secrets.token_hex(6)}"
        #: The front-end this is (its ``hello``'s ``client``): where its asks are shown.
        self.client = client or "client"
        self.repl = names_repl(self.client)  # R7: only its replies may carry a password
        self.engine = engine
        self.commands = commands or Commands(engine)
        self._ws = websocket
        self._closing = closing
        self._send_lock = trio.Lock()
        #: Window hashes this connection sent in ``run``/``pending`` (R5).
        self.window_hashes: set[str] = set()
        #: The window hash of runs sent without one: unique to this connection.
        self.default_window = f"w_{self.id}"
        #: Ask id → the listener that showed it here.
        self.shown: dict[str, Listener] = {}
        #: The listener owning this connection's windows (R5, R78), from `serve`.
        self._window_listener: Listener | None = None
        self.listeners: list[Listener] = []
        self.listen_prefixes: set[str] = set()
        self.subscribed: set[str] = set()
        #: Whether this connection ever had a listener other daemons route to
        #: (``listen``, ``subscribe``): then its end is told to them at once.
        self.routable = False
        #: Tasks whose background jobs this connection's window took over (`_open_window`).
        self.adopted: set[str] = set()
        #: Sessions whose window-routed events this connection forwards.
        self._watched: set[str] = set()
        #: Sessions it sent ``open_window`` for (a REPL's): it takes their shared asks.
        self.opened: set[str] = set()
        self._nursery: trio.Nursery | None = None

    # ------------------------------------------------------------------ sending

    async def send(self, frame: Any) -> None:
        """Send one frame; raises `ConnectionGone` when the socket is closed.

        An uncontended lock is taken without a checkpoint (``async with`` would yield
        once even then): the send itself yields, and one more scheduler pass before
        every frame is latency the ask round trip pays (bench B1).
        """
        text = dumps(frame)
        lock = self._send_lock
        await trio.lowlevel.checkpoint_if_cancelled()  # a cancelled sender sends nothing
        try:
            lock.acquire_nowait()
        except trio.WouldBlock:
            await lock.acquire()
        try:
            await self._ws.send_text(text)
        except (WebSocketDisconnect, RuntimeError, OSError, trio.BrokenResourceError) as exc:
            raise ConnectionGone from exc
        finally:
            lock.release()

    async def send_error(self, code: str, message: str, ref: str = "") -> None:
        await self.send(ErrorFrame(code=code, message=message, ref=ref))

    # ------------------------------------------------------------------ lifetime

    async def serve(self) -> None:
        """Read frames until the client leaves or the daemon shuts down; then cancel
        this connection's runs (``disconnected``, R43) and close its listeners (R6)."""
        cli = self.engine.registry.listen("cli-", match=self._started_here)
        self.engine.ask_life.name(cli, self.client)
        self._window_listener = cli
        self.listeners.append(cli)
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                nursery.start_soon(self._pump_asks, cli)
                nursery.start_soon(self._close_on_shutdown)
                await self._read_loop()
                cancel_scope(nursery.cancel_scope, Cause.DISCONNECTED)
        except* SlowConsumer as group:
            log.warning("connection %s dropped: %s", self.id, group.exceptions[0])
            await self._close(CLOSE_SLOW_CONSUMER, str(group.exceptions[0]))
        finally:
            cancelled = self.engine.disconnect(self.id)
            for listener in self.listeners:
                listener.close()
            if self.routable:
                with trio.CancelScope(shield=True), trio.move_on_after(CLOSE_TIMEOUT_S):
                    await listeners_changed(self.commands.cluster, added=False)
            if cancelled:
                log.info("connection %s closed; %d run(s) cancelled", self.id, cancelled)

    def _started_here(self, request: AskRequest) -> bool:
        """Its windows' asks, and the shared ones of sessions it opened a window on (R99)."""
        opened = request.shared and request.session_id in self.opened
        return opened or request.window_hash in self.window_hashes

    async def _close(self, code: int, reason: str) -> None:
        """Send a close frame within `CLOSE_TIMEOUT_S` (a client may not be reading)."""
        with trio.move_on_after(CLOSE_TIMEOUT_S):
            try:
                await self._ws.close(code=code, reason=reason[:120])
            except (WebSocketDisconnect, RuntimeError, OSError):
                pass

    async def _close_on_shutdown(self) -> None:
        await self._closing.wait()
        await self._close(CLOSE_SHUTDOWN, "daemon shutting down")
        assert self._nursery is not None
        cancel_scope(self._nursery.cancel_scope, Cause.SHUTDOWN)

    async def _read_loop(self) -> None:
        while True:
            try:
                message = await self._ws.receive()
            except (WebSocketDisconnect, RuntimeError, OSError):
                return
            if message["type"] == "websocket.disconnect":
                return
            text = message.get("text")
            if text is None:
                await self.send_error(
                    ErrorCode.BAD_FRAME, "$: binary messages are not accepted; send JSON text"
                )
                continue
            await self.handle_text(text)

    # ------------------------------------------------------------------ frames

    async def handle_text(self, text: str) -> None:
        """Act on one message; every problem becomes an ``error`` frame (R71)."""
        if len(text) > MAX_MESSAGE_BYTES or len(text.encode()) > MAX_MESSAGE_BYTES:
            await self.send_error(
                ErrorCode.TOO_LARGE, f"$: message larger than {MAX_MESSAGE_BYTES} bytes"
            )
            return
        try:
            frame = decode_client_frame(text)
        except FrameDecodeError as exc:
            await self.send_error(ErrorCode.BAD_FRAME, str(exc), ref_of_text(text))
            return
        try:
            answer = await self.dispatch(frame)
        except AgentrioError as exc:
            await self.send_error(exc.code, str(exc) or type(exc).__name__, ref_of_frame(frame))
            return
        except ConnectionGone:
            raise
        except Exception:
            log.exception("connection %s: %s frame failed", self.id, type(frame).TYPE)
            await self.send_error(
                ErrorCode.INTERNAL, "internal error (see daemon.log)", ref_of_frame(frame)
            )
            return
        if answer is not None:
            await self.send(answer)

    async def dispatch(self, frame: ClientFrame) -> Any:
        """Act on one decoded frame; returns the frame that answers it, if any (the
        list of a query, or the ``ok`` a ``request_id`` asks for)."""
        nursery = self._nursery
        assert nursery is not None
        match frame:
            case Hello() | Prove():
                await self.send_error(
                    ErrorCode.BAD_FRAME, f"$.type: {frame.TYPE} was already received"
                )
            case Run() | PendingFrame():
                await nursery.start(self._request, frame)
            case Reply():
                await self._reply(frame)
                return ack(frame)
            case Ack():
                await self._acknowledge(frame)
                return ack(frame)
            case Listen(prefix=prefix):
                if prefix not in self.listen_prefixes:
                    self.listen_prefixes.add(prefix)
                    listener = self.engine.registry.listen(prefix)
                    self.engine.ask_life.name(listener, self.client)
                    self.listeners.append(listener)
                    nursery.start_soon(self._pump_asks, listener)
                    self.routable = True
                    await listeners_changed(self.commands.cluster, added=True)
                return ack(frame)
            case OpenWindow(session_id=session_id, window_hash=window):
                await self._open_window(check_session_id(session_id), window)
                return ack(frame)
            case Subscribe(session_id=session_id):
                check_session_id(session_id)
                if session_id in self.subscribed:
                    return ack(frame)
                await nursery.start(self._subscription, session_id, ack(frame))
            case _:
                return await answer_command(self.commands, frame, connection_id=self.id)
        return None

    def _authorize(self, entry: Entry, *, windowed: bool = True) -> Listener | None:
        """The listener that showed ``entry`` here (R5), or None for an ask of a session
        this connection subscribed to (R8 B; a REPL window's only if ``windowed``)."""
        listener = self.shown.get(entry.id)
        if listener is None and (
            entry.request.session_id not in self.subscribed
            or (entry.request.windowed and not windowed)
        ):
            raise Forbidden(f"ask {entry.id} was not shown to this connection")
        return listener

    async def _reply(self, frame: Reply) -> None:
        """``reply``: an ask this connection was shown or may answer (`_authorize`)."""
        try:
            await self.commands.reply(
                frame, authorize=self._authorize, sessions=self.subscribed, password_ok=self.repl
            )
        except AlreadyResolved:
            self.shown.pop(frame.id, None)
            raise
        self.shown.pop(frame.id, None)

    async def _acknowledge(self, frame: Ack) -> None:
        """``ack``: this connection drew ask ``id`` (R97), one it may answer (never a
        REPL window's it was not shown)."""
        authorize = partial(self._authorize, windowed=False)
        await self.commands.acknowledge(
            frame.id, self.client, authorize=authorize, sessions=self.subscribed
        )

    # ------------------------------------------------------------------ tasks

    async def _request(
        self, frame: Run | PendingFrame, *, task_status: trio.TaskStatus[None]
    ) -> None:
        """One ``run``/``pending``: ``accepted``, the task's events, one ``done``.

        `task_status.started` is called once the run exists (or failed to start), so
        the reader handles the next frame — e.g. a ``cancel`` — only after that. A bad
        field or a window owned elsewhere raises before that, and the reader answers
        it with an ``error`` frame (no ``done``: there is no run).
        """
        window = frame.window_hash or self.default_window
        session = self.engine.session(check_session_id(frame.session_id))
        if isinstance(frame, PendingFrame):
            check_task_hash(frame.task_hash)
        assert self._window_listener is not None
        self._window_listener.own_window(window)  # R78: Forbidden if open elsewhere
        self.window_hashes.add(window)
        shared = isinstance(frame, Run) and frame.share_asks
        origin = RunOrigin(connection_id=self.id, window_hash=window, share_asks=shared)
        await self._watch(session.id)
        with session.hub.subscribe(replay=False) as subscription:
            try:
                run = await self._start(frame, origin)
            except BadRequest:
                raise
            except AgentrioError as exc:
                task_status.started()
                await self._done(frame, getattr(frame, "task_hash", ""), "failed", str(exc))
                return
            task_status.started()
            await self.send(
                Accepted(
                    request_id=frame.request_id,
                    session_id=run.session_id,
                    task_hash=run.task_hash,
                )
            )
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._forward_run_events, subscription, run)
                outcome = await run.wait_done()
                subscription.close()  # the pump drains what is queued, then ends
        await self._done(frame, run.task_hash, outcome.status, outcome.error, outcome.stopped)

    async def _start(self, frame: Run | PendingFrame, origin: RunOrigin) -> TaskRun:
        if isinstance(frame, Run):
            return await self.commands.start(frame, origin=origin)
        body = ResumeRequest(answers=frame.answers)
        return await self.commands.resume(frame.session_id, frame.task_hash, body, origin=origin)

    async def _done(
        self,
        frame: Run | PendingFrame,
        task_hash: str,
        status: Any,
        error: str,
        stopped: StopReceipt | None = None,
    ) -> None:
        """The ``done`` of a request; a stopped run's carries what the stop ended."""
        await self.send(
            DoneFrame(
                request_id=frame.request_id,
                task_hash=task_hash,
                status=status,
                error=error,
                stopped=stopped,
            )
        )

    async def _forward_run_events(self, subscription: Any, run: TaskRun) -> None:
        """Forward the run's events up to and including its final one; later events of
        the same task hash (leg reports) are the window watcher's."""
        async for task_hash, event in subscription:
            if task_hash == run.task_hash:
                await self.send(
                    EventFrame(session_id=run.session_id, task_hash=task_hash, event=event)
                )
                if isinstance(event, _FINAL_EVENTS):
                    return

    async def _open_window(self, session_id: str, window: str) -> None:
        """``open_window``: own ``window`` (R78), take over the session's background jobs
        whose window is open nowhere, and forward the session's window-routed events."""
        assert self._window_listener is not None
        self._window_listener.own_window(window)  # Forbidden if open elsewhere
        self.window_hashes.add(window)
        self.opened.add(session_id)
        registry = self.engine.registry
        self.adopted.update(self.engine.background.adopt(session_id, window, registry.window_open))
        await self._watch(session_id)

    async def _watch(self, session_id: str) -> None:
        """Make sure this connection forwards the session's window-routed events."""
        if session_id not in self._watched and self._nursery is not None:
            self._watched.add(session_id)
            await self._nursery.start(self._window_events, session_id)

    async def _window_events(self, session_id: str, *, task_status: trio.TaskStatus[None]) -> None:
        """Forward events of this connection's windows that no run forwarder carries:
        tasks started for the window by the engine (a background job's follow-up, R26)
        and late events of this connection's ended runs (leg reports, leg ends).

        Events of a run this connection started are skipped from its ``task_started``
        to its final event — its own forwarder sends those, in the same order — so
        nothing is sent twice.
        """
        in_flight: set[str] = set()
        with self.engine.session(session_id).hub.subscribe(replay=False) as subscription:
            task_status.started()
            async for task_hash, event in subscription:
                origin = self.engine.run_origin(task_hash)
                if origin is None or (
                    origin.window_hash not in self.window_hashes and task_hash not in self.adopted
                ):
                    continue
                if session_id in self.subscribed:
                    continue  # the subscription forwards every event already
                if isinstance(event, TaskStarted) and origin.connection_id == self.id:
                    in_flight.add(task_hash)
                if task_hash in in_flight:
                    if isinstance(event, _FINAL_EVENTS):
                        in_flight.discard(task_hash)
                    continue
                await self.send(EventFrame(session_id=session_id, task_hash=task_hash, event=event))

    async def _subscription(
        self, session_id: str, ack: Ok | None, *, task_status: trio.TaskStatus[None]
    ) -> None:
        """``subscribe``: every event of the session, replay then live; meanwhile this
        connection is a passive listener for the session's asks (R8 B). The ``ok``
        (when asked for) goes out once both are in place, before the first replayed
        event."""
        engine = self.engine
        self.subscribed.add(session_id)
        try:
            async with attached_events(self.commands.cluster, session_id):
                with (
                    engine.registry.listen("", session_id=session_id, passive=True),
                    engine.session(session_id).hub.subscribe(replay=True) as subscription,
                ):
                    self.routable = True
                    await listeners_changed(self.commands.cluster, added=True)
                    if ack is not None:
                        await self.send(ack)
                    task_status.started()
                    async for task_hash, event in subscription:
                        await self.send(
                            EventFrame(session_id=session_id, task_hash=task_hash, event=event)
                        )
        finally:
            self.subscribed.discard(session_id)

    async def _pump_asks(self, listener: Listener) -> None:
        """Show ``listener``'s asks as ``ask`` frames and its withdrawals as
        ``withdrawn`` frames, until it is closed."""
        while True:
            try:
                notice = await listener.next_notice()
            except trio.ClosedResourceError:
                return
            match notice:
                case Offered(entry=entry):
                    if entry.resolved:
                        continue
                    self.shown[entry.id] = listener
                    await self.send(ask_frame(entry))
                case Withdrawn(entry_id=entry_id, reason=reason):
                    if self.shown.pop(entry_id, None) is not None:
                        await self.send(WithdrawnFrame(id=entry_id, reason=reason))
                case Verified():
                    # Sent only to the listener that passed the password on (R7).
                    await self.send(verify_frame(notice))
