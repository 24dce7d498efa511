"""The ``redis+sentinel://`` URL of ``[store] url`` (docs/deployment.md), read apart from
`agentrio.engine.config` (which re-exports it) so that module stays one about keys."""

from __future__ import annotations

from typing import Final

import attrs

__all__ = ["REDIS_SCHEMES", "SENTINEL_SCHEME", "SentinelTarget", "parse_sentinel_url"]

#: URL schemes the Redis store accepts (docs/deployment.md).
REDIS_SCHEMES: Final = ("redis://", "rediss://", "unix://", "redis+sentinel://")
SENTINEL_SCHEME: Final = "redis+sentinel://"


@attrs.frozen(kw_only=True)
class SentinelTarget:
    """A ``redis+sentinel://[:password@]host:port[,host:port…]/service[/db]`` URL: the
    Sentinels to ask, the monitored service whose primary is the store, its password
    and database number."""

    sentinels: list[tuple[str, int]]
    service: str
    password: str | None = attrs.field(default=None, repr=False)
    db: int = 0


def parse_sentinel_url(url: str) -> SentinelTarget:
    """Read a ``redis+sentinel://`` URL; `ValueError` says what is wrong (never the
    password)."""
    rest = url.removeprefix(SENTINEL_SCHEME)
    hosts, _, path = rest.partition("/")
    password = None
    if "@" in hosts:
        credentials, _, hosts = hosts.rpartition("@")
        password = credentials.partition(":")[2] or None
    sentinels = []
    for item in hosts.split(","):
        host, _, port = item.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError("expected host:port[,host:port…] of the Sentinels")
        sentinels.append((host.strip("[]"), int(port)))
    service, _, db = path.partition("/")
    if not service:
        raise ValueError("expected the monitored service's name after the Sentinels")
    if db and not db.isdigit():
        raise ValueError("expected a database number after the service name")
    return SentinelTarget(sentinels=sentinels, service=service, password=password, db=int(db or 0))
