"""A running command's output as ``tool_output`` events (issue 33 item 6):
`agentrio.engine.tools.live_output`. Time is trio's `MockClock` (autojump): the ticker's
period passes at once; the output comes from an in-test producer, and one test runs a
real subprocess through `run_in_group`."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import trio
import trio.testing

from agentrio.engine.processes.runner import run_in_group
from agentrio.engine.tools.live_output import (
    EVERY_S,
    LINE_CHARS,
    TAIL_LINES,
    LiveOutput,
    run_watched,
)
from agentrio.protocol import events as ev

OnOutput = Callable[[bytes], Awaitable[None]]


class Events:
    """Stands in for the task's emit: keeps each event's fields and its clock time."""

    def __init__(self) -> None:
        self.sent: list[tuple[float, dict[str, Any]]] = []

    def __call__(self, kind: type[Any], **fields: Any) -> Any:
        assert kind is ev.ToolOutput
        self.sent.append((trio.current_time(), fields))
        return None


def test_live_output_keeps_the_newest_lines_bounded() -> None:
    """Only `TAIL_LINES` lines, each at most `LINE_CHARS`, are kept however much comes;
    a character split across chunks decodes whole; the unfinished line counts."""
    live = LiveOutput()
    live.add(b"".join(b"line %d\n" % n for n in range(1000)))
    live.add(b"x" * (LINE_CHARS * 3) + b"\n")
    live.add(b"caf\xc3")
    live.add(b"\xa9 unfinished")
    lines, total = live.take()
    assert len(lines) == TAIL_LINES
    assert lines[-2] == "x" * (LINE_CHARS - 1) + "…"
    assert lines[-1] == "café unfinished"
    assert lines[0] == "line 997"
    assert total == 1002
    assert not live.fresh


async def test_events_are_throttled_and_only_for_new_output(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """At most one event per `EVERY_S`, none before the first period (a quick command
    sends nothing), none while nothing new is printed; the result is returned."""
    events = Events()

    async def command(on_output: OnOutput) -> str:
        for n in range(20):  # a flood: 20 chunks within one period
            await on_output(b"flood %d\n" % n)
            await trio.sleep(EVERY_S / 40)
        await trio.sleep(EVERY_S * 4)  # silence: no events
        await on_output(b"late\n")
        await trio.sleep(EVERY_S * 1.5)
        return "done"

    start = trio.current_time()
    assert await run_watched(events, "call_1_0", "run_command", command) == "done"
    times = [at - start for at, _ in events.sent]
    assert times == pytest.approx([EVERY_S, EVERY_S * 5])  # late came at 4.5 periods
    first, late = (fields for _, fields in events.sent)
    assert first == {
        "call_id": "call_1_0",
        "tool_name": "run_command",
        "lines": [f"flood {n}" for n in range(15, 20)],
        "total_lines": 20,
    }
    assert late["lines"][-1] == "late"
    assert late["total_lines"] == 21


async def test_a_quick_command_sends_nothing(autojump_clock: trio.testing.MockClock) -> None:
    events = Events()

    async def command(on_output: OnOutput) -> int:
        await on_output(b"hello\n")
        return 0

    assert await run_watched(events, "c", "run_command", command) == 0
    assert events.sent == []


async def test_an_error_is_raised_as_itself(autojump_clock: trio.testing.MockClock) -> None:
    """The command's error reaches the caller unwrapped (the tool catches OSError and
    SandboxError by type), and the ticker is gone."""
    events = Events()

    async def command(on_output: OnOutput) -> None:
        await on_output(b"partial")
        await trio.sleep(EVERY_S * 2)
        raise FileNotFoundError("no such program")

    with pytest.raises(FileNotFoundError, match="no such program"):
        await run_watched(events, "c", "run_command", command)
    assert [fields["lines"] for _, fields in events.sent] == [["partial"]]


async def test_cancel_ends_the_command_and_the_ticker() -> None:
    """A cancel (the task stopped) ends both at once; nothing more is emitted."""
    events = Events()
    with trio.move_on_after(EVERY_S * 3) as scope:

        async def command(on_output: OnOutput) -> None:
            while True:
                await on_output(b"tick\n")
                await trio.sleep(EVERY_S / 2)

        await run_watched(events, "c", "run_command", command)
    assert scope.cancelled_caught
    count = len(events.sent)
    assert 1 <= count <= 3
    await trio.sleep(EVERY_S * 2)
    assert len(events.sent) == count


async def test_a_real_command_streams_its_first_line_before_it_ends() -> None:
    """A real subprocess through `run_in_group`: its first line is an event's before the
    command ends, and the result still carries every line."""
    events = Events()
    script = (
        "import time\nfor n in range(3):\n    print(f'step {n}', flush=True)\n    time.sleep(0.6)\n"
    )

    async def command(on_output: OnOutput) -> str:
        result = await run_in_group(
            [sys.executable, "-c", script], keep_bytes=10_000, on_output=on_output
        )
        return result.output

    ended_at = 0.0

    async def watched() -> str:
        nonlocal ended_at
        output = await run_watched(events, "c", "run_command", command)
        ended_at = trio.current_time()
        return output

    output = await watched()
    assert output == "step 0\nstep 1\nstep 2\n"
    assert events.sent, "no live output"
    first_at, first = events.sent[0]
    assert first_at < ended_at
    assert first["lines"][0] == "step 0"
