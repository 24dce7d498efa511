"""Online markers: liveness as a TTL, never as a stored status (R50, R51).

A running task keeps ``action:<session_id>:<task_hash>`` alive in the store with a
60 s TTL, refreshed every 55 s by a loop inside the task's own nursery. When the
daemon is killed nothing deletes the marker: it simply expires, and the task shows up
as resumable. No PID check is ever needed, and it works across processes that share
a store.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Final

import trio

from agentrio.engine.store.base import Store, StoreError, marker_key

__all__ = [
    "MARKER_REFRESH_S",
    "MARKER_RETRY_S",
    "MARKER_TTL_S",
    "keep_marker_alive",
    "publish_marker",
]

log = logging.getLogger(__name__)


def _seconds_from_env(name: str, default: float) -> float:
    """A positive number of seconds from ``name``, else ``default``.

    Only end-to-end tests set these (a 60 s TTL is too long to wait for after a
    ``kill -9``); a malformed or non-positive value is ignored.
    """
    try:
        value = float(os.environ.get(name, ""))
    except ValueError:
        return default
    return value if value > 0 else default


#: Marker lifetime; ``AGENTRIO_MARKER_TTL_S`` overrides it (tests only).
MARKER_TTL_S: Final = _seconds_from_env("AGENTRIO_MARKER_TTL_S", 60.0)
#: Refresh period, below the TTL; ``AGENTRIO_MARKER_REFRESH_S`` overrides it (tests only).
MARKER_REFRESH_S: Final = _seconds_from_env("AGENTRIO_MARKER_REFRESH_S", 55.0)
#: Seconds between attempts while a refresh fails (a Redis store that is down).
MARKER_RETRY_S: Final = min(5.0, MARKER_REFRESH_S)


async def publish_marker(
    store: Store, session_id: str, task_hash: str, *, clock: Callable[[], float]
) -> None:
    await store.set_marker(marker_key(session_id, task_hash), expires_at=clock() + MARKER_TTL_S)


async def keep_marker_alive(
    store: Store, session_id: str, task_hash: str, *, clock: Callable[[], float]
) -> None:
    """Refresh the marker every 55 s until cancelled (the task's nursery owns this loop).

    A refresh the store refuses (Redis down, issue 21) does not end the task: it is
    logged and tried again every `MARKER_RETRY_S`. Should the store stay away past the
    TTL, the marker lapses and the task shows as resumable elsewhere, as for a daemon
    that died (docs/deployment.md)."""
    delay = MARKER_REFRESH_S
    while True:
        await trio.sleep(delay)
        try:
            await publish_marker(store, session_id, task_hash, clock=clock)
        except StoreError as exc:
            log.warning("cannot refresh the online marker of task %s: %s", task_hash, exc)
            delay = MARKER_RETRY_S
        else:
            delay = MARKER_REFRESH_S
