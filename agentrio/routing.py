"""Where each frame the daemon sends goes: the reader task's side of the client.

`Router.dispatch` runs in the connection's one reader task, for every frame, and never
blocks (it only fills bounded inboxes and sets events):

- ``accepted``/``event``/``done`` go to the `RunHandle` of the ``run``/``pending``
  request (by ``request_id``, then by task hash);
- ``ask`` goes, in this order, to the `RunHandle` of a task this client started (its
  `RunHandle.asks` inbox, or its ``on_ask`` rule), else to the `Listener` whose
  prefix is the longest that the session id starts with, else to ``Client.asks()``.
  ``withdrawn`` and ``verify`` follow the ask they name;
- ``event`` frames of a session this client subscribed to also go to that
  `Subscription` (each consumer drops the copies it has seen: the daemon sends a
  task's events once for the run and once for the subscription);
- ``pending_list``, ``leg_list``, ``allowed`` and ``error`` frames answer control
  requests (`ControlCalls`).

A frame observer (``on_frame``, the REPL's) sees every frame first; with one, frames
that nothing else claims stop there instead of being queued on ``Client.asks()`` or
logged as unexpected.

`ControlCalls` is the one path of control requests (cancel, pause, steer, reply,
listen, subscribe, list_pending, list_legs, background_cancel, …). Each is sent with a
``request_id`` of its own, and the daemon answers it exactly once, after handling it:
with ``ok {request_id}``, with the list frame carrying that ``request_id`` for the
queries, or with an ``error`` whose ``ref`` is that ``request_id`` (docs/protocol.md,
"Acknowledgements"), which raises `ClientError` ``(code, message)`` in the caller.
No guessing, no timeouts.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Final, Protocol, TypeAlias

import attrs
import trio

from agentrio.errors import ClientError, Disconnected
from agentrio.handles import AskNotice, Listener, Rule, RunHandle, Subscription
from agentrio.inbox import Inbox, Limits
from agentrio.protocol.events import Workdir
from agentrio.protocol.frames import (
    Accepted,
    AllowedList,
    Ask,
    DoneFrame,
    ErrorFrame,
    EventFrame,
    LegList,
    Ok,
    PendingList,
    ServerFrame,
    Verify,
    Withdrawn,
)

__all__ = ["ControlCalls", "ControlResult", "FrameSender", "Router"]

log = logging.getLogger("agentrio.client")

#: What a control request may get back besides nothing.
ControlResult: TypeAlias = PendingList | LegList | AllowedList | None
_CONTROL: Final = "agentrio-control-"
#: Asks whose later notices (``withdrawn``/``verify``) this client still routes.
_ASK_SINKS_KEPT: Final = 4096


class FrameSender(Protocol):
    async def send(self, frame: Any) -> None: ...


# ---------------------------------------------------------------------- control


@attrs.define
class _Op:
    """One control request waiting for its answer."""

    result: ControlResult = None
    error: ClientError | None = None
    finished: trio.Event = attrs.field(factory=trio.Event)


class ControlCalls:
    """Control requests in flight, by their ``request_id`` (module docstring)."""

    def __init__(self, conn: FrameSender, broken: Callable[[ClientError], None]) -> None:
        self._conn = conn
        self._broken = broken
        self._waiting: dict[str, _Op] = {}
        self._count = 0

    async def call(self, frame: Any) -> ControlResult:
        """Send ``frame`` with a fresh ``request_id``; return its list reply (None for
        an ``ok``), raise its error."""
        self._count += 1
        request_id = f"{_CONTROL}{self._count}"
        op = _Op()
        self._waiting[request_id] = op
        try:
            with trio.CancelScope(shield=True):
                # A frame half sent by a cancel would leave the connection unusable.
                try:
                    await self._conn.send(attrs.evolve(frame, request_id=request_id))
                except Disconnected as exc:
                    self._broken(exc)
            await op.finished.wait()
        finally:
            self._waiting.pop(request_id, None)
        if op.error is not None:
            raise op.error
        return op.result

    def _answer(self, request_id: str) -> _Op | None:
        op = self._waiting.get(request_id) if request_id.startswith(_CONTROL) else None
        if op is not None:
            op.finished.set()
        return op

    def answer_ok(self, frame: Ok) -> bool:
        """An ``ok`` ends the request it names; False when none waits."""
        return self._answer(frame.request_id) is not None

    def answer_list(self, frame: PendingList | LegList | AllowedList) -> bool:
        """A list frame answers the request it names; False when none waits."""
        op = self._answer(frame.request_id)
        if op is not None:
            op.result = frame
        return op is not None

    def answer_error(self, frame: ErrorFrame) -> bool:
        """An ``error`` whose ``ref`` names a request fails it; False when none waits."""
        op = self._answer(frame.ref)
        if op is not None:
            op.error = ClientError(frame.code, frame.message)
        return op is not None

    def shut(self, error: ClientError) -> None:
        """The connection is gone: every waiting request raises ``error``."""
        for op in self._waiting.values():
            op.error = error
            op.finished.set()
        self._waiting.clear()


# ---------------------------------------------------------------------- routing


class Router:
    """The client's routing tables and `dispatch` (module docstring)."""

    def __init__(
        self,
        calls: ControlCalls,
        limits: Limits,
        *,
        apply_rule: Callable[[Rule, Ask], None],
        on_frame: Callable[[ServerFrame], None] | None = None,
    ) -> None:
        self.calls = calls
        self.limits = limits
        self._apply_rule = apply_rule
        self._on_frame = on_frame
        self.requests: dict[str, RunHandle] = {}
        self.by_task: dict[str, RunHandle] = {}
        self.listeners: dict[str, Listener] = {}
        self.subscriptions: dict[str, Subscription] = {}
        self._ask_sinks: OrderedDict[str, Inbox[AskNotice]] = OrderedDict()
        self._held: list[Ask] = []
        #: Each session's working directory as its ``workdir`` events last said (a
        #: ``cd``), for the ``cwd`` the client sends by default (R86).
        self.workdirs: dict[str, str] = {}
        #: Asks that no run and no listener takes (``Client.asks()``).
        self.unrouted: Inbox[AskNotice] = Inbox(limits.notices, name="unrouted asks")

    def dispatch(self, frame: ServerFrame) -> None:
        if self._on_frame is not None:
            self._on_frame(frame)
        match frame:
            case Accepted():
                handle = self.requests.get(frame.request_id)
                if handle is not None:
                    handle._accept(frame)
                    self.by_task[frame.task_hash] = handle
                    self._reroute_held()
            case EventFrame():
                if isinstance(frame.event, Workdir):
                    self.workdirs[frame.session_id] = frame.event.path
                run = self.by_task.get(frame.task_hash)
                if run is not None:
                    run._event(frame.event)
                subscription = self.subscriptions.get(frame.session_id)
                if subscription is not None:
                    subscription.offer(frame)
            case DoneFrame():
                handle = self.requests.pop(frame.request_id, None)
                if handle is not None:
                    handle._finish(frame)
                    if self.by_task.get(handle.task_hash) is handle:
                        del self.by_task[handle.task_hash]
                    self._reroute_held()
            case Ask():
                self._route_ask(frame)
            case Withdrawn():
                self._notice(self._ask_sinks.pop(frame.id, None), frame)
            case Verify():
                self._notice(self._ask_sinks.get(frame.id), frame)
            case ErrorFrame():
                self._error(frame)
            case PendingList() | LegList() | AllowedList():
                if not self.calls.answer_list(frame) and self._on_frame is None:
                    log.warning("unexpected %s frame", type(frame).TYPE)
            case Ok():
                self.calls.answer_ok(frame)
            case _:
                log.debug("ignored a %s frame", type(frame).TYPE)

    def _error(self, frame: ErrorFrame) -> None:
        handle = None
        if frame.ref and not frame.ref.startswith(_CONTROL):
            handle = self.requests.pop(frame.ref, None)
        if handle is not None:
            handle._finish(None, ClientError(frame.code, frame.message))
        elif not self.calls.answer_error(frame) and self._on_frame is None:
            log.warning("daemon error %s: %s", frame.code, frame.message)

    def _notice(self, sink: Inbox[AskNotice] | None, notice: AskNotice) -> None:
        if sink is not None:
            sink.put(notice)
        elif self._on_frame is None:
            self.unrouted.put(notice)

    def _route_ask(self, ask: Ask) -> None:
        waiting = any(
            not h.task_hash and h.session_id == ask.session_id for h in self.requests.values()
        )
        run = self.by_task.get(ask.task_hash)
        if run is None and waiting:
            self._held.append(ask)  # may be the ask of a run whose ``accepted`` is on its way
            return
        if run is not None and run.on_ask is not None:
            self._remember(ask.id, run._asks)  # its notices: nobody needs to read them
            self._apply_rule(run.on_ask, ask)
            return
        sink: Inbox[AskNotice]
        if run is not None:
            sink = run._asks
        else:
            prefixes = [p for p in self.listeners if ask.session_id.startswith(p)]
            if prefixes:
                sink = self.listeners[max(prefixes, key=len)]
            elif self._on_frame is None:
                sink = self.unrouted
            else:
                return
        self._remember(ask.id, sink)
        sink.put(ask)

    def _remember(self, ask_id: str, sink: Inbox[AskNotice]) -> None:
        self._ask_sinks[ask_id] = sink
        if len(self._ask_sinks) > _ASK_SINKS_KEPT:
            self._ask_sinks.popitem(last=False)

    def _reroute_held(self) -> None:
        held, self._held = self._held, []
        for ask in held:
            self._route_ask(ask)

    def shut(self, error: ClientError) -> None:
        """The connection is gone: runs fail with ``error``, inboxes end."""
        self.calls.shut(error)
        for handle in list(self.requests.values()):
            handle._finish(None, error)
        self.requests.clear()
        self.by_task.clear()
        inboxes: list[Inbox[Any]] = [
            *self.listeners.values(),
            *self.subscriptions.values(),
            self.unrouted,
        ]
        for inbox in inboxes:
            inbox.close()
