"""What a script holds besides the `Client`: runs, listeners, subscriptions, decisions.

Each handle is filled by the connection's reader task (through the methods marked
"the reader's side", which never block) and read by the script. Their buffers are
bounded (`agentrio.inbox`). A handle reaches back to its client only through
`Controls`, the few calls it needs, so this module does not import the client.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable
from typing import Protocol, TypeAlias

import attrs
import trio

from agentrio.errors import ClientError
from agentrio.inbox import Inbox, Limits, RecentSeqs
from agentrio.protocol.asks import Answer, DeniedBy
from agentrio.protocol.events import Done, Event
from agentrio.protocol.frames import (
    Accepted,
    Ask,
    DoneFrame,
    EventFrame,
    Verify,
    Withdrawn,
)

__all__ = [
    "AskNotice",
    "Controls",
    "Decision",
    "EventCursor",
    "Listener",
    "Rule",
    "RunHandle",
    "Subscription",
    "as_decision",
]

#: What a `Listener` or `RunHandle.asks` yields.
AskNotice: TypeAlias = Ask | Withdrawn | Verify


@attrs.frozen(kw_only=True)
class Decision(Answer):
    """An answer to an ask (the protocol's `Answer`, with its defaults). Confirmations
    use ``approve`` (+ ``reason`` when denying, ``remember``, ``allow_turn``,
    ``stop``: ``Cause.USER_CANCELED`` discards the task, ``Cause.USER_ABORTED`` keeps
    it to resume, ``password``, and ``rule``: the kind of one of the ask's ``offers``
    to remember); questions use ``answers``, one per question."""

    @classmethod
    def allow(cls, *, remember: bool = False, allow_turn: bool = False, rule: str = "") -> Decision:
        return cls(approve=True, remember=remember, allow_turn=allow_turn, rule=rule)

    @classmethod
    def deny(cls, reason: str = "", *, denied_by: DeniedBy = "person") -> Decision:
        """Deny with ``reason``; ``denied_by="policy"`` when a program's policy denies
        for the person (the model is told so, not that the user denied it)."""
        return cls(approve=False, reason=reason, denied_by=denied_by)

    @classmethod
    def answer(cls, *answers: str) -> Decision:
        return cls(answers=list(answers))


#: A rule decides an ask: a `Decision`, or a bool (approve / deny).
Rule: TypeAlias = Callable[[Ask], Decision | bool | Awaitable[Decision | bool]]


def as_decision(value: Decision | bool) -> Decision:
    """``value`` as a `Decision` (True: allow; False: deny "denied by rule")."""
    if isinstance(value, Decision):
        return value
    return Decision.allow() if value else Decision.deny("denied by rule")


class Controls(Protocol):
    """The calls of a `Client` that its handles make (``run.cancel()`` is
    ``client.cancel(run.task_hash)``)."""

    async def cancel(self, task_hash: str) -> None: ...

    async def pause(self, task_hash: str) -> None: ...

    async def steer(self, session_id: str, task_hash: str, text: str) -> None: ...

    async def decide(self, ask_id: str, decision: Decision | bool) -> None: ...


class Listener(Inbox[AskNotice]):
    """Asks of sessions whose id starts with ``prefix`` (R2), as an async iterator of
    `Ask` frames and the `Withdrawn`/`Verify` notices that follow them. Ends when the
    connection closes. Answer with `Client.reply` or `Client.decide`.

    Holds at most ``Limits.notices`` unread items (the oldest dropped first)."""

    def __init__(self, client: Controls, prefix: str, limits: Limits) -> None:
        super().__init__(limits.notices, name=f"listener {prefix!r}")
        self.client = client
        self.prefix = prefix


class Subscription(Inbox[EventFrame]):
    """Every event of one session (recent ones replayed first), as `EventFrame`s
    (``task_hash`` says which task). A subscriber also counts as a listener for the
    session's confirmations (R8 B): they arrive as ``confirm`` events; answer them
    with `Client.reply` ``(event.confirm_hash, …)``.

    Holds at most ``Limits.events`` unread events: past that the oldest is dropped
    and counted (``statistics().dropped``), as the daemon does for a slow subscriber."""

    def __init__(self, session_id: str, limits: Limits) -> None:
        super().__init__(limits.events, name=f"subscription {session_id!r}")
        self.session_id = session_id
        self._seen = RecentSeqs(limits.events)

    def offer(self, frame: EventFrame) -> None:
        """The reader's side: queue ``frame`` unless its copy was queued already."""
        if self._seen.add(frame.event.seq):
            self.put(frame)


class RunHandle:
    """One ``run`` or ``pending`` request: its task hash (once ``accepted``), its
    events, its asks and its one ``done``.

    `events` may be iterated any number of times, each time from the first event
    kept; it ends after the task's last event. At most ``Limits.events`` events are
    kept (the oldest dropped first, counted in `events_dropped`). `asks` yields the
    task's asks (unless the run was started with ``on_ask``, which answers them).
    """

    def __init__(
        self,
        client: Controls,
        request_id: str,
        session_id: str,
        on_ask: Rule | None,
        limits: Limits,
    ) -> None:
        self.client = client
        self.request_id = request_id
        self.session_id = session_id
        self.on_ask = on_ask
        #: The task hash; empty until ``accepted`` arrived.
        self.task_hash = ""
        #: The ``done`` frame, once it arrived.
        self.done: DoneFrame | None = None
        #: Events dropped to keep at most ``Limits.events``.
        self.events_dropped = 0
        self._events: deque[Event] = deque(maxlen=limits.events)
        self._asks: Inbox[AskNotice] = Inbox(limits.notices, name=f"asks of {request_id}")
        self._seen = RecentSeqs(limits.events)
        self._accepted = trio.Event()
        self._finished = trio.Event()
        self._changed = trio.Event()
        self._failure: ClientError | None = None

    @property
    def events_so_far(self) -> list[Event]:
        """Every event received and kept so far, in order (a copy)."""
        return list(self._events)

    @property
    def final_text(self) -> str:
        """The text of the task's ``done`` event ("" unless it finished)."""
        for event in reversed(self._events):
            if isinstance(event, Done):
                return event.text
        return ""

    def events(self) -> EventCursor:
        """The task's events from the first one kept; the iteration ends after
        ``done``. A plain iterator, not an async generator: breaking out of it needs
        no cleanup."""
        return EventCursor(self)

    def asks(self) -> Inbox[AskNotice]:
        """The task's asks (and their withdrawn / verify notices)."""
        return self._asks

    async def wait_accepted(self) -> None:
        """Return once the run was accepted, refused or cut off (`task_hash` is then
        set only if it was accepted)."""
        await self._accepted.wait()

    async def wait_done(self) -> DoneFrame:
        """The ``done`` frame (any status); raises `Disconnected` when the connection
        closed first."""
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
        if self._finished.is_set() or not self._seen.add(event.seq):
            return
        if len(self._events) == self._events.maxlen:
            self.events_dropped += 1
        self._events.append(event)
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
    """Iterates a `RunHandle`'s events from the first kept; see `RunHandle.events`.

    Positions count every event the run received, so a cursor that fell more than
    ``Limits.events`` behind continues at the oldest event still kept."""

    def __init__(self, handle: RunHandle) -> None:
        self._handle = handle
        self._position = handle.events_dropped

    def __aiter__(self) -> EventCursor:
        return self

    async def __anext__(self) -> Event:
        handle = self._handle
        await trio.lowlevel.checkpoint()  # before taking an event: a cancel loses none
        while True:
            first = handle.events_dropped
            self._position = max(self._position, first)
            if self._position < first + len(handle._events):
                break
            if handle._finished.is_set():
                raise StopAsyncIteration
            await handle._changed.wait()
        self._position += 1
        return handle._events[self._position - 1 - first]
