"""B17: an ``edit_file`` of a 1 MB file, end to end (issue 32 section 2).

Each sample is one task of an in-process engine whose scripted model calls
``edit_file`` on a 1 MB text file (20 000 lines) to change one line in its middle; a
registry listener approves the confirmation as soon as it is offered. Timed from
starting the task to its end: the path judged by real path, the file read and hashed,
the diff computed (one line changed: three hunks' worth of context), the ask
registered and announced with the diff, the approval, the file read back and checked,
written to a temporary file, flushed and renamed. The file's bytes are checked after
each sample.

Baseline: the same change done directly in Python (read, replace, write a temporary
file, ``fsync``, rename), the floor any safe editor pays. Target: p50 ≤ 150 ms (an
edit must feel instant next to the person reading its diff).
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import trio

from agentrio.engine import AskReply, Config, open_engine
from agentrio.engine.models import Message, ModelReply, ToolCallRequest, ToolSpec
from bench.common import BenchArgs, BenchResult, Stats, main, profiling

__all__ = ["run"]

LINES: Final = 20_000
TARGET_MS: Final = 150.0


def _content(marker: str) -> str:
    """About 1 MB of text: 20 000 lines of 52 bytes, line 10 000 carrying ``marker``."""
    return "".join(
        f"line {i:05d} {marker if i == LINES // 2 else 'unchanged'}{'.' * 30}\n"
        for i in range(LINES)
    )


class _Replay:
    """A model that replays ``replies`` in order (the engine's scripted model is
    internal; the benches use its public model protocol)."""

    name = "b17"

    def __init__(self, replies: list[ModelReply]) -> None:
        self._replies = iter(replies)

    async def complete(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], **sinks: Any
    ) -> ModelReply:
        await trio.lowlevel.checkpoint()
        return next(self._replies)

    async def aclose(self) -> None:
        return None


def _direct(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    temp = path.with_name(f".{path.name}.tmp")
    with open(temp, "w") as out:
        out.write(text.replace(old, new, 1))
        out.flush()
        os.fsync(out.fileno())
    os.replace(temp, path)


async def _measure(work: Path, rounds: int, profile: Path | None) -> dict[str, list[int]]:
    samples: dict[str, list[int]] = {"tool": [], "direct": []}
    path = work / "big.txt"
    calls = []
    for n in range(rounds + 3):
        old, new = ("before", "after") if n % 2 == 0 else ("after", "before")
        args = {"path": str(path), "old_string": f"{old}.", "new_string": f"{new}."}
        calls.append(
            ModelReply(tool_calls=[ToolCallRequest(id=f"e{n}", name="edit_file", args=args)])
        )
        calls.append(ModelReply(text="done"))
    model = _Replay(calls)
    path.write_text(_content("before"))
    async with open_engine(Config(home=str(work / "home")), model=model) as engine:
        with engine.registry.listen("chat-") as listener:

            async def approving() -> None:
                while True:
                    notice = await listener.next_notice()
                    entry = getattr(notice, "entry", None)  # only an offer carries one
                    if entry is not None:
                        await engine.answer(entry.id, AskReply(approve=True), by=listener)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(approving)
                with profiling(profile):
                    for n in range(rounds + 3):
                        t0 = time.perf_counter_ns()
                        run = await engine.start_task("chat-bench", "edit")
                        outcome = await run.wait_done()
                        elapsed = time.perf_counter_ns() - t0
                        assert outcome.status == "finished", outcome
                        expected = _content("after" if n % 2 == 0 else "before")
                        assert path.read_text() == expected, "the edit did not apply exactly"
                        if n >= 3:  # the first runs warm up
                            samples["tool"].append(elapsed)
                nursery.cancel_scope.cancel()
    for n in range(rounds):
        old, new = ("before.", "after.") if n % 2 == 0 else ("after.", "before.")
        t0 = time.perf_counter_ns()
        _direct(path, old, new)
        samples["direct"].append(time.perf_counter_ns() - t0)
    return samples


def run(args: BenchArgs) -> BenchResult:
    rounds = 20 if args.quick else 100
    with tempfile.TemporaryDirectory(prefix="agentrio-b17-") as tmp:
        work = Path(tmp)
        samples = trio.run(_measure, work, rounds, args.profile)
    tool, direct = Stats.of_ns(samples["tool"]), Stats.of_ns(samples["direct"])
    result = BenchResult(
        "B17", "edit_file of a 1 MB file, end to end (diff, approval, atomic write)"
    )
    result.add(
        "edit_file task p50",
        f"{tool.p50:.1f} ms",
        f"direct replace+fsync+rename {direct.p50:.1f} ms",
        f"{tool.p50 / direct.p50:.1f}×",
        f"≤ {TARGET_MS:.0f} ms",
        tool.p50 <= TARGET_MS,
    )
    result.add("edit_file task p99", f"{tool.p99:.1f} ms", f"direct {direct.p99:.1f} ms")
    result.notes.append(
        f"{tool.n} tasks, each one edit_file call approved by a registry listener, on a "
        f"{LINES}-line file of {len(_content('before')):,} bytes; the file checked after each"
    )
    return result


if __name__ == "__main__":
    main(run)
