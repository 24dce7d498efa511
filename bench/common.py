"""Shared pieces of the benchmarks: statistics, the result format, the machine line, and
a daemon subprocess with RSS/CPU readings.

Every bench module exposes ``run(args) -> BenchResult`` and calls `main` under
``if __name__ == "__main__"``. `main` parses ``--json PATH`` (where `bench.run_all`
collects the result), ``--quick`` (few repetitions, for a smoke run) and
``--profile PATH`` (write a pyinstrument text profile of the measured part, used when a
target is missed) and ``--scale`` (the large sizes of a growth bench, ``make
bench-scale``). A result is a list of rows: the metric, its value, the baseline
measured in the *same* run, their ratio, the target and whether it was met.

Timing is ``time.perf_counter_ns``; percentiles are nearest-rank on the sorted samples,
so p99 of fewer than 100 samples is the maximum (the table says how many there were).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import math
import os
import platform
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs

__all__ = [
    "ROOT",
    "BenchArgs",
    "BenchResult",
    "DaemonProcess",
    "Row",
    "Stats",
    "cpu_seconds",
    "machine_line",
    "main",
    "ms",
    "profiling",
    "redis_server",
    "rss_mib",
]

ROOT = Path(__file__).resolve().parents[1]


def ms(ns: float) -> float:
    return ns / 1e6


@attrs.frozen
class Stats:
    """Milliseconds: median, p99 (nearest rank), min, max, mean; ``n`` samples."""

    n: int
    p50: float
    p99: float
    min: float
    max: float
    mean: float

    @classmethod
    def of_ns(cls, samples: Sequence[int | float]) -> Stats:
        if not samples:
            raise ValueError("no samples")
        ordered = sorted(samples)

        def rank(q: float) -> float:
            return ordered[max(0, math.ceil(q * len(ordered)) - 1)]

        return cls(
            n=len(ordered),
            p50=ms(rank(0.5)),
            p99=ms(rank(0.99)),
            min=ms(ordered[0]),
            max=ms(ordered[-1]),
            mean=ms(sum(ordered) / len(ordered)),
        )

    def short(self) -> str:
        return f"p50 {self.p50:.3f} ms, p99 {self.p99:.3f} ms (n={self.n})"


@attrs.frozen
class Row:
    """One line of the table. ``met`` is None for a row that has no target."""

    metric: str
    value: str
    baseline: str = ""
    ratio: str = ""
    target: str = ""
    met: bool | None = None


@attrs.define
class BenchResult:
    id: str
    title: str
    rows: list[Row] = attrs.field(factory=list)
    notes: list[str] = attrs.field(factory=list)
    seconds: float = 0.0

    def add(self, *args: Any, **kwargs: Any) -> None:
        self.rows.append(Row(*args, **kwargs))

    @property
    def missed(self) -> bool:
        return any(row.met is False for row in self.rows)

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BenchResult:
        rows = [Row(**row) for row in data.pop("rows")]
        return cls(rows=rows, **data)

    def print(self) -> None:
        print(f"== {self.id}: {self.title} ({self.seconds:.1f} s)")
        for row in self.rows:
            mark = {True: "met", False: "MISSED", None: ""}[row.met]
            parts = [row.value]
            if row.baseline:
                parts.append(f"baseline {row.baseline}")
            if row.ratio:
                parts.append(f"ratio {row.ratio}")
            if row.target:
                parts.append(f"target {row.target} {mark}")
            print(f"  {row.metric}: " + "; ".join(parts))
        for note in self.notes:
            print(f"  note: {note}")


@attrs.frozen
class BenchArgs:
    quick: bool
    profile: Path | None
    #: ``--scale``: the large sizes of a growth bench (``make bench-scale``).
    scale: bool = False


def main(run: Callable[[BenchArgs], BenchResult]) -> None:
    """Command line of one bench module (see the module doc)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--profile", type=Path, default=None)
    parser.add_argument("--scale", action="store_true")
    ns = parser.parse_args()
    started = time.perf_counter()
    result = run(BenchArgs(quick=ns.quick, profile=ns.profile, scale=ns.scale))
    result.seconds = time.perf_counter() - started
    result.print()
    if ns.json is not None:
        ns.json.write_text(json.dumps(result.to_json(), indent=2))


@contextmanager
def profiling(path: Path | None) -> Iterator[None]:
    """Sample the block with pyinstrument and write its text profile to ``path``;
    nothing at all when ``path`` is None (so timings are never taken under it)."""
    if path is None:
        yield
        return
    from pyinstrument import Profiler

    profiler = Profiler(interval=0.0005, async_mode="disabled")
    profiler.start()
    try:
        yield
    finally:
        profiler.stop()
        path.write_text(profiler.output_text(unicode=False, color=False, show_all=False))


# ---------------------------------------------------------------------- the machine


def _version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "absent"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def machine_line() -> str:
    libs = ", ".join(
        f"{name} {_version(name)}"
        for name in (
            "trio",
            "trio-websocket",
            "hypercorn",
            "starlette",
            "langgraph",
            "langgraph-checkpoint-sqlite",
            "pyinstrument",
        )
    )
    mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (
        f"{os.cpu_count()} cores ({_cpu_model()}), {mem_gib:.0f} GiB, "
        f"{platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}; {libs}"
    )


# ---------------------------------------------------------------------- processes


def rss_mib(pid: int) -> float:
    """VmRSS of ``pid`` in MiB, from ``/proc/<pid>/status``."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds ``pid`` has used (``/proc/<pid>/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


@contextmanager
def redis_server(directory: Path) -> Iterator[str | None]:
    """A throwaway ``redis-server`` on a free loopback port (tests/redis_server.py:
    no persistence, data in ``directory``): its URL, None without the program."""
    binary = shutil.which("redis-server")
    if binary is None:
        yield None
        return
    from tests.redis_server import RedisServer

    server = RedisServer(binary, directory)
    server.start()
    try:
        yield server.url
    finally:
        server.stop()


class DaemonProcess:
    """``python -m agentrio.engine daemon --port 0`` on its own home, as the e2e tests start it.

    With ``profile`` the daemon runs under pyinstrument, which writes a text profile
    there when the daemon exits cleanly (SIGTERM)."""

    START_DEADLINE_S = 30.0

    def __init__(
        self,
        home: Path,
        *,
        profile: Path | None = None,
        config: str = "",
        python: str = sys.executable,
        token: str = "",
        env: dict[str, str] | None = None,
    ) -> None:
        self.home = home
        home.mkdir(parents=True, exist_ok=True)
        if config:
            (home / "config.toml").write_text(config)
        if token:  # daemons of one cluster share it (docs/deployment.md)
            (home / "token").write_text(token)
            (home / "token").chmod(0o600)
        prefix = [python]
        if profile is not None:
            prefix += ["-m", "pyinstrument", "-r", "text", "-o", str(profile)]
        env = {**os.environ, **(env or {}), "AGENTRIO_HOME": str(home)}
        self.started_ns = time.perf_counter_ns()
        self.log = (home / "stdout.log").open("ab")
        self.process = subprocess.Popen(
            [*prefix, "-m", "agentrio.engine", "daemon", "--port", "0", "--home", str(home)],
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        self.pid = self.process.pid
        self.base_url = ""
        self.ws_url = ""
        self.token = ""

    def wait_ready(self) -> None:
        """Poll ``daemon.json`` (1 ms) until it names this process."""
        deadline = time.monotonic() + self.START_DEADLINE_S
        path = self.home / "daemon.json"
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"daemon exited with {self.process.returncode}")
            try:
                data = json.loads(path.read_text())
            except (OSError, ValueError):
                data = None
            if data is not None and data.get("pid") == self.pid:
                self.token = (self.home / "token").read_text().strip()
                self.base_url = f"http://{data['host']}:{data['port']}"
                self.ws_url = f"ws://{data['host']}:{data['port']}/v1/ws"
                return
            time.sleep(0.001)
        raise RuntimeError("daemon did not write daemon.json in time")

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def rss_mib(self) -> float:
        return rss_mib(self.pid)

    def cpu_seconds(self) -> float:
        return cpu_seconds(self.pid)

    def stop(self, timeout: float = 60.0) -> int | None:
        """SIGTERM and wait; SIGKILL after ``timeout``. The exit code, None if killed."""
        try:
            if self.process.poll() is None:
                self.process.send_signal(signal.SIGTERM)
            try:
                return self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
                return None
        finally:
            self.log.close()

    def __enter__(self) -> DaemonProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
