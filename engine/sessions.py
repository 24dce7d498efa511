"""Per-session state, and the registry that owns the live sessions.

A session is cheap and lives in memory while it has work; everything that must
survive a restart is in the store. Each session owns:

- an `EventHub`: numbered events fanned out to bounded per-subscriber queues;
- ``slots``: a `trio.Semaphore` of `MAX_SESSION_TASKS` (R50) — a task registers its
  cancel path and marker *before* waiting here, so a queued task is visible;
- ``leg_limiter``: a `trio.CapacityLimiter` shared by both background tools (R22).

**Who owns a session.** The engine's `SessionRegistry` makes a session on first use
and drops it once it has been idle for ``[server] session_idle_s``: no run, no
subscriber, and nothing else holding it (a background job, an open ask: see
`SessionHolder`). Its replay buffer goes with it. A dropped session is rebuilt on its
next use and loses nothing that was promised, because that is in the store (history,
pending tasks and their snapshots, markers, the latest task R36 decides with) or kept
by the registry for the daemon's life (the "Always allow" commands, R76). What a
rebuilt session does not have is the old replay buffer, and its events are numbered
from 1 again -- as after a restart; a subscriber never sees this, since a subscriber
keeps its session alive.
"""

from __future__ import annotations

import functools
import os
import sys
from collections import OrderedDict, deque
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Final, Generic, Protocol, TypeVar

import attrs
import trio

from agentrio.engine.conversation import Calibration
from agentrio.engine.ids import check_session_id, origin_of
from agentrio.protocol.events import Event, TokenUsage

__all__ = [
    "DEFAULT_IDLE_SESSIONS_BYTES",
    "DEFAULT_QUEUE_BYTES",
    "DEFAULT_REPLAY_BYTES",
    "MAX_SESSION_TASKS",
    "SESSION_BYTES",
    "EventHub",
    "HubStatistics",
    "LiveRun",
    "Session",
    "SessionHolder",
    "SessionRegistry",
    "SessionRegistryStatistics",
    "SessionStatistics",
    "SlowConsumer",
    "Subscription",
    "default_leg_limit",
    "event_bytes",
]

#: Tasks of one session executing at once: CPU count × 4, a constant (R50).
MAX_SESSION_TASKS: Final = (os.cpu_count() or 1) * 4

E = TypeVar("E", bound=Event)

#: ``[server] replay_bytes`` default: a session's recent events kept for replay.
DEFAULT_REPLAY_BYTES: Final = 4 * 1024 * 1024
#: ``[server] subscriber_queue_bytes`` default: events one subscriber may fall behind.
DEFAULT_QUEUE_BYTES: Final = 8 * 1024 * 1024
#: What one held event costs besides its strings (the objects around them).
_EVENT_OVERHEAD: Final = 64
#: ``[server] idle_sessions_bytes`` default: what idle sessions may hold together.
DEFAULT_IDLE_SESSIONS_BYTES: Final = 16 * 1024 * 1024
#: What an empty session holds (its hub, slots, limiter, dicts): ~2.6 KiB measured
#: with tracemalloc, rounded up.
SESSION_BYTES: Final = 3 * 1024


def event_bytes(value: object) -> int:
    """About the memory ``value`` (an event, or a field of one) holds: strings at
    their real size, containers walked, anything else a fixed overhead. Events are
    small trees of strings, so this is cheap and close enough to bound by bytes.

    Every event is measured as it is emitted, so the common kinds are told apart by
    their exact type first and an attrs class's field names are looked up once
    (`_field_names`); a subclass of ``str``, ``dict``, ``list`` or ``tuple`` (an enum
    of strings) is measured like its base."""
    kind = type(value)
    if kind is str or kind is bytes:
        return sys.getsizeof(value)
    if kind is dict:
        return _dict_bytes(value)  # type: ignore[arg-type]
    if kind is list or kind is tuple:
        return _EVENT_OVERHEAD + sum(map(event_bytes, value))  # type: ignore[call-overload]
    names = _FIELD_NAMES.get(kind)
    if names is None:
        names = _FIELD_NAMES[kind] = _field_names(kind)
    if names:
        return _EVENT_OVERHEAD + sum(event_bytes(getattr(value, name)) for name in names)
    if isinstance(value, str | bytes):
        return sys.getsizeof(value)
    if isinstance(value, dict):
        return _dict_bytes(value)
    if isinstance(value, list | tuple):
        return _EVENT_OVERHEAD + sum(map(event_bytes, value))
    return _EVENT_OVERHEAD // 4


def _dict_bytes(value: dict[Any, Any]) -> int:
    return _EVENT_OVERHEAD + sum(event_bytes(k) + event_bytes(v) for k, v in value.items())


#: Each measured type's attrs field names (empty: not an attrs class).
_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _field_names(kind: type) -> tuple[str, ...]:
    fields: tuple[attrs.Attribute[Any], ...] | None = getattr(kind, "__attrs_attrs__", None)
    return () if fields is None else tuple(field.name for field in fields)


class SlowConsumer(Exception):
    """Raised by `Subscription.receive` once the subscriber fell more than its byte
    budget behind: its queue was dropped (the memory is freed at once) and it must
    resubscribe, replaying what the session still keeps."""


def default_leg_limit() -> int:
    """``MAX_BACKGROUND_TASKS`` default: half the CPU count, at least 3 (R22)."""
    return max(3, (os.cpu_count() or 1) // 2)


@attrs.frozen
class HubStatistics:
    seq: int
    subscribers: int
    replay_buffered: int
    dropped_total: int
    replay_bytes: int = 0


class Subscription:
    """A bounded queue of ``(task_hash, event)`` for one subscriber.

    Two bounds, so a slow consumer never slows a task down nor holds memory without
    limit:

    - by count: past ``capacity`` events the *oldest* are dropped and counted in
      ``dropped`` (it can tell from ``seq`` that it missed something);
    - by bytes: once more than ``max_bytes`` (`event_bytes`) are queued the whole
      queue is dropped and the subscription is *over*: `receive` raises
      `SlowConsumer`, and the transport ends the subscriber with a reason (WebSocket
      close 4008, SSE a final ``: dropped`` comment). Many small events are thinned;
      a flood of big ones ends the subscriber, who resubscribes and replays.
    """

    def __init__(self, capacity: int, max_bytes: int = DEFAULT_QUEUE_BYTES) -> None:
        self._queue: deque[tuple[str, Event, int]] = deque()
        self._capacity = capacity
        self._max_bytes = max_bytes
        self._wakeup = trio.Event()
        self.queued_bytes = 0
        self.dropped = 0
        self.closed = False
        self.overflowed = False

    def _put(self, item: tuple[str, Event], size: int) -> None:
        if self.overflowed:
            self.dropped += 1
            return
        if len(self._queue) >= self._capacity:
            self.queued_bytes -= self._queue.popleft()[2]
            self.dropped += 1
        self._queue.append((item[0], item[1], size))
        self.queued_bytes += size
        if self.queued_bytes > self._max_bytes:
            self.dropped += len(self._queue)
            self._queue.clear()
            self.queued_bytes = 0
            self.overflowed = True
            self.closed = True
        self._wakeup.set()

    def _take(self) -> tuple[str, Event]:
        task_hash, event, size = self._queue.popleft()
        self.queued_bytes -= size
        return task_hash, event

    async def receive(self) -> tuple[str, Event]:
        """The next ``(task_hash, event)``; raises `trio.EndOfChannel` once closed and
        drained, `SlowConsumer` once it fell more than its byte budget behind."""
        while not self._queue:
            if self.overflowed:
                raise SlowConsumer(self.overflow_reason)
            if self.closed:
                raise trio.EndOfChannel
            self._wakeup = trio.Event()
            await self._wakeup.wait()
        return self._take()

    def receive_nowait(self) -> tuple[str, Event]:
        if self.overflowed:
            raise SlowConsumer(self.overflow_reason)
        if not self._queue:
            raise trio.WouldBlock
        return self._take()

    @property
    def overflow_reason(self) -> str:
        return (
            f"slow consumer: more than {self._max_bytes} bytes of events queued; "
            "resubscribe to replay"
        )

    def close(self) -> None:
        self.closed = True
        self._wakeup.set()

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> tuple[str, Event]:
        try:
            return await self.receive()
        except trio.EndOfChannel:
            raise StopAsyncIteration from None


class EventHub:
    """Numbers a session's events and fans them out.

    `subscribe` copies the recent events into the new subscription and registers it in
    one synchronous step, so replay and live events join with no gap and no repeat.

    The replay buffer keeps at most ``replay`` events and ``replay_bytes`` bytes
    (`event_bytes`), the oldest going first: a session flooded with 1 MiB inputs keeps
    a few of them, not hundreds. Each subscription gets ``queue_bytes`` (see
    `Subscription`).
    """

    def __init__(
        self,
        *,
        clock: Callable[[], float],
        replay: int = 512,
        queue_capacity: int = 2048,
        replay_bytes: int = DEFAULT_REPLAY_BYTES,
        queue_bytes: int = DEFAULT_QUEUE_BYTES,
    ) -> None:
        self._clock = clock
        self._recent: deque[tuple[str, Event, int]] = deque()
        self._replay = replay
        self._replay_bytes = replay_bytes
        self._recent_bytes = 0
        self._subscribers: set[Subscription] = set()
        self._queue_capacity = queue_capacity
        self._queue_bytes = queue_bytes
        self._seq = 0
        self._dropped_closed = 0
        #: Told of every event made here (not of injected ones): the relay that
        #: carries them to other daemons (`agentrio.engine.server.peer_events`), if any.
        self.sink: Callable[[str, Event], None] | None = None

    def emit(self, task_hash: str, kind: type[E], **fields: Any) -> E:
        """Make an event of ``kind`` with the next ``seq`` and now's ``at``, and fan it out."""
        self._seq += 1
        event = kind(seq=self._seq, at=self._clock(), **fields)
        self._fan_out(task_hash, event)
        if self.sink is not None:
            self.sink(task_hash, event)
        return event

    def inject(self, task_hash: str, event: Event) -> Event:
        """Fan out an event another daemon made for this session (issue 21): it is
        numbered with this hub's next ``seq`` (``at`` is kept), so a subscriber here
        sees one increasing sequence whichever daemon ran the task."""
        self._seq += 1
        renumbered = attrs.evolve(event, seq=self._seq)
        self._fan_out(task_hash, renumbered)
        return renumbered

    def _fan_out(self, task_hash: str, event: Event) -> None:
        item = (task_hash, event)
        size = event_bytes(event)
        self._recent.append((task_hash, event, size))
        self._recent_bytes += size
        while self._recent and (
            len(self._recent) > self._replay or self._recent_bytes > self._replay_bytes
        ):
            self._recent_bytes -= self._recent.popleft()[2]
        for subscription in self._subscribers:
            subscription._put(item, size)

    @contextmanager
    def subscribe(self, *, replay: bool = True) -> Iterator[Subscription]:
        subscription = Subscription(self._queue_capacity, self._queue_bytes)
        if replay:
            for task_hash, event, size in self._recent:
                subscription._put((task_hash, event), size)
        self._subscribers.add(subscription)
        try:
            yield subscription
        finally:
            self._subscribers.discard(subscription)
            self._dropped_closed += subscription.dropped
            subscription.close()

    @property
    def subscribers(self) -> int:
        """How many subscriptions are open now."""
        return len(self._subscribers)

    def events_of(self, task_hash: str) -> list[Event]:
        """The recent events of one task (for tests and late joiners)."""
        return [event for owner, event, _ in self._recent if owner == task_hash]

    def statistics(self) -> HubStatistics:
        return HubStatistics(
            seq=self._seq,
            subscribers=len(self._subscribers),
            replay_buffered=len(self._recent),
            replay_bytes=self._recent_bytes,
            dropped_total=self._dropped_closed + sum(s.dropped for s in self._subscribers),
        )


@attrs.frozen
class SessionStatistics:
    session_id: str
    tasks_running: int
    tasks_queued: int
    slots_free: int
    legs_running: int
    legs_limit: int
    hub: HubStatistics


class LiveRun(Protocol):
    """What a session needs to know of its runs (`agentrio.engine.runs.TaskRun` is one)."""

    @property
    def queued(self) -> bool:
        """Still waiting for a session slot (R50)."""
        ...


R = TypeVar("R", bound=LiveRun)


class Session(Generic[R]):
    """One conversation's live state (see the module docstring); ``R`` is the type of
    its runs, so this module needs nothing of the agent loop."""

    def __init__(
        self,
        session_id: str,
        *,
        clock: Callable[[], float],
        leg_limit: int | None = None,
        replay_bytes: int = DEFAULT_REPLAY_BYTES,
        queue_bytes: int = DEFAULT_QUEUE_BYTES,
    ) -> None:
        self.id = session_id
        self.origin = origin_of(session_id)
        self.hub = EventHub(clock=clock, replay_bytes=replay_bytes, queue_bytes=queue_bytes)
        self.slots = trio.Semaphore(MAX_SESSION_TASKS)
        self.leg_limiter = trio.CapacityLimiter(leg_limit or default_leg_limit())
        #: Runs of this session in this process, queued or executing, by task hash.
        self.runs: dict[str, R] = {}
        #: The task most recently started here (R36 decides new hashes with it); None
        #: in a session made in this process before its first task (the store knows).
        self.latest_task: str | None = None
        #: `trio.current_time` when the registry's sweep first found the session idle
        #: and unused since; None while it is busy or was used since.
        self.idle_since: float | None = None
        #: The token estimate's calibration and the model usage of this session's
        #: tasks, for this daemon's life (`agentrio.engine.compaction`).
        self.calibration = Calibration()
        self.usage = TokenUsage()
        #: The ``AGENTS.md`` files a task of this session was told, each announced
        #: once (``agents_md``, `agentrio.engine.system_prompt`).
        self.agents_shown: set[str] = set()

    def statistics(self) -> SessionStatistics:
        queued = sum(1 for run in self.runs.values() if run.queued)
        return SessionStatistics(
            session_id=self.id,
            tasks_running=len(self.runs) - queued,
            tasks_queued=queued,
            slots_free=self.slots.value,
            legs_running=int(self.leg_limiter.borrowed_tokens),
            legs_limit=int(self.leg_limiter.total_tokens),
            hub=self.hub.statistics(),
        )


class SessionHolder(Protocol):
    """Something outside the session that still needs some sessions alive: the
    pending registry (an open ask of a session) and the background jobs (a job's
    session, where its reports and follow-up go)."""

    def sessions_in_use(self) -> Collection[str]:
        """The ids of the sessions this holder needs now."""
        ...


@attrs.frozen
class SessionRegistryStatistics:
    #: Sessions in memory now.
    live: int
    #: Sessions dropped since the engine started.
    dropped_total: int


class SessionRegistry(Generic[R]):
    """Every live session of one engine: made on first use, dropped once idle.

    A session is idle while it has no run, no subscriber, and no `SessionHolder`
    names it. `run_sweeps` (a loop the engine's nursery owns) looks every
    ``idle_s / 2`` seconds of Trio time and drops a session that was idle at two
    looks ``idle_s`` apart and not used in between (`session` counts as a use): a
    session goes between ``idle_s`` and ``1.5 * idle_s`` after its last use. With
    ``idle_s`` 0 nothing is ever dropped.

    A dropped session's "Always allow" commands are kept here and handed to the
    session made for the same id later: they live as long as the daemon (R76).

    **A bound on idle memory** (issue 23). Waiting ``idle_s`` alone let a daemon that
    finished many tasks in many sessions hold every one of their replay buffers for
    ten minutes: 100,000 finished tasks in 1,000 sessions kept ~250 MiB of events with
    nothing live. So a session whose last run ended (`run_ended`) is charged what it
    holds (its replay bytes and `SESSION_BYTES`) to ``idle_bytes``, daemon-wide; past
    it the longest-quiet sessions that are still idle are dropped at once, down to
    three quarters of the bound (so the holders are asked once per batch, not per
    run). A quiet session used again leaves the account. With ``idle_s`` 0 nothing is
    dropped this way either.
    """

    def __init__(
        self,
        *,
        clock: Callable[[], float],
        idle_s: float,
        leg_limit: int | None = None,
        holders: Sequence[SessionHolder] = (),
        replay_bytes: int = DEFAULT_REPLAY_BYTES,
        queue_bytes: int = DEFAULT_QUEUE_BYTES,
        idle_bytes: int = DEFAULT_IDLE_SESSIONS_BYTES,
    ) -> None:
        self._clock = clock
        self._idle_s = idle_s
        self._idle_bytes = idle_bytes
        #: Sessions whose last run ended, oldest first: id → bytes charged then.
        self._quiet: OrderedDict[str, int] = OrderedDict()
        self._quiet_bytes = 0
        self._replay_bytes = replay_bytes
        self._queue_bytes = queue_bytes
        self._leg_limit = leg_limit
        self._holders = tuple(holders)
        self._live: dict[str, Session[R]] = {}
        self._dropped_total = 0
        self._event_sink: Callable[[str, str, Event], None] | None = None

    def set_event_sink(self, sink: Callable[[str, str, Event], None] | None) -> None:
        """Tell ``sink(session_id, task_hash, event)`` of every event any session makes
        from now on (`EventHub.sink`): live sessions and those made later."""
        self._event_sink = sink
        for session in self._live.values():
            self._attach_sink(session)

    def _attach_sink(self, session: Session[R]) -> None:
        sink = self._event_sink
        session.hub.sink = None if sink is None else functools.partial(sink, session.id)

    def session(self, session_id: str) -> Session[R]:
        """The live session ``session_id``, made (or rebuilt) on first use; marks it used."""
        session = self._live.get(session_id)
        if session is None:
            check_session_id(session_id)
            session = Session(
                session_id,
                clock=self._clock,
                leg_limit=self._leg_limit,
                replay_bytes=self._replay_bytes,
                queue_bytes=self._queue_bytes,
            )
            self._live[session_id] = session
            self._attach_sink(session)
        else:
            self._unquiet(session_id)
        session.idle_since = None
        return session

    def get(self, session_id: str) -> Session[R] | None:
        """The live session ``session_id`` if there is one; never makes one."""
        return self._live.get(session_id)

    def live(self) -> list[Session[R]]:
        return list(self._live.values())

    def __len__(self) -> int:
        return len(self._live)

    def sweep(self, now: float) -> int:
        """One look at every session (see the class docstring); returns how many
        were dropped. ``now`` is `trio.current_time`."""
        if self._idle_s <= 0:
            return 0
        held: set[str] = set()
        for holder in self._holders:
            held.update(holder.sessions_in_use())
        dropped = 0
        for session_id, session in list(self._live.items()):
            if session.runs or session.hub.subscribers or session_id in held:
                session.idle_since = None
            elif session.idle_since is None:
                session.idle_since = now
            elif now - session.idle_since >= self._idle_s:
                self._drop(session)
                dropped += 1
        return dropped

    def run_ended(self, session: Session[R]) -> None:
        """Note that a run of ``session`` ended: with none left and no subscriber it
        is charged to the idle bound, which may drop the longest-quiet sessions (see
        the class docstring)."""
        if self._idle_s <= 0 or session.runs or session.hub.subscribers:
            return
        if self._live.get(session.id) is not session:
            return
        self._unquiet(session.id)
        charge = session.hub.statistics().replay_bytes + SESSION_BYTES
        self._quiet[session.id] = charge
        self._quiet_bytes += charge
        if self._quiet_bytes > self._idle_bytes:
            self._drop_quiet(self._idle_bytes * 3 // 4)

    def _drop_quiet(self, target: int) -> None:
        held: set[str] = set()
        for holder in self._holders:
            held.update(holder.sessions_in_use())
        while self._quiet and self._quiet_bytes > target:
            session_id, charge = self._quiet.popitem(last=False)
            self._quiet_bytes -= charge
            session = self._live[session_id]
            if not (session.runs or session.hub.subscribers or session_id in held):
                self._drop(session)

    def _unquiet(self, session_id: str) -> None:
        charge = self._quiet.pop(session_id, None)
        if charge is not None:
            self._quiet_bytes -= charge

    def _drop(self, session: Session[R]) -> None:
        self._unquiet(session.id)
        del self._live[session.id]
        self._dropped_total += 1

    async def run_sweeps(self, *, task_status: trio.TaskStatus[None]) -> None:
        """The idle sweep, until cancelled (by the engine's shutdown, cause ``shutdown``).
        Returns at once when dropping is turned off (``idle_s`` 0)."""
        task_status.started()
        if self._idle_s <= 0:
            return
        while True:
            await trio.sleep(self._idle_s / 2)
            self.sweep(trio.current_time())

    def statistics(self) -> SessionRegistryStatistics:
        return SessionRegistryStatistics(
            live=len(self._live),
            dropped_total=self._dropped_total,
        )
