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

import os
from collections import deque
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Final, Generic, Protocol, TypeVar

import attrs
import trio

from engine.ids import check_session_id, origin_of
from engine.tools.allowed import AllowedCommands
from protocol.events import Event

__all__ = [
    "MAX_SESSION_TASKS",
    "EventHub",
    "HubStatistics",
    "LiveRun",
    "Session",
    "SessionHolder",
    "SessionRegistry",
    "SessionRegistryStatistics",
    "SessionStatistics",
    "Subscription",
    "default_leg_limit",
]

#: Tasks of one session executing at once: CPU count × 4, a constant (R50).
MAX_SESSION_TASKS: Final = (os.cpu_count() or 1) * 4

E = TypeVar("E", bound=Event)


def default_leg_limit() -> int:
    """``MAX_BACKGROUND_TASKS`` default: half the CPU count, at least 3 (R22)."""
    return max(3, (os.cpu_count() or 1) // 2)


@attrs.frozen
class HubStatistics:
    seq: int
    subscribers: int
    replay_buffered: int
    dropped_total: int


class Subscription:
    """A bounded queue of ``(task_hash, event)`` for one subscriber.

    When the subscriber falls behind by more than its capacity the *oldest* events are
    dropped and counted in ``dropped``: a slow consumer never slows a task down and
    can tell from ``seq`` that it missed something.
    """

    def __init__(self, capacity: int) -> None:
        self._queue: deque[tuple[str, Event]] = deque()
        self._capacity = capacity
        self._wakeup = trio.Event()
        self.dropped = 0
        self.closed = False

    def _put(self, item: tuple[str, Event]) -> None:
        if len(self._queue) >= self._capacity:
            self._queue.popleft()
            self.dropped += 1
        self._queue.append(item)
        self._wakeup.set()

    async def receive(self) -> tuple[str, Event]:
        """The next ``(task_hash, event)``; raises `trio.EndOfChannel` once closed and
        drained."""
        while not self._queue:
            if self.closed:
                raise trio.EndOfChannel
            self._wakeup = trio.Event()
            await self._wakeup.wait()
        return self._queue.popleft()

    def receive_nowait(self) -> tuple[str, Event]:
        if not self._queue:
            raise trio.WouldBlock
        return self._queue.popleft()

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
    """

    def __init__(
        self, *, clock: Callable[[], float], replay: int = 512, queue_capacity: int = 2048
    ) -> None:
        self._clock = clock
        self._recent: deque[tuple[str, Event]] = deque(maxlen=replay)
        self._subscribers: set[Subscription] = set()
        self._queue_capacity = queue_capacity
        self._seq = 0
        self._dropped_closed = 0

    def emit(self, task_hash: str, kind: type[E], **fields: Any) -> E:
        """Make an event of ``kind`` with the next ``seq`` and now's ``at``, and fan it out."""
        self._seq += 1
        event = kind(seq=self._seq, at=self._clock(), **fields)
        item = (task_hash, event)
        self._recent.append(item)
        for subscription in self._subscribers:
            subscription._put(item)
        return event

    @contextmanager
    def subscribe(self, *, replay: bool = True) -> Iterator[Subscription]:
        subscription = Subscription(self._queue_capacity)
        if replay:
            for item in self._recent:
                subscription._put(item)
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
        return [event for owner, event in self._recent if owner == task_hash]

    def statistics(self) -> HubStatistics:
        return HubStatistics(
            seq=self._seq,
            subscribers=len(self._subscribers),
            replay_buffered=len(self._recent),
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
    """What a session needs to know of its runs (`engine.runs.TaskRun` is one)."""

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
        allowed: AllowedCommands | None = None,
    ) -> None:
        self.id = session_id
        self.origin = origin_of(session_id)
        self.hub = EventHub(clock=clock)
        self.slots = trio.Semaphore(MAX_SESSION_TASKS)
        self.leg_limiter = trio.CapacityLimiter(leg_limit or default_leg_limit())
        #: Runs of this session in this process, queued or executing, by task hash.
        self.runs: dict[str, R] = {}
        #: The task most recently started here (R36 decides new hashes with it); None
        #: in a session made in this process before its first task (the store knows).
        self.latest_task: str | None = None
        #: Commands the user chose "Always allow" for, in this session (R76).
        self.allowed = allowed if allowed is not None else AllowedCommands()
        #: `trio.current_time` when the registry's sweep first found the session idle
        #: and unused since; None while it is busy or was used since.
        self.idle_since: float | None = None

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
    #: Dropped sessions whose "Always allow" commands the registry keeps (R76).
    kept_rules: int


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
    """

    def __init__(
        self,
        *,
        clock: Callable[[], float],
        idle_s: float,
        leg_limit: int | None = None,
        holders: Sequence[SessionHolder] = (),
    ) -> None:
        self._clock = clock
        self._idle_s = idle_s
        self._leg_limit = leg_limit
        self._holders = tuple(holders)
        self._live: dict[str, Session[R]] = {}
        self._kept_rules: dict[str, AllowedCommands] = {}
        self._dropped_total = 0

    def session(self, session_id: str) -> Session[R]:
        """The live session ``session_id``, made (or rebuilt) on first use; marks it used."""
        session = self._live.get(session_id)
        if session is None:
            check_session_id(session_id)
            session = Session(
                session_id,
                clock=self._clock,
                leg_limit=self._leg_limit,
                allowed=self._kept_rules.pop(session_id, None),
            )
            self._live[session_id] = session
        session.idle_since = None
        return session

    def get(self, session_id: str) -> Session[R] | None:
        """The live session ``session_id`` if there is one; never makes one."""
        return self._live.get(session_id)

    def live(self) -> list[Session[R]]:
        return list(self._live.values())

    def __len__(self) -> int:
        return len(self._live)

    def allowed(self, session_id: str) -> AllowedCommands | None:
        """The session's remembered commands, live or kept since it was dropped."""
        session = self._live.get(session_id)
        return session.allowed if session is not None else self._kept_rules.get(session_id)

    def forget_kept_rules_if_empty(self, session_id: str) -> None:
        """Stop keeping a dropped session's rules once the last one was removed."""
        kept = self._kept_rules.get(session_id)
        if kept is not None and not kept.rules():
            del self._kept_rules[session_id]

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

    def _drop(self, session: Session[R]) -> None:
        del self._live[session.id]
        if session.allowed.rules():
            self._kept_rules[session.id] = session.allowed
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
            kept_rules=len(self._kept_rules),
        )
