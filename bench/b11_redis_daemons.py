"""B11: sends per second with one daemon against three daemons on one Redis.

A ``redis-server`` is started on a free loopback port (no persistence, as
tests/redis_server.py starts it). One trial posts ``ask: Continue? | yes, no`` tasks
over ``POST /v1/send`` (`bench.load.send_many`, 16 connections per daemon, each well
under 1,000 requests) and waits until every daemon is idle: every task has run to its
``ask_user`` and parked (task row, snapshot, marker written to Redis). The figure is
tasks per second over that whole span, first send to the last daemon idle.

* **one daemon**: every send to the one daemon.
* **three daemons**: three daemons with the same ``[store] url``, ``prefix`` and
  token, so one cluster (docs/deployment.md): the sends spread evenly over them, each
  daemon its own sessions; every daemon also relays its events to the sessions' Redis
  streams and hears the others' heartbeats, as a real cluster does.
* **SQLite** (informative): one daemon on its home's SQLite file, the same sends.

Each trial uses a fresh prefix; the kinds alternate. On a 2-core machine three daemons
share the cores the one daemon had to itself, so the three-daemon figure shows what the
shared store costs (Lua scripts, one server) more than what more machines would gain.
"""

from __future__ import annotations

import secrets
import tempfile
import time
from pathlib import Path

import httpx
import trio

from bench.common import BenchArgs, BenchResult, DaemonProcess, Stats, main, redis_server
from bench.load import health, send_many, wait_for

__all__ = ["run"]

INPUT = "ask: Continue? | yes, no"
SESSIONS_PER_DAEMON = 50


def _store_config(url: str, prefix: str) -> str:
    return f'[store]\nbackend = "redis"\nurl = "{url}"\nprefix = "{prefix}"\n'


async def _trial(daemons: list[DaemonProcess], tasks: int) -> float:
    """Tasks per second: ``tasks`` sends spread over ``daemons``, to all idle."""
    share = tasks // len(daemons)

    def idle() -> bool:
        return all(health(d.base_url).get("tasks") == 0 for d in daemons)

    async def send_to(index: int, daemon: DaemonProcess) -> None:
        bodies: list[dict[str, object]] = [
            {"session_id": f"chat-b11-{index}-{i % SESSIONS_PER_DAEMON}", "input": INPUT}
            for i in range(share)
        ]
        async with httpx.AsyncClient(base_url=daemon.base_url, headers=daemon.headers) as client:
            hashes = await send_many(client, bodies)
        assert len(hashes) == share
        assert all(hashes)

    started = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for index, daemon in enumerate(daemons):
            nursery.start_soon(send_to, index, daemon)
    await wait_for(idle, "every task parked", timeout_s=300, interval_s=0.02)
    return share * len(daemons) / (time.perf_counter() - started)


def _run_kind(home: Path, configs: list[str], tasks: int) -> float:
    token = secrets.token_hex(16)
    daemons = [
        DaemonProcess(home / f"d{i}", config=config, token=token)
        for i, config in enumerate(configs)
    ]
    try:
        for daemon in daemons:
            daemon.wait_ready()
        return trio.run(_trial, daemons, tasks)
    finally:
        for daemon in daemons:
            daemon.stop()


def run(args: BenchArgs) -> BenchResult:
    tasks, trials = (300, 1) if args.quick else (1000, 3)
    result = BenchResult("B11", "Sends per second: one daemon vs three daemons on one Redis")
    rates: dict[str, list[float]] = {"one": [], "three": [], "sqlite": []}
    with (
        tempfile.TemporaryDirectory(prefix="agentrio-b11-") as tmp,
        redis_server(Path(tmp) / "redis") as url,
    ):
        if url is None:
            result.notes.append("redis-server is not installed: nothing was measured")
            return result
        for trial in range(trials):
            base = Path(tmp) / f"t{trial}"
            rates["one"].append(
                _run_kind(base / "one", [_store_config(url, f"b11-{trial}-one:")], tasks)
            )
            shared = _store_config(url, f"b11-{trial}-three:")
            rates["three"].append(_run_kind(base / "three", [shared] * 3, tasks))
            rates["sqlite"].append(_run_kind(base / "sqlite", [""], tasks))
    # Stats works in nanoseconds-to-milliseconds; a rate's median is taken directly.
    one, three, sqlite = (Stats.of_ns(rates[k]).p50 * 1e6 for k in ("one", "three", "sqlite"))
    result.add(
        "three daemons on one Redis, tasks/s (median)",
        f"{three:.0f}/s",
        f"one daemon on the same Redis {one:.0f}/s",
        f"{three / one:.2f}×",
    )
    result.add(
        "one daemon on Redis, tasks/s (median)",
        f"{one:.0f}/s",
        f"one daemon on SQLite {sqlite:.0f}/s",
        f"{one / sqlite:.2f}×",
    )
    result.notes.append(
        f"{tasks} `{INPUT}` sends per trial through POST /v1/send, each to parked; "
        f"{trials} trials of each kind, alternating; three daemons: one [store] url and "
        f"prefix, {SESSIONS_PER_DAEMON} sessions each; all rates: "
        + ", ".join(f"{k} " + "/".join(f"{r:.0f}" for r in v) for k, v in rates.items())
    )
    return result


if __name__ == "__main__":
    main(run)
