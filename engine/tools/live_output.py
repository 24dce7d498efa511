"""A running command's output, shown while it runs (issue 33 item 6).

`run_watched` wraps a command's run: every chunk the command prints goes through
`LiveOutput`, which keeps only its newest lines, and a ticker in the same nursery
emits them as one ``tool_output`` event at most every `EVERY_S`, and only when
something new was printed since the last one. So a command that ends within
`EVERY_S` sends nothing (its result follows at once), a silent one sends nothing,
and a flood of output costs at most one small event per `EVERY_S` on the wire —
`TAIL_LINES` lines of at most `LINE_CHARS` characters, however much was printed.
The model never reads these events; the call's ``tool_result`` carries the output.
"""

from __future__ import annotations

import codecs
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Final, TypeVar

import trio

from agentrio.engine.nursery_tasks import cancel_scope
from agentrio.engine.tools.base import Emit
from agentrio.protocol import events as ev
from agentrio.protocol.causes import Cause

__all__ = ["EVERY_S", "LINE_CHARS", "TAIL_LINES", "LiveOutput", "run_watched"]

T = TypeVar("T")

#: Seconds between two ``tool_output`` events of one call, at most one per period.
EVERY_S: Final = 0.5
#: The newest lines each event carries.
TAIL_LINES: Final = 5
#: Characters of a line an event carries (the rest is cut, marked ``…``).
LINE_CHARS: Final = 200


class LiveOutput:
    """The newest lines of a byte stream and how many it has had, in bounded memory:
    `TAIL_LINES` complete lines and the unfinished one (cut to `LINE_CHARS`)."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._complete: deque[str] = deque(maxlen=TAIL_LINES)
        self._partial = ""
        self.total_lines = 0
        #: Something was added since the last `take`.
        self.fresh = False

    def add(self, chunk: bytes) -> None:
        text = self._decoder.decode(chunk)
        if not text:
            return
        self.fresh = True
        *complete, rest = (self._partial + text).split("\n")
        for line in complete[-TAIL_LINES:]:
            self._complete.append(_cut(line))
        self.total_lines += len(complete)
        self._partial = _cut(rest)

    def take(self) -> tuple[list[str], int]:
        """The lines to show now (the unfinished one last, when there is one) and the
        count of lines printed so far (the unfinished one included)."""
        self.fresh = False
        lines = list(self._complete)
        if self._partial:
            lines.append(self._partial)
        return lines[-TAIL_LINES:], self.total_lines + bool(self._partial)


def _cut(line: str) -> str:
    line = line.rstrip("\r")
    return line if len(line) <= LINE_CHARS else line[: LINE_CHARS - 1] + "…"


async def run_watched(
    emit: Emit,
    call_id: str,
    tool_name: str,
    run: Callable[[Callable[[bytes], Awaitable[None]]], Awaitable[T]],
) -> T:
    """``await run(on_output)`` while what it prints is emitted as throttled
    ``tool_output`` events (see the module docstring); its result, or its error as
    itself (not wrapped in the ticker's nursery's exception group)."""
    live = LiveOutput()

    async def on_output(chunk: bytes) -> None:
        live.add(chunk)

    async def ticker() -> None:
        while True:
            await trio.sleep(EVERY_S)
            if live.fresh:
                lines, total = live.take()
                emit(
                    ev.ToolOutput,
                    call_id=call_id,
                    tool_name=tool_name,
                    lines=lines,
                    total_lines=total,
                )

    failure: Exception | None = None
    async with trio.open_nursery() as nursery:
        nursery.start_soon(ticker)
        try:
            value = await run(on_output)
        except Exception as exc:
            failure = exc
        finally:
            cancel_scope(nursery.cancel_scope, Cause.SUPERSEDED)  # the ticker: done
    if failure is not None:
        raise failure
    return value
