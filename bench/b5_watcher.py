"""B5: the watcher: a background leg printing 200 MB, against the same command
redirected to a file.

* **leg**: the daemon subprocess; a WebSocket client ``subscribe``\\s to a ``cli-``
  session and sends ``run`` ``bg: CMD`` (allow-all). The real ``background_command``
  leg runs CMD in its process group, appends every chunk to its leg log (R23) and feeds
  the keyword watcher (R28). The sample is from the ``run`` frame to the leg's
  ``leg_finished`` event; the daemon's CPU (user + system, ``/proc``) is read around it.
* **file**: ``sh -c 'CMD > FILE'`` from this process, timed the same way.

CMD prints benign lines (no watcher keyword), so the watcher reads every line and
raises nothing: the steady-state cost of watching.

Two daemons run side by side, measured alternately: one with the watcher's fast path
(Hyperscan, the ``fast`` extra) and one with its plain path (issue 30: Hyperscan is
optional; here it is hidden from that daemon by a ``hyperscan`` module on its
``PYTHONPATH`` that fails to import, as on a machine without the extra).
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from pathlib import Path

import trio

from agentrio.protocol.events import LegFinished
from agentrio.protocol.frames import EventFrame, Run, Subscribe
from agentrio.transport import open_frame_connection
from bench.common import BenchArgs, BenchResult, DaemonProcess, Stats, main

__all__ = ["run"]

MB = 1000**2
TARGET_RATIO = 2.0


def command(size: int) -> str:
    return f"yes 'building module 0042 of the benchmark target, all good' | head -c {size}"


async def _leg(daemon: DaemonProcess, cmd: str, index: int) -> tuple[int, float]:
    """(ns from run to leg_finished, daemon CPU seconds used meanwhile)."""
    session_id = f"cli-b5-{index}"
    async with open_frame_connection(daemon.ws_url, daemon.token) as conn:
        await conn.send(Subscribe(session_id=session_id))
        await trio.sleep(0.05)  # the subscription is in place before the run starts
        cpu0 = daemon.cpu_seconds()
        t0 = time.perf_counter_ns()
        await conn.send(
            Run(
                request_id=f"r{index}",
                session_id=session_id,
                input=f"bg: {cmd}",
                window_hash=f"w{index}",
                allow_all=True,
            )
        )
        with trio.fail_after(300):
            while True:
                frame = await conn.receive()
                if isinstance(frame, EventFrame) and isinstance(frame.event, LegFinished):
                    elapsed = time.perf_counter_ns() - t0
                    assert frame.event.status == "finished", frame.event
                    break
        cpu = daemon.cpu_seconds() - cpu0
    return elapsed, cpu


def _to_file(cmd: str, path: Path) -> int:
    t0 = time.perf_counter_ns()
    subprocess.run(["/bin/sh", "-c", f"{cmd} > {path}"], check=True)
    elapsed = time.perf_counter_ns() - t0
    path.unlink()
    return elapsed


def _plain_env(tmp: Path) -> dict[str, str]:
    """The environment of a daemon that cannot import hyperscan (module doc)."""
    hidden = tmp / "no-hyperscan"
    hidden.mkdir()
    (hidden / "hyperscan.py").write_text('raise ImportError("hidden: the plain path")\n')
    return {
        "PYTHONPATH": os.pathsep.join(filter(None, [str(hidden), os.environ.get("PYTHONPATH")]))
    }


def run(args: BenchArgs) -> BenchResult:
    size, reps = (20 * MB, 2) if args.quick else (200 * MB, 3)
    cmd = command(size)
    legs: dict[str, list[int]] = {"fast": [], "plain": []}
    cpus: dict[str, list[float]] = {"fast": [], "plain": []}
    files: list[int] = []
    with tempfile.TemporaryDirectory(prefix="agentrio-b5-") as tmp:
        _to_file(cmd, Path(tmp) / "warm.out")
        with (
            DaemonProcess(Path(tmp) / "home", profile=args.profile) as fast,
            DaemonProcess(Path(tmp) / "home-plain", env=_plain_env(Path(tmp))) as plain,
        ):
            fast.wait_ready()
            plain.wait_ready()
            for index in range(reps):
                files.append(_to_file(cmd, Path(tmp) / "out"))
                for path, daemon in (("fast", fast), ("plain", plain)):
                    elapsed, cpu = trio.run(_leg, daemon, cmd, index)
                    legs[path].append(elapsed)
                    cpus[path].append(cpu)
    file = Stats.of_ns(files)
    result = BenchResult("B5", f"Watcher: a leg printing {size // MB} MB")
    for path, label in (("fast", ""), ("plain", ", plain path (no Hyperscan)")):
        leg = Stats.of_ns(legs[path])
        ratio = leg.p50 / file.p50
        cpu = sorted(cpus[path])[len(cpus[path]) // 2]
        result.add(
            f"leg wall time{label} (median)",
            f"{leg.p50 / 1000:.2f} s",
            f"to a file {file.p50 / 1000:.2f} s",
            f"{ratio:.2f}×",
            f"≤ {TARGET_RATIO:g}×",
            ratio <= TARGET_RATIO,
        )
        result.add(
            f"daemon CPU per leg{label} (median)",
            f"{cpu:.2f} s",
            f"{size / MB / cpu:.0f} MB per CPU-second" if cpu > 0 else "",
        )
    result.notes.append(
        f"{reps} repetitions each, alternating (file, fast leg, plain leg); real "
        "background_command legs (engine/background.py + engine/watch.py): leg log file + "
        f"keyword watcher; fast legs {_seconds(legs['fast'])} s, plain legs "
        f"{_seconds(legs['plain'])} s, files {_seconds(files)} s"
    )
    return result


def _seconds(samples: list[int]) -> str:
    return ", ".join(f"{x / 1e9:.2f}" for x in samples)


if __name__ == "__main__":
    main(run)
