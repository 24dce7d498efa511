"""Per-session state: the event hub, the task slots, the leg limiter, the live runs.

A session is cheap and lives in memory while it has work; everything that must
survive a restart is in the store. Each session owns:

- an `EventHub`: numbered events fanned out to bounded per-subscriber queues;
- ``slots``: a `trio.Semaphore` of `MAX_SESSION_TASKS` (R50) — a task registers its
  cancel path and marker *before* waiting here, so a queued task is visible;
- ``leg_limiter``: a `trio.CapacityLimiter` shared by both background tools (R22).
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Final, TypeVar

import attrs
import trio

from engine.ids import origin_of
from engine.tools.allowed import AllowedCommands
from protocol.events import Event

if TYPE_CHECKING:
    from engine.runs import TaskRun

__all__ = [
    "MAX_SESSION_TASKS",
    "EventHub",
    "HubStatistics",
    "Session",
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


class Session:
    """One conversation's live state (see the module docstring)."""

    def __init__(
        self, session_id: str, *, clock: Callable[[], float], leg_limit: int | None = None
    ) -> None:
        self.id = session_id
        self.origin = origin_of(session_id)
        self.hub = EventHub(clock=clock)
        self.slots = trio.Semaphore(MAX_SESSION_TASKS)
        self.leg_limiter = trio.CapacityLimiter(leg_limit or default_leg_limit())
        #: Runs of this session in this process, queued or executing, by task hash.
        self.runs: dict[str, TaskRun] = {}
        #: The task most recently started here (R36 decides new hashes with it).
        self.latest_task: str | None = None
        #: Commands the user chose "Always allow" for, in this session (R76).
        self.allowed = AllowedCommands()

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
