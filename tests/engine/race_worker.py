"""A separate OS process for the store race and crash tests (run with ``python -m``).

DB is a SQLite file or a ``redis://`` URL (the Redis store, issue 21).

``claim DB SESSION HASH COUNT [--move]``: open the store, print ``ready``, wait for a
line on stdin (the shared start signal), fire COUNT concurrent claims of the same task
(same ``now``, ttl 60; with ``--move`` each asks for its own new hash), print one JSON
line with the outcomes.

``write DB SESSION``: write running tasks with sizeable snapshots and their markers,
one transaction each, printing ``wrote <index>`` after each commit, until killed.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio

from agentrio.engine.errors import AgentrioError
from agentrio.engine.ids import new_task_hash
from agentrio.engine.store import Store, TaskRow, marker_key, open_store
from agentrio.engine.store.redis_store import open_redis_store

__all__ = ["CLAIM_NOW", "WRITE_NOW", "main", "open_any_store", "write_snapshot"]

#: The ``now`` every racing claim passes.
CLAIM_NOW = 1_000.0
#: The ``now`` the writer stamps on its rows and markers (ttl 60).
WRITE_NOW = 2_000.0


def write_snapshot(index: int) -> dict[str, Any]:
    """The snapshot the writer stores for task ``index``: large enough that a commit
    spans many pages, so a kill lands mid-write often."""
    return {"objective": f"task {index}", "messages": [{"role": "tool", "content": "x" * 200_000}]}


@asynccontextmanager
async def open_any_store(location: str) -> AsyncIterator[Store]:
    """The store at ``location``: a ``redis://`` URL (issue 21) or a SQLite file."""
    if location.startswith(("redis://", "rediss://", "unix://")):
        async with open_redis_store(location) as redis_store:
            yield redis_store
    else:
        async with open_store(Path(location)) as sqlite_store:
            yield sqlite_store


async def _claim(location: str, session: str, task_hash: str, count: int, move: bool) -> None:
    async with open_any_store(location) as store:
        await _claim_in(store, session, task_hash, count, move)


async def _claim_in(store: Store, session: str, task_hash: str, count: int, move: bool) -> None:
    outcomes: list[dict[str, str]] = []

    async def one() -> None:
        new_hash = new_task_hash()
        try:
            row = await store.claim(
                session,
                task_hash,
                now=CLAIM_NOW,
                ttl=60.0,
                new_task_hash=new_hash if move else None,
            )
        except AgentrioError as exc:
            outcomes.append({"error": type(exc).__name__, "message": str(exc)})
        else:
            outcomes.append({"won": row.task_hash})

    print("ready", flush=True)
    await trio.to_thread.run_sync(sys.stdin.readline)
    async with trio.open_nursery() as nursery:
        for _ in range(count):
            nursery.start_soon(one)
    print(json.dumps(outcomes), flush=True)


async def _write(location: str, session: str) -> None:
    async with open_any_store(location) as store:
        await _write_in(store, session)


async def _write_in(store: Store, session: str) -> None:
    index = 0
    while True:
        task_hash = f"{index:032x}"
        await store.put_task(
            TaskRow(
                session_id=session,
                task_hash=task_hash,
                state="running",
                objective=f"task {index}",
                origin="chat-",
                model="builtin",
                created_at=WRITE_NOW,
                updated_at=WRITE_NOW,
                snapshot=write_snapshot(index),
                questions=[],
            )
        )
        await store.set_marker(marker_key(session, task_hash), expires_at=WRITE_NOW + 60)
        print(f"wrote {index}", flush=True)
        index += 1


def main(argv: list[str]) -> None:
    match argv:
        case ["claim", db, session, task_hash, count, *flags]:
            trio.run(_claim, db, session, task_hash, int(count), "--move" in flags)
        case ["write", db, session]:
            trio.run(_write, db, session)
        case _:
            raise SystemExit(f"usage: see {__file__}")


if __name__ == "__main__":
    main(sys.argv[1:])
