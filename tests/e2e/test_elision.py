"""The one elision marker a long result carries counts every byte left out (issue 33
item 1, R11, R24).

A command printing 40,000 bytes is kept by the runner, gets ``exit 0`` put before it,
and is clamped again by the task (a foreground result), by the leg manager (a leg's
result) and by the snapshot; each later cut used to swallow the earlier marker and
count only its own bytes (``...[34 bytes elided]...``).
"""

from __future__ import annotations

import re

import trio

from agentrio.protocol import events as ev
from agentrio.protocol.frames import EventFrame, Run, Subscribe
from agentrio.transport import open_frame_connection
from tests.e2e.conftest import Daemon

#: ``seq 1 8000`` prints 38,894 bytes: over the 32 KiB cap, every line different.
COMMAND = "seq 1 8000"
FULL = "exit 0\n" + "".join(f"{n}\n" for n in range(1, 8001))
MARKER = re.compile(r"\n\.\.\.\[(\d+) bytes elided\]\.\.\.\n")


def assert_one_right_marker(kept: str) -> None:
    """``kept`` is a head of `FULL`, one marker, a tail of `FULL`, and the marker's
    count is exactly the bytes between them."""
    markers = list(MARKER.finditer(kept))
    assert len(markers) == 1, kept[:200]
    head, tail = kept[: markers[0].start()], kept[markers[0].end() :]
    assert FULL.startswith(head)
    assert FULL.endswith(tail)
    assert len(head) > 20_000
    assert len(tail) > 7_000
    assert int(markers[0][1]) == len(FULL) - len(head) - len(tail)


async def test_a_long_command_result_counts_what_it_left_out(daemon: Daemon) -> None:
    """Issue 33 item 1: the result the model reads of a 38,901-byte ``exit 0`` + output
    holds one marker whose count plus the kept bytes is the whole."""
    with trio.fail_after(30):
        async with open_frame_connection(daemon.ws_url, daemon.token) as conn:
            await conn.send(
                Run(request_id="r", session_id="cli-elide", input=f"run: {COMMAND}", allow_all=True)
            )
            while True:
                frame = await conn.receive()
                if isinstance(frame, EventFrame) and isinstance(frame.event, ev.ToolResult):
                    break
    assert frame.event.ok
    assert_one_right_marker(frame.event.output)


async def test_a_long_leg_result_counts_what_it_left_out(daemon: Daemon) -> None:
    """Issue 33 item 1: a background leg's result (runner cap, ``exit 0``, the leg
    manager's cap) holds one marker with the right count."""
    with trio.fail_after(30):
        async with open_frame_connection(daemon.ws_url, daemon.token) as conn:
            await conn.send(Subscribe(session_id="cli-elide-bg"))
            await conn.send(
                Run(
                    request_id="r",
                    session_id="cli-elide-bg",
                    input=f"bg: {COMMAND}",
                    allow_all=True,
                )
            )
            while True:
                frame = await conn.receive()
                if isinstance(frame, EventFrame) and isinstance(frame.event, ev.LegFinished):
                    break
    assert frame.event.status == "finished"
    assert_one_right_marker(frame.event.result)
