"""Asks across daemons: a task's question reaches a listener connected to another
daemon, and the answer comes back exactly once (issue 21; R1-R8, R79 across daemons).

The registry of the daemon that runs the task stays the one authority over its asks:
it alone claims, resolves, withdraws and fails them. Other daemons' listeners take
part in it as **proxies**:

- every daemon advertises its routable listeners in its heartbeats (`advertised`:
  prefix listeners of scripts and chat front-ends, and session subscribers; never a
  REPL window's, whose ``cli-`` asks stay on its daemon, R78);
- each daemon keeps one proxy `Listener` in its own registry per listener advertised
  by a peer (`_sync_proxies`). A proxy is an ordinary listener: it counts for
  `has_listener` (R4, R8), it claims entries in the registry's one atomic step (R2),
  and closing it fails closed or starts the grace (R6, R79);
- a proxy's notices are sent to its daemon (`AskShown`, `AskGone`, `AskVerified`),
  which hands them to the real listener through `Listener.post` (`_on_shown`…); the
  entry shown there is a stand-in, never in that daemon's registry;
- a front-end's acknowledgement that it drew an ask (issue 34) travels back as
  `AckAsk`, and the task's daemon marks the ask acknowledged by that front-end *of
  the sending daemon* (``daemon`` in its state) when the proxy holds it;
- an answer travels back as `AnswerAsk` to the task's daemon, which resolves the
  entry *by the proxy* (a connection answers only what it was shown) or, for an HTTP
  caller or a subscriber, by nobody, and says how it went (`PeerAnswer`).

What a death does: a listener that closes is missing from the next heartbeat, so its
proxy closes (fail closed, or grace for ``chat-``/``tg-``/``dc-``); a daemon that goes
quiet has all its proxies closed the same way, and every ask of its tasks shown here
is withdrawn (``task canceled``, R3). No message loss can approve anything: a lost
answer leaves the ask open, a lost withdrawal is repaired by the next heartbeat or by
the daemon's timeout.
"""

from __future__ import annotations

from collections.abc import Collection

import attrs
import trio

from agentrio.engine.asks import CLIENT_DISCONNECTED, TASK_CANCELED
from agentrio.engine.core import Engine
from agentrio.engine.errors import AgentrioError, AlreadyResolved, Forbidden, NotFound, error_of
from agentrio.engine.pending import Entry, Listener, Offered, Verified, Withdrawn
from agentrio.engine.server.ask_frames import ask_frame, request_of_ask
from agentrio.engine.server.peers import Peers
from agentrio.protocol.asks import answer_of
from agentrio.protocol.cluster import (
    AckAsk,
    AnswerAsk,
    AskGone,
    AskShown,
    AskVerified,
    Heartbeat,
    PeerListener,
    PeerMessage,
)
from agentrio.protocol.frames import Reply

__all__ = ["PeerAsks"]


@attrs.define
class _Shown:
    """An ask of a task on daemon ``owner``, shown here through ``listener``."""

    entry: Entry
    listener: Listener
    owner: str


class PeerAsks:
    """Both ends of asks across daemons (see the module docstring)."""

    def __init__(self, peers: Peers, engine: Engine) -> None:
        self._peers = peers
        self._engine = engine
        self._registry = engine.registry
        #: (peer daemon, its listener id) -> the proxy listener in our registry.
        self._proxies: dict[tuple[str, str], Listener] = {}
        self._proxy_ids: set[str] = set()
        #: Ask id -> an ask of another daemon's task shown through our listener.
        self._shown: dict[str, _Shown] = {}
        self._nursery: trio.Nursery | None = None
        peers.listeners = self.advertised
        peers.on_peer_heartbeat = self._sync_proxies
        peers.on_peer_gone = self._peer_gone
        peers.handle(AskShown, self._on_message)
        peers.handle(AskGone, self._on_message)
        peers.handle(AskVerified, self._on_message)
        peers.handle(AnswerAsk, self._on_message)
        peers.handle(AckAsk, self._on_message)

    async def run(self, *, task_status: trio.TaskStatus[PeerAsks]) -> None:
        """Own the proxies' pumps until cancelled; then close every proxy."""
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                task_status.started(self)
                await trio.sleep_forever()
        finally:
            self._nursery = None
            for proxy in self._proxies.values():
                proxy.close(CLIENT_DISCONNECTED)
            self._proxies.clear()

    @property
    def proxy_count(self) -> int:
        """Proxies here of other daemons' listeners."""
        return len(self._proxies)

    @property
    def shown_count(self) -> int:
        """Asks of other daemons' tasks shown through our listeners now."""
        return len(self._shown)

    # ------------------------------------------------------------------ our listeners

    def advertised(self) -> list[PeerListener]:
        """Our front-ends' listeners that other daemons' asks may reach: open, not a
        proxy, and judged by prefix and session alone (a ``match`` predicate, like a
        REPL window's, cannot be judged elsewhere). Also forgets asks shown through
        listeners closed since."""
        for ask_id, shown in list(self._shown.items()):
            if shown.listener.closed:
                del self._shown[ask_id]
        return [
            PeerListener(
                id=listener.id,
                prefix=listener.prefix,
                passive=listener.passive,
                session_id=listener.session_id,
                client=self._engine.ask_life.frontend_of(listener),
            )
            for listener in self._registry.listeners()
            if listener.match is None and not listener.closed and listener.id not in self._proxy_ids
        ]

    def shown(self, ask_id: str) -> Entry | None:
        """The stand-in entry of another daemon's ask shown here, if it is one."""
        shown = self._shown.get(ask_id)
        return shown.entry if shown is not None and not shown.entry.resolved else None

    async def answer(
        self,
        ask_id: str,
        reply: Reply,
        *,
        via: Listener | None,
        sessions: Collection[str],
    ) -> None:
        """Answer an ask that is not in our registry, on the daemon whose task asks.

        ``via``, the listener an ask was shown through here, answers through its
        proxy there (the caller checked it may). Any other answer is an HTTP caller's
        or a subscriber's, offered to every peer and allowed only for an ask of one of
        ``sessions`` (a listener that showed it is then told it was answered
        elsewhere, as on one daemon). Raises `AlreadyResolved` when no daemon has it
        open, or the error its daemon met (`Forbidden`, `Conflict`, …)."""
        shown = self._shown.get(ask_id)
        if shown is not None and shown.listener is not via:
            shown = None
        me = self._peers.id
        if shown is not None:
            listener_id = shown.listener.id
            answers = await self._peers.request(
                lambda rid: AnswerAsk(sender=me, request_id=rid, reply=reply, listener=listener_id),
                to=[shown.owner],
            )
        else:
            allowed = sorted(sessions)
            answers = await self._peers.request(
                lambda rid: AnswerAsk(sender=me, request_id=rid, reply=reply, sessions=allowed)
            )
        found = next((answer for answer in answers if answer.found), None)
        if found is None:
            raise AlreadyResolved(f"ask {ask_id} is already resolved or gone")
        if shown is not None:
            self._drop_shown(ask_id)
        if not found.ok:
            raise error_of(found.code, found.message)

    async def acknowledge(
        self, ask_id: str, client: str, *, via: Listener | None, sessions: Collection[str]
    ) -> None:
        """Front-end ``client`` drew an ask not in our registry: tell the daemon whose
        task asks (`AckAsk`). ``via``, the listener it was shown through here, names
        it to its daemon; without one (HTTP, a subscriber) every peer is told, for an
        ask of one of ``sessions``. Nothing is awaited back: an ack lost leaves the ask
        ``late``, never decides it."""
        shown = self._shown.get(ask_id)
        me = self._peers.id
        if shown is not None and via is not None and shown.listener is via:
            message = AckAsk(sender=me, id=ask_id, client=client, listener=via.id)
            await self._peers.send(shown.owner, message)
        elif sessions:
            message = AckAsk(sender=me, id=ask_id, client=client, sessions=sorted(sessions))
            for daemon in self._peers.alive:
                await self._peers.send(daemon, message)

    def _drop_shown(self, ask_id: str) -> _Shown | None:
        shown = self._shown.pop(ask_id, None)
        if shown is not None:
            shown.entry.resolved = True
        return shown

    # ------------------------------------------------------------------ proxies

    def _sync_proxies(self, heartbeat: Heartbeat) -> None:
        """Make our proxies of ``heartbeat.sender``'s listeners match its list."""
        daemon = heartbeat.sender
        wanted = {listener.id: listener for listener in heartbeat.listeners}
        for (owner, listener_id), proxy in list(self._proxies.items()):
            if owner == daemon and listener_id not in wanted:
                self._close_proxy(owner, listener_id, proxy)
        if self._nursery is None:
            return
        for listener_id, advertised in wanted.items():
            if (daemon, listener_id) in self._proxies:
                continue
            proxy = self._registry.listen(
                advertised.prefix, passive=advertised.passive, session_id=advertised.session_id
            )
            self._engine.ask_life.name(proxy, advertised.client, daemon=daemon)
            self._proxies[(daemon, listener_id)] = proxy
            self._proxy_ids.add(proxy.id)
            if not proxy.passive:
                self._nursery.start_soon(self._pump, daemon, listener_id, proxy)

    def _close_proxy(self, daemon: str, listener_id: str, proxy: Listener) -> None:
        del self._proxies[(daemon, listener_id)]
        self._proxy_ids.discard(proxy.id)
        proxy.close(CLIENT_DISCONNECTED)

    def _peer_gone(self, daemon: str) -> None:
        """A peer left or went quiet: its listeners are gone (their asks fail closed or
        wait their grace), and so are its tasks' asks shown here (R3)."""
        for (owner, listener_id), proxy in list(self._proxies.items()):
            if owner == daemon:
                self._close_proxy(owner, listener_id, proxy)
        for ask_id, shown in list(self._shown.items()):
            if shown.owner == daemon:
                self._drop_shown(ask_id)
                shown.listener.post(Withdrawn(ask_id, TASK_CANCELED))

    async def _pump(self, daemon: str, listener_id: str, proxy: Listener) -> None:
        """Send what proxy ``proxy`` is told to the daemon of the listener it stands
        for, in order, until the proxy is closed."""
        me = self._peers.id
        while True:
            try:
                notice = await proxy.next_notice()
            except trio.ClosedResourceError:
                return
            message: PeerMessage
            match notice:
                case Offered(entry=entry):
                    if entry.resolved:
                        continue
                    message = AskShown(sender=me, listener=listener_id, ask=ask_frame(entry))
                case Withdrawn(entry_id=entry_id, reason=reason):
                    message = AskGone(sender=me, listener=listener_id, id=entry_id, reason=reason)
                case Verified(entry_id=entry_id, ok=ok, error=error):
                    message = AskVerified(
                        sender=me, listener=listener_id, id=entry_id, ok=ok, error=error
                    )
            await self._peers.send(daemon, message)

    # ------------------------------------------------------------------ messages

    async def _on_message(self, message: PeerMessage) -> None:
        match message:
            case AskShown():
                self._on_shown(message)
            case AskGone(id=ask_id, reason=reason):
                shown = self._shown.get(ask_id)
                if shown is not None and shown.owner == message.sender:
                    self._drop_shown(ask_id)
                    shown.listener.post(Withdrawn(ask_id, reason))
            case AskVerified(listener=listener_id, id=ask_id, ok=ok, error=error):
                listener = self._local_listener(listener_id)
                if listener is not None:
                    listener.post(Verified(ask_id, ok, error))
            case AnswerAsk():
                await self._on_answer(message)
            case AckAsk():
                self._on_ack(message)

    def _on_ack(self, message: AckAsk) -> None:
        """A peer's front-end drew one of our asks: through our proxy of its listener
        that holds the ask, or an ask of a session it names (no REPL window's)."""
        entry = self._registry.get(message.id)
        if entry is None or entry.resolved:
            return
        if message.listener:
            proxy = self._proxies.get((message.sender, message.listener))
            if proxy is None or entry.claimed_by is not proxy:
                return
        elif entry.request.windowed or entry.request.session_id not in message.sessions:
            return
        self._engine.ask_life.acknowledge(entry, message.client, daemon=message.sender)

    def _local_listener(self, listener_id: str) -> Listener | None:
        for listener in self._registry.listeners():
            if listener.id == listener_id and listener.id not in self._proxy_ids:
                return listener
        return None

    def _on_shown(self, message: AskShown) -> None:
        listener = self._local_listener(message.listener)
        if listener is None or listener.closed:
            return  # our next heartbeat no longer lists it: its proxy there closes
        entry = Entry(request=request_of_ask(message.ask), parked=True, id=message.ask.id)
        entry.claimed_by = listener
        self._shown[entry.id] = _Shown(entry=entry, listener=listener, owner=message.sender)
        listener.post(Offered(entry))

    async def _on_answer(self, message: AnswerAsk) -> None:
        """Resolve one of our asks for a peer, and say how it went."""
        ask_id = message.reply.id
        entry = self._registry.get(ask_id)
        if entry is None or entry.resolved:
            # Sent to us as the ask's daemon (``listener`` set): say it is gone.
            gone = AlreadyResolved(f"ask {ask_id} is already resolved or gone")
            await self._peers.answer(message, found=bool(message.listener), error=gone)
            return
        try:
            by = self._answerer(message, entry)
            await self._engine.answer(ask_id, answer_of(message.reply), by=by)
        except AgentrioError as exc:
            await self._peers.answer(message, found=True, error=exc)
        else:
            await self._peers.answer(message, found=True)

    def _answerer(self, message: AnswerAsk, entry: Entry) -> Listener | None:
        """Who answers: the proxy of the listener it was shown through, or nobody (an
        HTTP caller or subscriber, for an ask of a session it names)."""
        if message.listener:
            proxy = self._proxies.get((message.sender, message.listener))
            if proxy is None:
                raise Forbidden(f"ask {entry.id} was not offered to this connection")
            return proxy
        if entry.request.session_id not in message.sessions:
            raise NotFound(f"no confirmation {entry.id} in this session")
        return None
