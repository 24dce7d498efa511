"""Load helpers of the daemon benches: many tasks through ``POST /v1/send``, and the
daemon's child processes read from ``/proc``."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

import httpx
import trio

__all__ = ["children", "process_group_alive", "send_many", "wait_for"]


async def send_many(
    client: httpx.AsyncClient,
    bodies: Sequence[dict[str, object]],
    *,
    concurrency: int = 16,
) -> list[str]:
    """POST every body to ``/v1/send`` (``concurrency`` at once); the task hashes, in
    order. Any status but 202 raises."""
    hashes = [""] * len(bodies)
    limiter = trio.CapacityLimiter(concurrency)

    async def one(index: int, body: dict[str, object]) -> None:
        async with limiter:
            response = await client.post("/v1/send", json=body)
            if response.status_code != 202:
                raise RuntimeError(f"send {index}: {response.status_code} {response.text}")
            hashes[index] = response.json()["task_hash"]

    async with trio.open_nursery() as nursery:
        for index, body in enumerate(bodies):
            nursery.start_soon(one, index, body)
    return hashes


def children(parent: int) -> dict[int, list[str]]:
    """Live (non-zombie) direct children of ``parent``: pid → argv."""
    found: dict[int, list[str]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
            fields = stat.rsplit(")", 1)[1].split()
            if int(fields[1]) != parent or fields[0] == "Z":
                continue
            argv = Path(entry.path, "cmdline").read_bytes().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue
        found[int(entry.name)] = [part.decode() for part in argv if part]
    return found


def process_group_alive(pgid: int) -> bool:
    """Whether any non-zombie process is still in group ``pgid``."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            fields = Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


async def wait_for(
    predicate: object, what: str, timeout_s: float, interval_s: float = 0.05
) -> None:
    """Poll a blocking ``predicate()`` in a thread until it is true."""
    assert callable(predicate)
    with trio.fail_after(timeout_s):
        while not await trio.to_thread.run_sync(predicate):
            await trio.sleep(interval_s)
    del what


def health(base_url: str) -> dict[str, object]:
    """``GET /v1/health`` (blocking)."""
    import urllib.request

    with urllib.request.urlopen(f"{base_url}/v1/health", timeout=5) as response:
        data: dict[str, object] = json.load(response)
    return data
