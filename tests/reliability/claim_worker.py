"""A second OS process that claims tasks in the daemon's store (run with ``python -m``).

``python -m tests.reliability.claim_worker DB COUNT``: open the SQLite store the daemon
uses, print ``ready``, then for every line ``SESSION TASK_HASH`` on stdin fire COUNT
concurrent claims of that task (wall-clock ``now``, the daemon's 60 s TTL) and print
one JSON line: the outcomes, each ``{"won": hash}`` or ``{"error": name}``.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import trio

from agentrio.engine.errors import AgentrioError
from agentrio.engine.markers import MARKER_TTL_S
from agentrio.engine.store import SqliteStore

__all__ = ["main"]


async def _claim(
    store: SqliteStore, session: str, task_hash: str, outcomes: list[dict[str, str]]
) -> None:
    try:
        row = await store.claim(session, task_hash, now=time.time(), ttl=MARKER_TTL_S)
    except AgentrioError as exc:
        outcomes.append({"error": type(exc).__name__, "message": str(exc)})
    else:
        outcomes.append({"won": row.task_hash})


async def _serve(path: Path, count: int) -> None:
    store = await SqliteStore.open(path)
    print("ready", flush=True)
    while line := await trio.to_thread.run_sync(sys.stdin.readline):
        session, task_hash = line.split()
        outcomes: list[dict[str, str]] = []
        async with trio.open_nursery() as nursery:
            for _ in range(count):
                nursery.start_soon(_claim, store, session, task_hash, outcomes)
        print(json.dumps(outcomes), flush=True)
    await store.aclose()


def main() -> None:
    trio.run(_serve, Path(sys.argv[1]), int(sys.argv[2]))


if __name__ == "__main__":
    main()
