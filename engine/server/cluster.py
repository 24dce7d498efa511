"""Several daemons on one Redis, as one service (issue 21; docs/deployment.md).

`open_cluster` gives a daemon whose store is Redis its part in the cluster: the bus
(`agentrio.engine.server.peers`), asks across daemons (`agentrio.engine.server.peer_asks`), cancel,
pause and steer across daemons (`agentrio.engine.server.peer_control`) and the event relay
(`agentrio.engine.server.peer_events`). The command layer
(`agentrio.engine.server.commands`) turns to it when what a request names is not on
this daemon. A daemon on SQLite is alone and
gets None.

What stays on one daemon: a REPL window's runs and asks (a ``cli-`` window talks to
one daemon, R5, R78), background legs and jobs (R20-R27: processes and files of the
machine that runs them), and a WebSocket connection's own runs (R43, R46).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import cast

import attrs
import trio

from agentrio.engine.core import Engine
from agentrio.engine.nursery_tasks import cancel_scope
from agentrio.engine.server.peer_asks import PeerAsks
from agentrio.engine.server.peer_control import PeerControl
from agentrio.engine.server.peer_events import PeerEvents
from agentrio.engine.server.peers import BusKey, BusStore, Peers
from agentrio.protocol.causes import Cause

__all__ = ["Cluster", "ClusterStatistics", "attached_events", "open_cluster"]


@attrs.frozen
class Cluster:
    """This daemon's part in the cluster (see the module docstring)."""

    peers: Peers
    asks: PeerAsks
    control: PeerControl
    events: PeerEvents

    def statistics(self) -> ClusterStatistics:
        """``/v1/health``'s ``statistics.cluster``."""
        bus = self.peers.statistics()
        events = self.events
        return ClusterStatistics(
            daemon=bus.daemon,
            peers=bus.peers,
            proxies=self.asks.proxy_count,
            shown=self.asks.shown_count,
            bus_sent_total=bus.sent_total,
            bus_received_total=bus.received_total,
            bus_send_failures_total=bus.send_failures_total,
            bus_rejected_total=bus.rejected_total,
            events_relayed_total=events.relayed_total,
            events_injected_total=events.injected_total,
            events_dropped_total=events.dropped_total,
            events_too_large_total=events.too_large_total,
        )


@attrs.frozen
class ClusterStatistics:
    """This daemon's id, the peers alive now, the proxies of their listeners here,
    the asks of their tasks shown here, and the bus's and relay's counters."""

    daemon: str
    peers: list[str]
    proxies: int
    shown: int
    bus_sent_total: int
    bus_received_total: int
    bus_send_failures_total: int
    bus_rejected_total: int
    events_relayed_total: int
    events_injected_total: int
    events_dropped_total: int
    events_too_large_total: int


@asynccontextmanager
async def open_cluster(engine: Engine, *, token: str) -> AsyncIterator[Cluster | None]:
    """The cluster part of a daemon on a Redis store, running until the block exits
    (then cancelled with cause ``shutdown``, after a goodbye to the peers); None on
    any other store. ``token`` is the daemons' shared token, which keys the bus's
    signatures (`agentrio.engine.server.peers.BusKey`). Entering does not wait for Redis: the
    bus connects (and reconnects after an outage) in the background."""
    store = engine.store
    if getattr(store, "backend", "") != "redis":
        yield None
        return
    bus_store = cast(BusStore, store)
    peers = Peers(bus_store, BusKey(token))
    cluster = Cluster(
        peers=peers,
        asks=PeerAsks(peers, engine),
        control=PeerControl(peers, engine),
        events=PeerEvents(peers, engine, bus_store),
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(cluster.asks.run)
        await nursery.start(cluster.events.run)
        nursery.start_soon(peers.run)
        try:
            yield cluster
        finally:
            cancel_scope(nursery.cancel_scope, Cause.SHUTDOWN)


@asynccontextmanager
async def attached_events(cluster: Cluster | None, session_id: str) -> AsyncIterator[None]:
    """Inside, the events other daemons make for ``session_id`` reach its hub here
    too, the recent ones first (`PeerEvents.attached`); nothing to do when alone.
    A subscriber enters it before it subscribes to the hub."""
    if cluster is None:
        yield
        return
    async with cluster.events.attached(session_id):
        yield


async def listeners_changed(cluster: Cluster | None, *, added: bool) -> None:
    """A front-end's routable listener came or went: tell the peers now, not at the
    next heartbeat (issue 33). One that came (``listen``, ``subscribe``) returns only
    once every peer holds its proxy (bounded, `Peers.announce`), so the front-end's
    acknowledgement means every daemon's asks reach it; one that went is not waited
    for. Nothing to do when alone."""
    if cluster is not None:
        await cluster.peers.announce(confirm=added)
