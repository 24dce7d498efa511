"""The pending ask registry: questions that tasks wait on, routed to front-ends (R1-R8).

A task that needs a person — a tool confirmation, an ``ask_user`` question, a secret —
calls `PendingRegistry.ask` and is suspended until exactly one reply arrives (R1).
Front-ends take questions through a `Listener`: an origin prefix (``"cli-"``,
``"chat-"``, ``""`` for all) plus an optional ``match`` predicate, e.g. the REPL's "only
requests carrying a window hash this connection started" (R5). A listener is woken by a
`trio.Event` when a matching entry arrives; nothing polls (R2).

Semantics worth knowing before using it:

* **Producer cancelled (R3).** The instant the producer's cancellation is delivered
  (inside Trio's abort callback, so no reply slips into the gap), its entry leaves the
  registry: a late reply gets `AlreadyResolved`, and its claimer receives
  ``Withdrawn(entry_id, "task canceled")`` so no person answers a stale question.
* **Disconnect never approves (R6).** Closing a listener resolves every live ask it had
  claimed with an *error* (`AskFailed`, never an `AskReply`), and so are the asks it
  could have taken that now have no listener at all: nobody's confirmation must hang.
* **Parked entries (R11).** `offer_parked` offers a question whose task has ended (its
  snapshot waits in the store); the caller of `resolve` resumes the task. If its
  claimer disconnects it goes back to the pool, since nothing waits on it.
* **Passive listeners (R8 B).** An event subscriber counts for `has_listener` but
  never picks; it answers through HTTP (``resolve(..., by=None)``). A claimer whose
  entry is resolved by someone else or failed is told with a `Withdrawn` notice.
* **Windows (R78), shared asks (R99) and grace (R79)**: see `agentrio.engine.asks`.
* **Other daemons (issue 21).** A proxy `Listener` stands for a front-end of another
  daemon (`agentrio.engine.server.peer_asks`); its notices go there by `Listener.post`.
* **Life (issue 34).** Each change of an entry is told to ``observe``.

Everything is synchronous but `PendingRegistry.ask`, `Listener.next_notice` and
`PendingRegistry.run_graces` (the loop that ends graces, which its owner runs).
"""

from __future__ import annotations

import secrets
from collections import deque
from collections.abc import Callable, Iterable
from types import TracebackType

import attrs
import trio

from agentrio.engine.ask_graces import Graces
from agentrio.engine.asks import (
    ANSWERED_ELSEWHERE,
    CLIENT_DISCONNECTED,
    TASK_CANCELED,
    AskKind,
    AskReply,
    AskRequest,
    RegistryStatistics,
    Verified,
    Withdrawn,
)
from agentrio.engine.errors import AlreadyResolved, AskFailed, Forbidden
from agentrio.engine.ids import new_ask_id

__all__ = [
    "AskKind",
    "AskReply",
    "AskRequest",
    "Entry",
    "Listener",
    "Notice",
    "Offered",
    "PendingRegistry",
    "RegistryStatistics",
    "Verified",
    "Withdrawn",
]


@attrs.define(eq=False, kw_only=True)
class Entry:
    """One open question in the registry.

    ``claimed_by`` is the listener it was offered to (None while unclaimed);
    ``parked`` is True when no producer waits on it (R11); ``resolved`` turns True when
    it leaves the registry for any reason (a reply, an error, a withdrawal), after
    which no reply is accepted. An `Entry` received in an `Offered` notice may already
    be resolved by the time it is looked at: check ``resolved`` or wait for the
    `Withdrawn` notice that follows.
    """

    request: AskRequest
    parked: bool = False
    id: str = attrs.field(factory=new_ask_id)
    created_at: float = attrs.field(factory=trio.current_time)
    claimed_by: Listener | None = None
    resolved: bool = False
    # The producer task while it is suspended in `ask`; None for parked entries and
    # once the producer has been rescheduled (by a reply or by its cancellation).
    _task: trio.lowlevel.Task | None = attrs.field(default=None, init=False, repr=False)
    _reply: AskReply | None = attrs.field(default=None, init=False, repr=False)
    _error: str | None = attrs.field(default=None, init=False, repr=False)

    @property
    def reply(self) -> AskReply | None:
        """The accepted reply, once there is one."""
        return self._reply

    @property
    def error(self) -> str | None:
        """The error it was failed with (R6), if it was."""
        return self._error


@attrs.frozen
class Offered:
    """A listener's notice: ``entry`` is now claimed by it; show it to the person."""

    entry: Entry


Notice = Offered | Withdrawn | Verified


@attrs.define(eq=False, kw_only=True)
class Listener:
    """A front-end's claim on asks (R2): sessions whose id starts with ``prefix`` and,
    if ``match`` is given, requests it accepts. Windowed ``cli-`` asks it takes only
    when it owns their window hash (`own_window`, R78), whatever ``prefix`` and
    ``match`` say.

    Use it as a context manager or call `close` when the front-end goes away. A passive
    listener (R8 B) never picks entries, so its `next_notice` only returns when it is
    closed (by raising `trio.ClosedResourceError`).
    """

    prefix: str
    match: Callable[[AskRequest], bool] | None = None
    passive: bool = False
    #: Only this session's asks (a session subscriber, R8 B); "" for any.
    session_id: str = ""
    id: str = attrs.field(factory=lambda: f"lst_{secrets.token_hex(4)}")
    _registry: PendingRegistry = attrs.field(repr=False, alias="registry")
    _claimed: set[str] = attrs.field(factory=set, init=False, repr=False)
    _notices: deque[Notice] = attrs.field(factory=deque, init=False, repr=False)
    _wakeup: trio.Event = attrs.field(factory=trio.Event, init=False, repr=False)
    _windows: set[str] = attrs.field(factory=set, init=False, repr=False)
    _closed: bool = attrs.field(default=False, init=False)

    @property
    def claimed(self) -> frozenset[str]:
        """Ids of the open entries this listener has claimed."""
        return frozenset(self._claimed)

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def windows(self) -> frozenset[str]:
        """The window hashes this listener owns (R5, R78)."""
        return frozenset(self._windows)

    def own_window(self, window_hash: str) -> None:
        """Take the asks of window ``window_hash`` (R5): from now on its windowed
        ``cli-`` asks come to this listener and to no other.

        A window has one owner at a time: `Forbidden` while another open listener owns
        it (a connection cannot take over a live window's questions); once that one is
        closed, a replacement (the same window reconnected) may own it. Idempotent.
        """
        self._registry._own_window(self, window_hash)

    def post(self, notice: Notice) -> None:
        """Hand this listener a notice that comes from elsewhere: an ask of a task on
        another daemon (`Offered`, its entry never in this registry), or what became
        of it (`Withdrawn`, `Verified`). Ignored once closed."""
        if not self._closed:
            self._notices.append(notice)
            self._wakeup.set()

    def accepts(self, request: AskRequest) -> bool:
        """Whether ``request`` falls under this listener's prefix and match; a windowed
        ``cli-`` request needs, besides, an active listener owning its window (R78)."""
        if not request.session_id.startswith(self.prefix):
            return False
        if self.session_id and request.session_id != self.session_id:
            return False
        if request.windowed and (self.passive or request.window_hash not in self._windows):
            return False
        if request.shared and request.window_hash in self._windows:  # R99: the last resort
            others = self._registry.listeners()
            return not any(it is not self and it.accepts(request) for it in others)
        return self.match is None or self.match(request)

    async def next_notice(self) -> Notice:
        """Wait for the next thing to tell the person: posted notices first, oldest
        first; else the oldest entry it can take, claimed, as `Offered`; else wait.
        `trio.ClosedResourceError` once closed (also while waiting). Cancelling it
        loses no notice and claims nothing. One full checkpoint, never two (a second
        would add a scheduler pass to every ask shown, bench B1)."""
        await trio.lowlevel.checkpoint_if_cancelled()
        waited = False
        while True:
            if self._closed:
                raise trio.ClosedResourceError("listener is closed")
            if self._wakeup.is_set():
                # Replace only a spent event, so concurrent waiters keep sharing one.
                self._wakeup = trio.Event()
            notice: Notice | None = None
            if self._notices:
                notice = self._notices.popleft()
            else:
                entry = self._registry.pick_next(self)
                if entry is not None:
                    notice = Offered(entry)
            if notice is not None:
                if not waited:
                    await trio.lowlevel.cancel_shielded_checkpoint()
                return notice
            await self._wakeup.wait()
            waited = True

    def close(self, reason: str = CLIENT_DISCONNECTED) -> None:
        """Unregister; fail closed (R6). Idempotent and synchronous.

        Every live-producer entry it claimed is failed with ``reason`` (`AskFailed`,
        never an approval), as are live entries that, with it gone, have no listener
        at all; parked entries it claimed go back to the pool.
        """
        if self._closed:
            return
        self._closed = True
        self._notices.clear()
        self._wakeup.set()
        self._registry._drop_listener(self, reason)

    def __enter__(self) -> Listener:
        return self

    def __exit__(self, *_: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.close()


class PendingRegistry:
    """Open asks and the listeners that answer them (R1-R6, R8 B, R11, R78, R79).

    ``listener_grace_s`` is how long a ``chat-``/``tg-``/``dc-`` ask outlives its
    listener (R79); 0 fails it at once. Above 0 the owner must run `run_graces`, the
    loop that fails the asks whose grace ran out.
    """

    def __init__(self, *, listener_grace_s: float = 0.0) -> None:
        self._graces = Graces(listener_grace_s)
        #: What the claimer of a cancelled producer's ask is told (`agentrio.engine.assembly`).
        self.cancel_reason: Callable[[AskRequest], str] = lambda _: TASK_CANCELED
        #: Told of each change of an entry (`agentrio.engine.ask_life.AskLife.changed`).
        self.observe: Callable[..., None] = lambda *_, **__: None
        # Insertion order is age order: `created_at` can tie under a mock clock.
        self._entries: dict[str, Entry] = {}
        # The open entries nobody has claimed, also in age order: what `pick_next`
        # scans, so a wake-up never walks the claimed asks waiting on a person.
        self._unclaimed: dict[str, Entry] = {}
        self._listeners: dict[str, Listener] = {}
        #: Window hash -> the open listener that owns it (R5, R78).
        self._window_owners: dict[str, Listener] = {}
        self._asked_total = 0
        self._answered_total = 0
        self._withdrawn_total = 0
        self._failed_total = 0

    async def ask(
        self,
        request: AskRequest,
        *,
        on_registered: Callable[[Entry], None] | None = None,
    ) -> AskReply:
        """Register ``request`` and wait for its one reply (R1).

        ``on_registered(entry)`` runs synchronously right after registration, before any
        listener is woken, so the caller can publish ``entry.id`` (a ``confirm`` event)
        before anyone can answer. If it raises, the entry is removed and the error
        propagates.

        Raises `AskFailed` when the entry is resolved with an error (`fail`, or its
        listener closed: R6). When this call is cancelled the entry is withdrawn at once
        and its claimer told ``"task canceled"`` (R3); then the cancellation propagates.
        A producer that is already cancelled registers nothing.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        entry = Entry(request=request)
        self._add(entry)
        try:
            if on_registered is not None:
                on_registered(entry)
        except BaseException:
            self._withdraw(entry, TASK_CANCELED)
            raise
        self._wake_for(entry)
        entry._task = trio.lowlevel.current_task()

        def abort(_: trio.lowlevel.RaiseCancelT) -> trio.lowlevel.Abort:
            # Runs the moment the cancellation is delivered, before this task runs
            # again: the entry must not stay answerable in between (R3).
            entry._task = None
            self._withdraw(entry, self.cancel_reason(entry.request))
            return trio.lowlevel.Abort.SUCCEEDED

        await trio.lowlevel.wait_task_rescheduled(abort)
        if entry._error is not None:
            raise AskFailed(entry._error)
        assert entry._reply is not None
        return entry._reply

    def offer_parked(self, request: AskRequest) -> Entry:
        """Offer a question whose task is no longer running (R11): listeners pick and
        answer it like any other (`resolve`'s caller resumes the task); `remove` drops
        it unanswered."""
        entry = Entry(request=request, parked=True)
        self._add(entry)
        self._wake_for(entry)
        return entry

    def remove(self, entry_id: str, reason: str) -> None:
        """Drop a parked entry (e.g. its task was resumed another way); its claimer gets
        ``Withdrawn(entry_id, reason)``; a no-op once gone. `ValueError` for an entry
        with a live producer: `fail` it, which resumes the producer."""
        entry = self._entries.get(entry_id)
        if entry is None:
            return
        if not entry.parked:
            raise ValueError(f"ask {entry_id} has a live producer; fail it instead")
        self._withdraw(entry, reason)

    # -- listeners --------------------------------------------------------------

    def listen(
        self,
        prefix: str,
        match: Callable[[AskRequest], bool] | None = None,
        *,
        passive: bool = False,
        windows: Iterable[str] = (),
        session_id: str = "",
    ) -> Listener:
        """Register a listener for sessions starting with ``prefix`` (R2), only of
        ``session_id`` if given. ``passive``: an event subscriber (counts for
        `has_listener`, R8 B; never picks). ``windows``: hashes it owns
        (`Listener.own_window`). Asks it accepts stop their grace (R79)."""
        listener = Listener(
            prefix=prefix, match=match, passive=passive, session_id=session_id, registry=self
        )
        windows = set(windows)
        if any(self._window_owners.get(window) for window in windows):
            raise Forbidden("this window is open on another connection")
        for window_hash in windows:
            self._own_window(listener, window_hash)
        self._listeners[listener.id] = listener
        for entry in self._entries.values():
            if entry.id in self._graces and listener.accepts(entry.request):
                self._graces.end(entry.id)
        return listener

    def has_listener(self, origin_or_session_id_prefix: str, request: AskRequest) -> bool:
        """Whether some registered listener (passive ones included) could take
        ``request`` (R4): one that `Listener.accepts` it (prefix, match, the window rule
        R78). The first argument narrows the question to sessions starting with it (an
        origin such as ``"cli-"``, or the session id itself). There is no global
        "someone is listening" flag."""
        if not request.session_id.startswith(origin_or_session_id_prefix):
            return False
        return any(listener.accepts(request) for listener in list(self._listeners.values()))

    def pick_next(
        self, listener: Listener, accept: Callable[[Entry], bool] | None = None
    ) -> Entry | None:
        """Claim for ``listener`` the oldest entry it may take, or return None (R2).

        Candidates are unclaimed, unresolved entries whose session id starts with the
        listener's prefix, whose producer is still waiting (or which are parked), that
        the listener's match accepts and ``accept`` (if given) takes. A passive
        listener never picks. Raises `trio.ClosedResourceError` for a closed listener.
        """
        if listener.closed:
            raise trio.ClosedResourceError("listener is closed")
        if listener.passive:
            return None
        # A copy: ``match`` and ``accept`` are the caller's code.
        for entry in list(self._unclaimed.values()):
            if not entry.parked and entry._task is None:
                continue
            if not listener.accepts(entry.request):
                continue
            if accept is not None and not accept(entry):
                continue
            entry.claimed_by = listener
            self._graces.end(entry.id)
            listener._claimed.add(entry.id)
            del self._unclaimed[entry.id]
            self.observe(entry, "shown", by=listener, reason="")
            return entry
        return None

    def resolve(self, entry_id: str, reply: AskReply, *, by: Listener | None = None) -> Entry:
        """Accept ``reply`` as the one reply to the entry and remove it (R1).

        A live producer resumes with ``reply``; for a parked entry the caller resumes
        its task. ``by``, the listener answering, must be the one that claimed it (a
        connection answers only what it was shown: `Forbidden`). ``by=None`` (an HTTP
        caller, a session subscriber) may answer any open entry but a windowed
        ``cli-`` one (R78: `Forbidden`); its claimer is told ``"answered elsewhere"``.
        `AlreadyResolved` for an entry answered, withdrawn, or never there.
        """
        entry = self._open(entry_id)
        if by is not None and entry.claimed_by is not by:
            raise Forbidden(f"ask {entry_id} was not offered to this connection")
        if by is None and entry.request.windowed:
            raise Forbidden(
                f"ask {entry_id} belongs to the REPL window that started its task; "
                "only that window can answer it"
            )
        entry._reply = reply
        self._answered_total += 1
        self.observe(entry, "answered", by=by, reason="")
        self._finish(entry, notify=ANSWERED_ELSEWHERE, skip=by)
        return entry

    def report_verify(self, entry: Entry, ok: bool, error: str = "") -> None:
        """Tell the listener that answered ``entry`` (already resolved) how the
        system-password check went (R7: the REPL shows a ``verify`` frame). Nothing
        happens when it was answered over HTTP or its listener is gone."""
        if entry.claimed_by is not None:
            entry.claimed_by.post(Verified(entry.id, ok, error))

    def fail(self, entry_id: str, error: str) -> None:
        """Resolve the entry with an error: its producer raises `AskFailed(error)`,
        which is never an approval (R6). Its claimer, if any, is told ``error``.
        Raises `AlreadyResolved` like `resolve`."""
        entry = self._open(entry_id)
        self._fail(entry, error, skip=None)

    def listeners(self) -> list[Listener]:
        """The registered listeners, oldest first."""
        return list(self._listeners.values())

    def get(self, entry_id: str) -> Entry | None:
        """The open entry with this id, or None once it is resolved or gone."""
        return self._entries.get(entry_id)

    def entries(self, session_id: str | None = None) -> list[Entry]:
        """Open entries, oldest first; only those of ``session_id`` if given."""
        return [
            entry
            for entry in self._entries.values()
            if session_id is None or entry.request.session_id == session_id
        ]

    def sessions_in_use(self) -> set[str]:
        """Sessions with an open entry, parked ones included: their sessions stay
        in memory (`agentrio.engine.sessions.SessionHolder`)."""
        return {entry.request.session_id for entry in self._entries.values()}

    def statistics(self) -> RegistryStatistics:
        entries = list(self._entries.values())
        return RegistryStatistics(
            entries=len(entries),
            claimed=sum(entry.claimed_by is not None for entry in entries),
            parked=sum(entry.parked for entry in entries),
            in_grace=len(self._graces),
            listeners=len(self._listeners),
            asked_total=self._asked_total,
            answered_total=self._answered_total,
            withdrawn_total=self._withdrawn_total,
            failed_total=self._failed_total,
        )

    # -- internals --------------------------------------------------------------

    def _add(self, entry: Entry) -> None:
        self._entries[entry.id] = entry
        self._unclaimed[entry.id] = entry
        self._asked_total += 1

    def _open(self, entry_id: str) -> Entry:
        entry = self._entries.get(entry_id)
        if entry is None or entry.resolved:
            raise AlreadyResolved(f"ask {entry_id} is already resolved or gone")
        return entry

    def _wake_for(self, entry: Entry) -> None:
        """Wake the active listeners that could take ``entry``: it waits for one."""
        self.observe(entry, "waiting", by=None, reason="")
        for listener in list(self._listeners.values()):
            if not listener.passive and listener.accepts(entry.request):
                listener._wakeup.set()

    def _finish(self, entry: Entry, *, notify: str, skip: Listener | None) -> None:
        """Take ``entry`` out of the registry, tell its claimer (unless it is ``skip``)
        and reschedule its producer, which then reads ``_reply``/``_error``."""
        entry.resolved = True
        self._graces.end(entry.id)
        del self._entries[entry.id]
        self._unclaimed.pop(entry.id, None)
        claimer = entry.claimed_by
        if claimer is not None:
            claimer._claimed.discard(entry.id)
            if claimer is not skip:
                claimer.post(Withdrawn(entry.id, notify))
        task, entry._task = entry._task, None
        if task is not None:
            trio.lowlevel.reschedule(task)

    def _fail(self, entry: Entry, error: str, *, skip: Listener | None) -> None:
        entry._error = error
        self._failed_total += 1
        self.observe(entry, "failed", by=None, reason=error)
        self._finish(entry, notify=error, skip=skip)

    def _withdraw(self, entry: Entry, reason: str) -> None:
        """Remove an entry nobody will answer now (producer cancelled, or parked entry
        dropped); its producer, if any, is not rescheduled (it is already leaving)."""
        entry._task = None
        self._withdrawn_total += 1
        self.observe(entry, "withdrawn", by=None, reason=reason)
        self._finish(entry, notify=reason, skip=None)

    def window_open(self, window_hash: str) -> bool:
        """Whether an open listener owns window ``window_hash`` (R78)."""
        return not getattr(self._window_owners.get(window_hash), "closed", True)

    def _own_window(self, listener: Listener, window_hash: str) -> None:
        """`Listener.own_window`'s work: one open owner per window hash (R78)."""
        if listener.closed:
            raise trio.ClosedResourceError("listener is closed")
        owner = self._window_owners.get(window_hash)
        if owner is not None and owner is not listener and not owner.closed:
            raise Forbidden("this window is open on another connection")
        self._window_owners[window_hash] = listener
        if window_hash not in listener._windows:
            listener._windows.add(window_hash)
            if any(e.request.window_hash == window_hash for e in self._unclaimed.values()):
                listener._wakeup.set()

    def _drop_listener(self, listener: Listener, reason: str) -> None:
        """`Listener.close`'s work: unregister, then fail closed (R6) -- or, for asks of
        the grace origins, wait for another listener first (R79)."""
        del self._listeners[listener.id]
        claimed = [entry for entry in self._entries.values() if entry.id in listener._claimed]
        released: list[Entry] = []
        for entry in claimed:
            if entry.parked or self._falls_back(entry) or self._starts_grace(entry, reason):
                entry.claimed_by = None
                released.append(entry)
            else:
                self._fail(entry, reason, skip=listener)
        listener._claimed.clear()
        if released:
            # Back in the pool at its age, not as the newest entry.
            self._unclaimed = {
                entry.id: entry for entry in self._entries.values() if entry.claimed_by is None
            }
            for entry in released:
                self._wake_for(entry)
        # A live ask this listener could have taken and that nobody else can take
        # would otherwise wait forever: fail it (or start its grace) rather than let
        # it hang.
        for entry in list(self._unclaimed.values()):
            if entry.parked or entry.id in self._graces:
                continue
            request = entry.request
            if listener.accepts(request) and not self.has_listener("", request):
                if not self._starts_grace(entry, reason):
                    self._fail(entry, reason, skip=listener)
        for window_hash in listener._windows:
            if self._window_owners.get(window_hash) is listener:
                del self._window_owners[window_hash]
        for entry in filter(self._falls_back, self._unclaimed.values()):  # R99: its turn?
            self._window_owners[entry.request.window_hash]._wakeup.set()

    def _falls_back(self, entry: Entry) -> bool:
        """Shared, its window open: back to it, not failed, when its listener leaves (R99)."""
        return entry.request.shared and self.window_open(entry.request.window_hash)

    def _starts_grace(self, entry: Entry, reason: str) -> bool:
        """Start ``entry``'s grace (R79) if its origin has one; False: fail it now."""
        if not self._graces.enabled or not entry.request.has_grace:
            return False
        self._graces.start(entry.id, reason)
        return True

    # -- graces (R79) -------------------------------------------------------------

    async def run_graces(self, *, task_status: trio.TaskStatus[None]) -> None:
        """The loop that ends graces, until cancelled (the engine's shutdown, cause
        ``shutdown``); returns at once when there are none (``listener_grace_s`` 0).

        At each deadline an ask that still has no listener fails with the reason of
        the close that started its wait; one that has a listener again (a passive
        subscriber came back) waits no more."""
        task_status.started()
        while self._graces.enabled:
            await self._graces.wait_due()
            for entry_id, grace in self._graces.due(trio.current_time()).items():
                entry = self._entries.get(entry_id)
                if entry is not None and not self.has_listener("", entry.request):
                    self._fail(entry, grace.reason, skip=None)
