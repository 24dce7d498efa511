"""B9: how one daemon grows with its number of tasks (issue 23), as a growth table.

Each size runs on fresh daemon subprocesses, one kind of load per daemon:

* **parked**: N ``chat-`` tasks ``ask: Continue? | yes, no`` in sessions of 100 (B4's
  `measure_parked`): RSS per parked task, list pending of one session and resume one
  (p50), and the time to reach all asks per task.
* **finished**: N ``hello`` tasks, which finish at once: half in one session (its first
  input holds the keyword ``zebra-b9``), half in sessions of 100. Then, with nothing
  live: RSS over the idle daemon's, a keyword search of the big session (p50; the
  keyword is in its oldest row only, or in none, so every row is looked at), creating
  one more task (``POST /v1/send`` → 202, p50), and the largest WAL file seen.
* **running**: N ``sleep 600`` commands running (B3's `measure_cancels`): cancel →
  ``done{canceled}`` p99 and max. Each running task holds a process (two, with the
  shell), so this load stops at 5,000 however large the other sizes are.

Sizes: 1,000 and 5,000 in ``make bench`` (its time budget); ``--scale`` (``make
bench-scale``) runs 1,000 / 10,000 / 100,000 parked and finished tasks, which takes
about 8 minutes on 2 cores (100,000 parked asks alone ~3 minutes). Each row gives its
values by size, the shape of its growth (`shape`) and its target: RSS per parked task
≤ 3 KiB (the slope between the smallest and largest size, so a fixed start-up cost is
not spread over the tasks), RSS with nothing live within 64 MiB of idle, list /
resume / keyword search p50 ≤ 5 ms at every size, cancel p99 ≤ 20 ms with 5,000
running.
"""

from __future__ import annotations

import math
import os
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import httpx
import trio

from bench.b3_cancel_latency import measure_cancels
from bench.b4_scale import measure_parked
from bench.common import BenchArgs, BenchResult, DaemonProcess, Stats, main
from bench.load import health, send_many, wait_for

__all__ = ["run", "shape"]

SIZES = (1_000, 5_000)
SCALE_SIZES = (1_000, 10_000, 100_000)
QUICK_SIZES = (200, 1_000)
RUNNING_SIZES = (1_000, 5_000)
QUICK_RUNNING_SIZES = (100, 500)
PROBES = 40
CANCELS = 100
PER_SESSION = 100
KEYWORD = "zebra-b9"
ABSENT = "b9-absent"
TARGET_PARKED_KIB = 3.0
TARGET_IDLE_GROWTH_MIB = 64.0
TARGET_P50_MS = 5.0
TARGET_CANCEL_P99_MS = 20.0
CANCEL_TARGET_RUNNING = 5_000


def shape(sizes: Sequence[int], values: Sequence[float]) -> str:
    """How ``values`` grow from the smallest size to the largest: ``flat`` (at most
    1.5× for any growth of the size), else the exponent of a power law through the two
    ends -- ``linear`` near 1, ``sublinear`` below, ``superlinear`` above."""
    first, last = values[0], values[-1]
    if last <= 1.5 * first or len(sizes) < 2:
        return "flat"
    if first <= 0:
        return "grows"
    exponent = math.log(last / first) / math.log(sizes[-1] / sizes[0])
    word = "linear" if 0.8 <= exponent <= 1.2 else "sublinear" if exponent < 0.8 else "superlinear"
    return f"{word} (~N^{exponent:.1f})"


def _k(size: int) -> str:
    return f"{size // 1000}k" if size % 1000 == 0 else str(size)


def _by_size(sizes: Sequence[int], values: Sequence[float], fmt: str) -> str:
    return " · ".join(
        f"{_k(size)}: {format(value, fmt)}" for size, value in zip(sizes, values, strict=True)
    )


def _idle(daemon: DaemonProcess) -> bool:
    return health(daemon.base_url).get("tasks") == 0


async def measure_finished(daemon: DaemonProcess, tasks: int, probes: int) -> dict[str, object]:
    """The finished-tasks load of the module docstring."""
    big = tasks // 2
    bodies: list[dict[str, object]] = [{"session_id": "chat-b9-one", "input": f"hello {KEYWORD}"}]
    bodies += [{"session_id": "chat-b9-one", "input": "hello"} for _ in range(big - 1)]
    bodies += [
        {"session_id": f"chat-b9-s{i // PER_SESSION}", "input": "hello"} for i in range(tasks - big)
    ]
    wal = daemon.home / "agentrio.db-wal"
    wal_max = [0]

    def settled() -> bool:
        if wal.exists():
            wal_max[0] = max(wal_max[0], wal.stat().st_size)
        return _idle(daemon)

    async with httpx.AsyncClient(
        base_url=daemon.base_url, headers=daemon.headers, timeout=60
    ) as client:
        rss_idle = daemon.rss_mib()
        await send_many(client, bodies)
        await wait_for(settled, "every task finished", timeout_s=1800, interval_s=0.2)
        rss = daemon.rss_mib()
        searches: list[int] = []
        for probe in range(probes):
            keyword = KEYWORD if probe % 2 == 0 else ABSENT
            t0 = time.perf_counter_ns()
            response = await client.get(
                "/v1/session/chat-b9-one/task/history", params={"keyword": keyword}
            )
            searches.append(time.perf_counter_ns() - t0)
            assert response.status_code == 200, response.text
            found = response.json()["tasks"]
            assert len(found) == (1 if keyword == KEYWORD else 0), found
        created: list[int] = []
        for probe in range(probes):
            t0 = time.perf_counter_ns()
            response = await client.post(
                "/v1/send", json={"session_id": f"chat-b9-new-{probe}", "input": "hello"}
            )
            created.append(time.perf_counter_ns() - t0)
            assert response.status_code == 202, response.text
        settled()
    return {
        "rss_idle": rss_idle,
        "rss": rss,
        "search": searches,
        "create": created,
        "wal_mib": wal_max[0] / 2**20,
    }


Measure = Callable[[DaemonProcess, int, int], Awaitable[dict[str, object]]]


def _daemon_run(home: Path, measure: Measure, size: int, probes: int) -> dict[str, object]:
    with DaemonProcess(home) as daemon:
        daemon.wait_ready()
        return trio.run(measure, daemon, size, probes)


def _cancels(home: Path, load: int, trials: int) -> Stats:
    with DaemonProcess(home) as daemon:
        daemon.wait_ready()
        samples, alive, _ = trio.run(measure_cancels, daemon, load, trials)
    assert alive == 0, f"{alive} process groups left alive"
    return Stats.of_ns(samples)


def _sizes(args: BenchArgs) -> tuple[tuple[int, ...], tuple[int, ...]]:
    if args.quick:
        return QUICK_SIZES, QUICK_RUNNING_SIZES
    return (SCALE_SIZES if args.scale else SIZES), RUNNING_SIZES


def run(args: BenchArgs) -> BenchResult:
    sizes, running = _sizes(args)
    probes = 10 if args.quick else PROBES
    trials = 20 if args.quick else CANCELS
    load_before = os.getloadavg()
    result = BenchResult(
        "B9", f"Growth with the number of tasks ({', '.join(_k(s) for s in sizes)})"
    )
    parked: list[dict[str, object]] = []
    finished: list[dict[str, object]] = []
    cancels: list[Stats] = []
    seconds: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="agentrio-b9-") as tmp:
        for size in sizes:
            started = time.perf_counter()
            parked.append(_daemon_run(Path(tmp) / f"parked-{size}", measure_parked, size, probes))
            finished.append(
                _daemon_run(Path(tmp) / f"finished-{size}", measure_finished, size, probes)
            )
            seconds[_k(size)] = time.perf_counter() - started
        for load in running:
            started = time.perf_counter()
            cancels.append(_cancels(Path(tmp) / f"running-{load}", load, trials))
            seconds[f"{_k(load)} running"] = time.perf_counter() - started
    _parked_rows(result, sizes, parked)
    _finished_rows(result, sizes, finished)
    _cancel_rows(result, running, cancels)
    load_after = os.getloadavg()
    result.notes.append(
        "seconds per size: " + ", ".join(f"{name} {value:.0f} s" for name, value in seconds.items())
    )
    result.notes.append(
        f"machine load average (1 min) {load_before[0]:.1f} before, {load_after[0]:.1f} after "
        f"on {os.cpu_count()} cores; p50 over {probes} probes, cancels {trials} per size"
    )
    return result


def _number(data: dict[str, object], key: str) -> float:
    value = data[key]
    assert isinstance(value, int | float)
    return float(value)


def _p50s(rows: list[dict[str, object]], key: str) -> list[float]:
    return [Stats.of_ns(row[key]).p50 for row in rows]  # type: ignore[arg-type]


def _parked_rows(result: BenchResult, sizes: Sequence[int], rows: list[dict[str, object]]) -> None:
    per_task = [
        (_number(row, "rss") - _number(row, "rss_idle")) * 1024 / size
        for size, row in zip(sizes, rows, strict=True)
    ]
    # What one more parked task costs: the slope between the smallest and the largest
    # size, without what any first tasks cost once (pools, caches, first requests).
    slope = per_task[0]
    if len(sizes) > 1:
        grown = _number(rows[-1], "rss") - _number(rows[0], "rss")
        slope = grown * 1024 / (sizes[-1] - sizes[0])
    result.add(
        "parked ask_user tasks: daemon RSS per task",
        _by_size(sizes, per_task, ".2f") + " KiB",
        f"idle {_number(rows[0], 'rss_idle'):.0f} MiB",
        f"per task {shape(sizes, per_task)}; {slope:.2f} KiB per added task",
        f"≤ {TARGET_PARKED_KIB:g} KiB per added task",
        slope <= TARGET_PARKED_KIB,
    )
    for label, key in (("list pending of one session", "list"), ("resume one", "resume")):
        p50 = _p50s(rows, key)
        result.add(
            f"parked: {label} p50",
            _by_size(sizes, p50, ".2f") + " ms",
            "",
            shape(sizes, p50),
            f"≤ {TARGET_P50_MS:g} ms at every size",
            all(value <= TARGET_P50_MS for value in p50),
        )
    reach = [_number(row, "park_s") * 1000 / size for size, row in zip(sizes, rows, strict=True)]
    result.add(
        "parked: time to reach all asks, per task",
        _by_size(sizes, reach, ".2f") + " ms",
        "",
        "per task " + shape(sizes, reach),
    )


def _finished_rows(
    result: BenchResult, sizes: Sequence[int], rows: list[dict[str, object]]
) -> None:
    growth = [_number(row, "rss") - _number(row, "rss_idle") for row in rows]
    result.add(
        "finished tasks, nothing live: RSS over idle",
        _by_size(sizes, growth, "+.1f") + " MiB",
        f"idle {_number(rows[0], 'rss_idle'):.0f} MiB",
        shape(sizes, [max(value, 1.0) for value in growth]),
        f"within {TARGET_IDLE_GROWTH_MIB:g} MiB of idle",
        all(value <= TARGET_IDLE_GROWTH_MIB for value in growth),
    )
    search = _p50s(rows, "search")
    result.add(
        "history of one session (N/2 rows): keyword in the oldest row or none, p50",
        _by_size(sizes, search, ".2f") + " ms",
        "",
        shape(sizes, search),
        f"≤ {TARGET_P50_MS:g} ms at every size",
        all(value <= TARGET_P50_MS for value in search),
    )
    create = _p50s(rows, "create")
    result.add(
        "history: creating a task (POST /v1/send → 202) p50",
        _by_size(sizes, create, ".2f") + " ms",
        "",
        shape(sizes, create),
    )
    wal = [_number(row, "wal_mib") for row in rows]
    result.add(
        "history: largest WAL file seen",
        _by_size(sizes, wal, ".1f") + " MiB",
        "",
        shape(sizes, wal),
    )


def _cancel_rows(result: BenchResult, running: Sequence[int], stats: list[Stats]) -> None:
    judged = [s for load, s in zip(running, stats, strict=True) if load == CANCEL_TARGET_RUNNING]
    result.add(
        "cancel → done{canceled} with N running: p99 / max",
        " · ".join(
            f"{_k(load)}: {s.p99:.1f} / {s.max:.1f} ms"
            for load, s in zip(running, stats, strict=True)
        ),
        " · ".join(
            f"{_k(load)} p50 {s.p50:.1f} ms" for load, s in zip(running, stats, strict=True)
        ),
        "p99 " + shape(running, [s.p99 for s in stats]),
        f"p99 ≤ {TARGET_CANCEL_P99_MS:g} ms at {_k(CANCEL_TARGET_RUNNING)} running",
        all(s.p99 <= TARGET_CANCEL_P99_MS for s in judged) if judged else None,
    )


if __name__ == "__main__":
    main(run)
