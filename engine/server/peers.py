"""Daemons that share one Redis: who is alive, and a request/answer bus (issue 21).

Several daemons on one Redis store (same URL and prefix, docs/deployment.md) serve the
same sessions. The store already makes a resume's claim atomic across them (R37); what
lives in one daemon's memory -- the runs it executes, the questions they wait on, the
front-ends connected to it -- is reached from the others through this bus, on Redis
pub/sub under the store's prefix:

- ``<prefix>bus``, read by every daemon: heartbeats, goodbyes, and requests whose
  target is not known (a cancel of a task that runs *somewhere*);
- ``<prefix>bus:<daemon id>``, read by that daemon alone: what is meant for it.

**Liveness.** Every daemon broadcasts a `Heartbeat` every `HEARTBEAT_S` (with its
routable listeners, `agentrio.engine.server.peer_asks`), one at once when a listener comes or
goes (`announce`: a new one is acknowledged to its front-end only once every peer
confirmed it), and a `Goodbye` when it stops. A peer
not heard from for `PEER_TIMEOUT_S` is dead: whatever depended on it is torn down the
way a closed connection is (its listeners' asks fail closed, its tasks' asks are
withdrawn). A Redis outage looks like every peer dying at once, which is the safe
reading: nothing is ever approved because a message was lost.

**Requests** (`request`) are broadcast or sent to one daemon and wait for one
`PeerAnswer` per daemon asked, at most `REQUEST_TIMEOUT_S`; a daemon that does not
answer in time counts as "not found there". Pub/sub delivers at most once, so a
request may be lost but is never carried out twice by the bus.

**Signed.** Every message (and every relayed event, `agentrio.engine.server.peer_events`) is
signed with an HMAC-SHA256 keyed by the daemons' shared token (`BusKey`): a message
whose signature does not verify is logged and ignored. So whoever can publish on the
Redis but does not hold the token cannot answer an ask -- approve a command -- or show
a person an event no daemon made. Daemons with different tokens do not hear each other.

A signature also binds *where* and *when* (issue 29 finding 10): the channel a message
was published on (or the session stream an event was appended to), the time it was
signed and a number the signer never repeats; the sender is inside the signed text.
So a message copied to another channel, or an event copied into another session's
stream, does not verify; one signed more than `SIGNATURE_WINDOW_S` ago (by the wall
clock: the daemons' clocks must agree within that) is refused; and `ReplayGuard`
refuses a number already seen from that sender -- a replayed heartbeat cannot keep a
dead daemon alive, nor a replayed answer approve twice.

The bus is owned by the server (`agentrio.engine.server.lifecycle.open_server` runs `run` in
its nursery) and starts no task outside it.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import logging
import math
import secrets
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final, Protocol

import attrs
import trio

from agentrio.engine.errors import AgentrioError
from agentrio.engine.store.base import StoreError
from agentrio.protocol.cluster import (
    AnswerAsk,
    Control,
    Goodbye,
    Heartbeat,
    PeerAnswer,
    PeerListener,
    PeerMessage,
    decode_peer_message,
    encode_peer_message,
)

__all__ = [
    "HEARTBEAT_S",
    "PEER_TIMEOUT_S",
    "REQUEST_TIMEOUT_S",
    "SIGNATURE_WINDOW_S",
    "BusKey",
    "BusStore",
    "Opened",
    "Peers",
    "PeersStatistics",
    "ReplayGuard",
]

log = logging.getLogger(__name__)

#: Seconds between two heartbeats of a daemon.
HEARTBEAT_S: Final = 1.0
#: A peer not heard from for this long is taken for dead (a few lost heartbeats).
PEER_TIMEOUT_S: Final = 5.0
#: How long a request waits for its answers.
REQUEST_TIMEOUT_S: Final = 3.0
#: Longest wait between two attempts to reconnect the bus after Redis went away.
RECONNECT_MAX_S: Final = 1.0
#: At most one log line per this many seconds about messages ignored (rejected).
REJECTED_LOG_S: Final = 60.0
#: A bus message signed longer ago (or further ahead) than this is refused.
SIGNATURE_WINDOW_S: Final = 30.0
#: How many of a sender's most recent message numbers `ReplayGuard` remembers.
REPLAY_WINDOW: Final = 4096


class BusStore(Protocol):
    """What the bus needs of the Redis store (`agentrio.engine.store.redis_store.RedisStore`)."""

    @property
    def client(self) -> Any: ...

    @property
    def prefix(self) -> str: ...

    async def request(self, op: str, request: Callable[[], Awaitable[Any]]) -> Any: ...


@attrs.frozen
class Opened:
    """A message whose signature checked out: its text, when it was signed (wall
    clock) and the signer's number for it."""

    text: str
    at: float
    seq: int


class BusKey:
    """Signs and checks what daemons send each other:
    ``<hex HMAC-SHA256> <signed at> <number> <text>``, the MAC over the context
    (channel or stream), the time, the number and the text; keyed by a hash of the
    daemons' token (the token itself never goes near Redis). ``wall`` is the clock
    of the signatures' times (injectable for tests)."""

    def __init__(self, token: str, *, wall: Callable[[], float] = time.time) -> None:
        self._key = hashlib.sha256(b"agentrio bus v2\0" + token.encode()).digest()
        self._wall = wall
        self._numbers = itertools.count(1)

    def sign(self, text: str, context: str) -> str:
        """``text`` signed for ``context`` (the channel or stream it is written to)."""
        at = f"{self._wall():.3f}"
        seq = next(self._numbers)
        return f"{self._mac(context, at, seq, text)} {at} {seq} {text}"

    def open(self, signed: str, context: str, *, window_s: float = SIGNATURE_WINDOW_S) -> Opened:
        """The message ``signed`` for ``context``; `ValueError` when it is not signed
        with our key for that context (another cluster's, a forgery, a copy from
        elsewhere, garbage) or outside ``window_s`` of now."""
        mac, _, rest = signed.partition(" ")
        at_text, _, rest = rest.partition(" ")
        seq_text, _, text = rest.partition(" ")
        try:
            at, seq = float(at_text), int(seq_text)
        except ValueError:
            raise ValueError("bad signature (not signed with this cluster's token)") from None
        if not hmac.compare_digest(mac, self._mac(context, at_text, seq, text)):
            raise ValueError(
                "bad signature (not signed with this cluster's token, or copied from "
                "another channel or session)"
            )
        skew = self._wall() - at
        if abs(skew) > window_s:
            raise ValueError(
                f"signed {skew:.0f} s from now, outside the {window_s:g} s window "
                "(replayed, or the daemons' clocks disagree)"
            )
        return Opened(text=text, at=at, seq=seq)

    def _mac(self, context: str, at: str, seq: int, text: str) -> str:
        message = f"{context}\n{at}\n{seq}\n{text}".encode()
        return hmac.new(self._key, message, hashlib.sha256).hexdigest()


class ReplayGuard:
    """Which message numbers each sender used lately: `fresh` is True once per
    ``(sender, number)``, and False for a number older than the last `REPLAY_WINDOW`
    of that sender (pub/sub may reorder a little, never by thousands). Senders are
    daemon ids that signed validly, so the table grows only with real daemons."""

    def __init__(self, window: int = REPLAY_WINDOW) -> None:
        self._window = window
        self._highest: dict[str, int] = {}
        self._seen: dict[str, set[int]] = {}

    def fresh(self, sender: str, seq: int) -> bool:
        highest = self._highest.get(sender, 0)
        seen = self._seen.setdefault(sender, set())
        if seq <= highest - self._window or seq in seen:
            return False
        seen.add(seq)
        if seq > highest:
            self._highest[sender] = seq
            if len(seen) > 2 * self._window:
                floor = seq - self._window
                self._seen[sender] = {n for n in seen if n > floor}
        return True


@attrs.frozen
class PeersStatistics:
    """``/v1/health``'s view of the bus: this daemon's id and the peers alive now."""

    daemon: str
    peers: list[str]
    sent_total: int
    received_total: int
    send_failures_total: int
    rejected_total: int


@attrs.define
class _Waiting:
    """A request's answers so far, and the daemons it still waits for."""

    expecting: set[str]
    answers: list[PeerAnswer] = attrs.field(factory=list)
    done: trio.Event = attrs.field(factory=trio.Event)


Handler = Callable[[PeerMessage], Awaitable[None]]


def _text(value: Any) -> str:
    """A pub/sub field as text (coredis gives bytes unless it decodes responses)."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


class Peers:
    """This daemon's end of the bus (see the module docstring)."""

    def __init__(
        self, store: BusStore, key: BusKey, *, clock: Callable[[], float] = trio.current_time
    ) -> None:
        self.id = secrets.token_hex(8)
        self.key = key
        self._store = store
        self._clock = clock
        self._bus = f"{store.prefix}bus"
        self._own = f"{store.prefix}bus:{self.id}"
        self._last_seen: dict[str, float] = {}
        self._waiting: dict[str, _Waiting] = {}
        self._handlers: dict[type[Any], Handler] = {}
        #: Called with the routable listeners to put in each heartbeat.
        self.listeners: Callable[[], list[PeerListener]] = list
        #: Called with each heartbeat of a peer, and with a peer's id once it is gone
        #: (silent for `PEER_TIMEOUT_S`, or said goodbye).
        self.on_peer_heartbeat: Callable[[Heartbeat], None] = lambda _: None
        self.on_peer_gone: Callable[[str], None] = lambda _: None
        self._nursery: trio.Nursery | None = None
        self._sent = 0
        self._received = 0
        self._send_failures = 0
        self._rejected = 0
        self._quiet_until = -math.inf
        self._replays = ReplayGuard()

    # ------------------------------------------------------------------ wiring

    def handle(self, kind: type[Any], handler: Handler) -> None:
        """Run ``handler`` (in the bus's nursery) for every ``kind`` message received."""
        self._handlers[kind] = handler

    @property
    def alive(self) -> list[str]:
        """The peers heard from within `PEER_TIMEOUT_S` (this daemon not included)."""
        return sorted(self._last_seen)

    def statistics(self) -> PeersStatistics:
        return PeersStatistics(
            daemon=self.id,
            peers=self.alive,
            sent_total=self._sent,
            received_total=self._received,
            send_failures_total=self._send_failures,
            rejected_total=self._rejected,
        )

    # ------------------------------------------------------------------ running

    async def run(self, *, task_status: trio.TaskStatus[Peers] = trio.TASK_STATUS_IGNORED) -> None:
        """Read the bus and keep the heartbeats going until cancelled; at the end, say
        goodbye (best effort, shielded for at most a second)."""
        # Here, not at the top: coredis takes ~0.2 s to import (cold start, B7).
        from coredis.exceptions import ConnectionError as RedisConnectionError
        from coredis.retry import (
            CompositeRetryPolicy,
            ConstantRetryPolicy,
            ExponentialBackoffRetryPolicy,
        )

        # Reconnect for ever, at least once every `RECONNECT_MAX_S` (coredis's default
        # backs off to 16 s): the daemons hear each other again soon after Redis does.
        retry = CompositeRetryPolicy(
            ExponentialBackoffRetryPolicy(
                (RedisConnectionError,), retries=None, base_delay=0.1, max_delay=RECONNECT_MAX_S
            ),
            ConstantRetryPolicy((TimeoutError,), retries=2, delay=0.1),
        )
        channels = [self._bus, self._own]
        async with (
            self._store.client.pubsub(
                channels=channels, ignore_subscribe_messages=True, retry_policy=retry
            ) as pubsub,
            trio.open_nursery() as nursery,
        ):
            self._nursery = nursery
            nursery.start_soon(self._beat)
            nursery.start_soon(self._sweep)
            task_status.started(self)
            try:
                while True:
                    message = await pubsub.get_message(ignore_subscribe_messages=True)
                    if message is not None and message.get("type") in ("message", "pmessage"):
                        self._receive(message["data"], _text(message.get("channel")))
            finally:
                with trio.CancelScope(shield=True), trio.move_on_after(1.0):
                    await self._publish(self._bus, Goodbye(sender=self.id))

    def _receive(self, data: Any, channel: str) -> None:
        try:
            opened = self.key.open(_text(data), channel)
            message = decode_peer_message(opened.text)
            if message.sender != self.id and not self._replays.fresh(message.sender, opened.seq):
                raise ValueError(f"a replay of message {opened.seq} of daemon {message.sender}")
        except ValueError as exc:
            self.reject(exc)
            return
        sender = message.sender
        if sender == self.id:
            return
        self._received += 1
        if isinstance(message, Goodbye):
            self._forget(sender)
            return
        known = sender in self._last_seen
        self._last_seen[sender] = self._clock()
        if isinstance(message, Heartbeat):
            self.on_peer_heartbeat(message)
            if message.request_id and self._nursery is not None:
                # Its new listener has its proxy here now: say so (`announce`).
                confirm = PeerAnswer(sender=self.id, request_id=message.request_id, found=False)
                self._nursery.start_soon(self.send, sender, confirm)
            if not known and self._nursery is not None:
                # A newcomer (or one back after an outage) hears us now, not within
                # the next second: until it does, it would route to nobody.
                reply = Heartbeat(sender=self.id, listeners=self.listeners())
                self._nursery.start_soon(self.send, sender, reply)
            return
        if isinstance(message, PeerAnswer):
            waiting = self._waiting.get(message.request_id)
            if waiting is not None and sender in waiting.expecting:
                waiting.expecting.discard(sender)
                waiting.answers.append(message)
                if message.found or not waiting.expecting:
                    waiting.done.set()
            return
        handler = self._handlers.get(type(message))
        if handler is not None and self._nursery is not None:
            self._nursery.start_soon(self._handle, handler, message)

    def reject(self, problem: Exception, what: str = "a message on the daemons' bus") -> None:
        """Count a message ignored, and log it (at most once a `REJECTED_LOG_S`: a
        daemon of another cluster beats every second, a flooder faster)."""
        self._rejected += 1
        now = self._clock()
        if now >= self._quiet_until:
            self._quiet_until = now + REJECTED_LOG_S
            log.warning("ignored %s: %s (%d so far)", what, problem, self._rejected)

    async def _handle(self, handler: Handler, message: PeerMessage) -> None:
        """Run one handler: what a peer sends can fail its own request, never this
        daemon (R71 between daemons), so an unexpected error is logged, not raised."""
        try:
            await handler(message)
        except Exception:
            log.exception("a %s from daemon %s failed", type(message).TYPE, message.sender)

    def _forget(self, daemon: str) -> None:
        if self._last_seen.pop(daemon, None) is not None:
            log.info("daemon %s left the bus", daemon)
        for waiting in self._waiting.values():
            if daemon in waiting.expecting:
                waiting.expecting.discard(daemon)
                if not waiting.expecting:
                    waiting.done.set()
        self.on_peer_gone(daemon)

    async def _beat(self) -> None:
        while True:
            await self._publish(self._bus, Heartbeat(sender=self.id, listeners=self.listeners()))
            await trio.sleep(HEARTBEAT_S)

    async def _sweep(self) -> None:
        """Forget the peers gone quiet (apart from `_beat`, which a Redis that does not
        answer may hold up to its reply timeout)."""
        while True:
            await trio.sleep(HEARTBEAT_S)
            now = self._clock()
            for daemon, seen in list(self._last_seen.items()):
                if now - seen > PEER_TIMEOUT_S:
                    log.warning("daemon %s stopped answering on the bus", daemon)
                    self._forget(daemon)

    # ------------------------------------------------------------------ sending

    async def announce(self, *, confirm: bool) -> None:
        """Send our listeners now rather than at the next heartbeat: one came or went
        (issue 33). With ``confirm``, return once every live peer says it holds
        proxies of them -- at most `REQUEST_TIMEOUT_S`, a peer that does not answer
        being one about to be taken for dead -- so a ``listen`` acknowledged here is a
        listener for the asks of every daemon's tasks."""
        if not confirm:
            await self._publish(self._bus, Heartbeat(sender=self.id, listeners=self.listeners()))
            return
        await self.request(
            lambda request_id: Heartbeat(
                sender=self.id, listeners=self.listeners(), request_id=request_id
            )
        )

    def channel_of(self, daemon: str) -> str:
        return f"{self._store.prefix}bus:{daemon}"

    async def send(self, daemon: str, message: PeerMessage) -> bool:
        """Publish ``message`` to ``daemon`` alone; False when Redis did not take it."""
        return await self._publish(self.channel_of(daemon), message)

    async def _publish(self, channel: str, message: PeerMessage) -> bool:
        text = self.key.sign(encode_peer_message(message), channel)
        client = self._store.client
        try:
            await self._store.request("bus", lambda: client.publish(channel, text))
        except StoreError as exc:
            self._send_failures += 1
            log.debug("bus message not sent: %s", exc)
            return False
        self._sent += 1
        return True

    async def answer(
        self,
        request: AnswerAsk | Control,
        *,
        found: bool,
        error: AgentrioError | None = None,
        cancelled: bool = False,
    ) -> None:
        """Answer ``request`` to the daemon that sent it: not ``found`` here, or found
        and done (``cancelled`` for a cancel that stopped its task), or found and
        refused with ``error`` (its code and message travel; the asker raises the
        same class, `agentrio.engine.errors.error_of`)."""
        answer = PeerAnswer(
            sender=self.id,
            request_id=request.request_id,
            found=found,
            ok=found and error is None,
            cancelled=cancelled,
            code=error.code if error is not None else "",
            message=str(error) if error is not None else "",
        )
        await self.send(request.sender, answer)

    async def request(
        self,
        make: Callable[[str], PeerMessage],
        *,
        to: Sequence[str] | None = None,
        timeout_s: float = REQUEST_TIMEOUT_S,
    ) -> list[PeerAnswer]:
        """Send the message ``make(request_id)`` to daemons ``to`` (broadcast to every
        live peer when None) and return their answers: as soon as one is ``found``,
        or once all answered, or at the timeout (those not heard from are left out).
        No peers: no answers, at once."""
        targets = set(self.alive if to is None else to) - {self.id}
        if not targets:
            return []
        request_id = secrets.token_hex(8)
        waiting = _Waiting(expecting=set(targets))
        self._waiting[request_id] = waiting
        try:
            message = make(request_id)
            if to is None:
                sent = await self._publish(self._bus, message)
            else:
                sent = all([await self.send(daemon, message) for daemon in targets])
            if not sent:
                return list(waiting.answers)
            with trio.move_on_after(timeout_s):
                await waiting.done.wait()
            return list(waiting.answers)
        finally:
            del self._waiting[request_id]
