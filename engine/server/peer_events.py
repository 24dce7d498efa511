"""A session's events reach its subscribers on every daemon (issue 21; R8 B, SPEC §8).

Each daemon appends every event its sessions make to one Redis stream per session,
``<prefix>ev:<session id>``, capped at about `STREAM_ENTRIES` entries (``XADD MAXLEN
~``) of at most `STREAM_EVENT_BYTES` each, and expiring `STREAM_TTL_S` after its last
event: the bound in bytes of what Redis keeps per session. The appends are made by one
writer task from a bounded outbox (`OUTBOX_EVENTS`, oldest dropped and counted), so a
slow or absent Redis never slows a task down.

A daemon with a subscriber of a session (SSE or WS ``subscribe``) reads that stream
(`attached`): first the recent entries other daemons made (the replay), then, live, each
new one -- if signed with the cluster's key (`agentrio.engine.server.peers.BusKey`) for that very
stream, within `STREAM_TTL_S` (so an entry copied into another session's stream is
ignored, issue 29 finding 10) -- and hands them to the session's `EventHub`
(`EventHub.inject`), which numbers them in its own sequence. So a subscriber sees, on
whichever daemon it is connected to, its daemon's own events and every other daemon's,
each once, with one increasing ``seq``. What it does not get is one global order: an
event made elsewhere arrives a Redis round trip later than one made here at the same
moment, and the replay of a newly attached session puts other daemons' recent events
after this daemon's own.
"""

from __future__ import annotations

import json
import logging
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any, Final

import trio

from agentrio.engine.core import Engine
from agentrio.engine.server.peers import SIGNATURE_WINDOW_S, BusStore, Peers
from agentrio.engine.store.base import StoreError
from agentrio.protocol.codec import dumps, structure
from agentrio.protocol.events import Event

__all__ = [
    "OUTBOX_EVENTS",
    "STREAM_ENTRIES",
    "STREAM_EVENT_BYTES",
    "STREAM_TTL_S",
    "PeerEvents",
]

log = logging.getLogger(__name__)

#: About how many events of one session Redis keeps (the replay other daemons get).
STREAM_ENTRIES: Final = 512
#: An event larger than this (as JSON) is not relayed (counted and logged).
STREAM_EVENT_BYTES: Final = 64 * 1024
#: A session's stream expires this long after its last event.
STREAM_TTL_S: Final = 3600
#: Events waiting to be appended; past it the oldest are dropped (counted).
OUTBOX_EVENTS: Final = 10_000
#: Most events appended in one round trip.
WRITE_BATCH: Final = 256
#: Longest wait of one blocking read, in milliseconds (a newly attached session is
#: read from the next read on).
READ_BLOCK_MS: Final = 500


class PeerEvents:
    """Both ends of the event relay (see the module docstring)."""

    def __init__(self, peers: Peers, engine: Engine, store: BusStore) -> None:
        self._peers = peers
        self._engine = engine
        self._store = store
        self._prefix = f"{store.prefix}ev:"
        self._outbox: deque[tuple[str, str, Event]] = deque()
        self._outbox_ready = trio.Event()
        #: Session -> how many subscribers here; and the id of the last entry read.
        self._attached: dict[str, int] = {}
        self._last_read: dict[str, str] = {}
        self._attach_changed = trio.Event()
        self.relayed_total = 0
        self.injected_total = 0
        self.dropped_total = 0
        self.too_large_total = 0

    async def run(self, *, task_status: trio.TaskStatus[PeerEvents]) -> None:
        """The writer and the reader, until cancelled."""
        self._engine.sessions.set_event_sink(self._made)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._write)
                nursery.start_soon(self._read)
                task_status.started(self)
                await trio.sleep_forever()
        finally:
            self._engine.sessions.set_event_sink(None)

    # ------------------------------------------------------------------ writing

    def _made(self, session_id: str, task_hash: str, event: Event) -> None:
        if len(self._outbox) >= OUTBOX_EVENTS:
            self._outbox.popleft()
            self.dropped_total += 1
        self._outbox.append((session_id, task_hash, event))
        self._outbox_ready.set()

    async def _write(self) -> None:
        """Append the outbox to the streams, up to `WRITE_BATCH` events a round trip
        (one pipeline: the ``XADD``s, then one ``EXPIRE`` per session)."""
        client = self._store.client
        while True:
            await self._outbox_ready.wait()
            self._outbox_ready = trio.Event()
            while self._outbox:
                batch = self._take_batch()
                if not batch:
                    continue
                try:
                    await self._store.request("relay", partial(self._append, client, batch))
                except StoreError as exc:
                    self.dropped_total += len(batch)
                    log.debug("events not relayed: %s", exc)
                    continue
                self.relayed_total += len(batch)

    def _take_batch(self) -> list[tuple[str, dict[str, str]]]:
        """The next events of the outbox as ``(stream key, fields)``, signed; an event
        over `STREAM_EVENT_BYTES` is left out (logged and counted)."""
        me = self._peers.id
        batch: list[tuple[str, dict[str, str]]] = []
        while self._outbox and len(batch) < WRITE_BATCH:
            session_id, task_hash, event = self._outbox.popleft()
            text = dumps(event)
            if len(text) > STREAM_EVENT_BYTES:
                self.too_large_total += 1
                log.warning(
                    "a %d-byte %s event of %s was not relayed to other daemons",
                    len(text),
                    type(event).KIND,
                    session_id,
                )
                continue
            key = self._prefix + session_id
            signed = self._peers.key.sign(f"{me} {task_hash} {text}", f"events {key}")
            batch.append((key, {"d": me, "t": task_hash, "e": signed}))
        return batch

    @staticmethod
    async def _append(client: Any, batch: list[tuple[str, dict[str, str]]]) -> None:
        # Here, not at the top: coredis takes ~0.2 s to import, which a daemon on
        # SQLite never needs (cold start, bench B7).
        from coredis.tokens import PureToken

        async with client.pipeline(transaction=False) as pipe:
            for key, fields in batch:
                pipe.xadd(
                    key,
                    fields,
                    trim_strategy=PureToken.MAXLEN,
                    threshold=STREAM_ENTRIES,
                    trim_operator=PureToken.APPROXIMATELY,
                )
            for key in {key for key, _ in batch}:
                pipe.expire(key, STREAM_TTL_S)

    # ------------------------------------------------------------------ reading

    @asynccontextmanager
    async def attached(self, session_id: str) -> AsyncIterator[None]:
        """While inside, other daemons' events of ``session_id`` reach its hub here.
        The first subscriber of a session waits for the replay of the recent ones
        (others' events made before it came), so it subscribes after them."""
        self._engine.session(session_id)  # the hub the events go to
        first = session_id not in self._attached
        self._attached[session_id] = self._attached.get(session_id, 0) + 1
        try:
            if first:
                await self._catch_up(session_id)
                self._attach_changed.set()
            yield
        finally:
            left = self._attached[session_id] - 1
            if left:
                self._attached[session_id] = left
            else:
                del self._attached[session_id]
                self._last_read.pop(session_id, None)

    async def _catch_up(self, session_id: str) -> None:
        client = self._store.client
        key = self._prefix + session_id
        try:
            entries = await self._store.request(
                "relay", lambda: client.xrevrange(key, count=STREAM_ENTRIES)
            )
        except StoreError as exc:
            log.warning("no replay of other daemons' events of %s: %s", session_id, exc)
            self._last_read[session_id] = "$"
            return
        self._last_read[session_id] = entries[0].identifier if entries else "0-0"
        for entry in reversed(entries):
            self._inject(session_id, entry.field_values)

    def _inject(self, session_id: str, fields: Any) -> None:
        if fields.get("d") == self._peers.id:
            return
        try:
            key = self._prefix + session_id
            opened = self._peers.key.open(
                str(fields["e"]), f"events {key}", window_s=STREAM_TTL_S + SIGNATURE_WINDOW_S
            )
            daemon, task_hash, text = opened.text.split(" ", 2)
            if (daemon, task_hash) != (fields.get("d"), fields.get("t")):
                raise ValueError("its fields differ from what was signed")
            event: Event = structure(json.loads(text), Event)
        except (KeyError, ValueError, TypeError) as exc:
            self._peers.reject(exc, f"a relayed event of {session_id}")
            return
        session = self._engine.sessions.get(session_id)
        if session is not None:
            session.hub.inject(task_hash, event)
            self.injected_total += 1

    async def _read(self) -> None:
        client = self._store.client
        while True:
            if not self._attached:
                await self._attach_changed.wait()
                self._attach_changed = trio.Event()
                continue
            streams = {
                self._prefix + session_id: self._last_read.get(session_id, "$")
                for session_id in self._attached
            }
            try:
                found = await self._store.request(
                    "relay", partial(client.xread, streams, count=256, block=READ_BLOCK_MS)
                )
            except StoreError as exc:
                log.debug("relay read failed: %s", exc)
                await trio.sleep(READ_BLOCK_MS / 1000)
                continue
            for key, entries in (found or {}).items():
                session_id = key[len(self._prefix) :]
                if session_id not in self._attached:
                    continue
                for entry in entries:
                    self._last_read[session_id] = entry.identifier
                    self._inject(session_id, entry.field_values)
