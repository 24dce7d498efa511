"""The coredis client behind `agentrio.engine.store.redis_store`, from the ``[store] url``.

``redis://``, ``rediss://`` (TLS) and ``unix://`` name one server; with
``redis+sentinel://[:password@]host:port[,host:port…]/service[/db]`` the client asks
the Sentinels where the service's primary is, and asks again after a failover (coredis's
`coredis.sentinel.SentinelConnectionPool`). Either way the client is an async context:
coredis keeps its connections as tasks of an anyio task group, which lives exactly as
long as the context, inside the daemon's Trio loop (anyio runs on Trio natively).

No retries by the client: a write whose reply was lost must not be sent twice (a claim
sent again would see its own marker and report a conflict to the winner).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import coredis
import coredis.retry
from coredis.connection import TCPLocation

from agentrio.engine.config import SENTINEL_SCHEME, parse_sentinel_url

__all__ = ["open_client"]


@asynccontextmanager
async def open_client(
    url: str, *, connect_timeout_s: float | None, reply_timeout_s: float | None
) -> AsyncIterator[coredis.Redis[str]]:
    """A client for ``url`` whose pool lives as long as this context. Nothing is
    connected yet: the first request connects."""
    common: dict[str, Any] = {
        "decode_responses": True,
        "retry_policy": coredis.retry.NoRetryPolicy(),
        "connect_timeout": connect_timeout_s,
        "stream_timeout": reply_timeout_s,
    }
    if url.startswith(SENTINEL_SCHEME):
        target = parse_sentinel_url(url)
        sentinels = [TCPLocation(host, port) for host, port in target.sentinels]
        async with coredis.Sentinel(
            sentinels, password=target.password, db=target.db, **common
        ) as sentinel:
            # decode_responses=True above: the primary's replies are str.
            primary: coredis.Redis[str] = sentinel.primary_for(target.service)  # type: ignore[assignment]
            async with primary:
                yield primary
        return
    client: coredis.Redis[str] = coredis.Redis.from_url(url, verify_version=False, **common)
    async with client:
        yield client
