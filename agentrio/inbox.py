"""Bounded queues between the connection's one reader task and a script's consumers.

The reader task decodes every frame and must never wait for a consumer: a consumer
that waits for the reader (any control call, e.g. `Client.reply` inside a loop over a
`Listener`) would otherwise deadlock the connection. So back-pressure is not an
option here, and every queue the reader fills is bounded by **dropping the oldest
item** once it holds its limit, counting the drops (`Inbox.statistics`) and logging
the first one. Nothing a script has not read is lost below the limit; a script that
stops reading only loses old items, it never stalls the connection or grows memory
without bound. The daemon's own per-subscriber queues follow the same policy.

The limits (`Limits`) are per inbox: a `Listener`, `Client.asks`, a run's asks and a
`Subscription` each hold at most their limit; a `RunHandle` keeps at most
``Limits.events`` events (an `EventCursor` that fell behind skips to the oldest kept).
"""

from __future__ import annotations

import logging
from collections import deque
from typing import Final, Generic, TypeVar

import attrs
import trio

__all__ = ["Inbox", "InboxStatistics", "Limits", "RecentSeqs"]

log = logging.getLogger("agentrio.client")

T = TypeVar("T")

#: Drops logged at warning level: the first, then one in this many.
_LOG_EVERY: Final = 1000


@attrs.frozen(kw_only=True)
class Limits:
    """How much the client buffers for consumers that read slowly (see the module
    docstring for what happens past a limit)."""

    #: Items in one asks inbox: a `Listener`, `Client.asks`, a run's `RunHandle.asks`
    #: (asks with their ``withdrawn``/``verify`` notices).
    notices: int = 1024
    #: Events in one `Subscription`, and events a `RunHandle` keeps for its cursors.
    events: int = 10_000

    def __attrs_post_init__(self) -> None:
        if self.notices < 1 or self.events < 1:
            raise ValueError("limits must be at least 1")


@attrs.frozen(kw_only=True)
class InboxStatistics:
    """What an inbox holds and has lost (like `trio.MemoryChannelStatistics`)."""

    buffered: int
    max_buffer: int
    peak_buffered: int
    #: Items dropped (the oldest first) because the inbox was full.
    dropped: int
    closed: bool


class Inbox(Generic[T]):
    """A bounded FIFO filled by the reader task (`put` never blocks) and read by one
    consumer at a time (`receive`, or ``async for``); it ends once closed and drained.

    `put` on a full inbox drops the oldest item first; `put` after `close` drops the
    item (its consumer is gone).
    """

    def __init__(self, max_buffer: int, *, name: str = "inbox") -> None:
        if max_buffer < 1:
            raise ValueError("max_buffer must be at least 1")
        self._items: deque[T] = deque()
        self._max = max_buffer
        self._name = name
        self._lot = trio.lowlevel.ParkingLot()
        self._closed = False
        self._dropped = 0
        self._peak = 0

    def put(self, item: T) -> None:
        if self._closed:
            log.debug("dropped %r: its consumer has ended", item)
            return
        if len(self._items) >= self._max:
            self._items.popleft()
            self._dropped += 1
            if self._dropped % _LOG_EVERY == 1:
                log.warning(
                    "%s is full (%d): dropped its oldest item (%d so far)",
                    self._name,
                    self._max,
                    self._dropped,
                )
        self._items.append(item)
        self._peak = max(self._peak, len(self._items))
        self._lot.unpark_all()

    def close(self) -> None:
        """No more items: the consumer reads what is left, then the inbox ends."""
        self._closed = True
        self._lot.unpark_all()

    def receive_nowait(self) -> T:
        """The next item; `trio.WouldBlock` when none is there yet,
        `trio.EndOfChannel` once closed and drained."""
        if self._items:
            return self._items.popleft()
        if self._closed:
            raise trio.EndOfChannel
        raise trio.WouldBlock

    async def receive(self) -> T:
        """The next item, waiting for one; raises `trio.EndOfChannel` once closed and
        drained. Always a checkpoint; a cancelled `receive` takes no item."""
        await trio.lowlevel.checkpoint_if_cancelled()
        scheduled = False
        while True:
            if self._items and not scheduled:
                await trio.lowlevel.cancel_shielded_checkpoint()
                scheduled = True
                continue
            try:
                return self.receive_nowait()
            except trio.WouldBlock:
                await self._lot.park()
                scheduled = True

    def statistics(self) -> InboxStatistics:
        return InboxStatistics(
            buffered=len(self._items),
            max_buffer=self._max,
            peak_buffered=self._peak,
            dropped=self._dropped,
            closed=self._closed,
        )

    def __aiter__(self) -> Inbox[T]:
        return self

    async def __anext__(self) -> T:
        try:
            return await self.receive()
        except trio.EndOfChannel:
            raise StopAsyncIteration from None


class RecentSeqs:
    """The last ``size`` event numbers seen, to drop a second copy of an event (the
    daemon sends a task's events once for its run and once for a subscription of its
    session, close together). Bounded: a copy arriving more than ``size`` events
    after the first would pass again."""

    def __init__(self, size: int) -> None:
        self._order: deque[int] = deque()
        self._seen: set[int] = set()
        self._size = size

    def add(self, seq: int) -> bool:
        """Remember ``seq``; False when it was seen already."""
        if seq in self._seen:
            return False
        self._seen.add(seq)
        self._order.append(seq)
        if len(self._order) > self._size:
            self._seen.discard(self._order.popleft())
        return True
