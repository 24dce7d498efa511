"""The ``read_file`` tool: a file's text, unasked, within exactly the sandbox's reach.

``read_file {path, start_line?, end_line?}`` returns the file's text (lines
``start_line`` to ``end_line``, 1-based and inclusive, when given), nothing added. The
path is judged by its real path (`agentrio.engine.tools.file_reach`, whose docstring
says what is reached): a hidden place, ``/proc``, ``/dev`` and the sandbox's private
directories are refused, and the refusal never asks anyone. With no sandbox (bubblewrap
missing), nothing is read unasked, so the tool is not offered at all (commands ask).

**Large files.** The text returned is at most ``[tools] max_result_bytes`` bytes,
marker included: past that, its head (three quarters) and tail (a quarter) are kept,
joined by the project's elision marker ``...[N bytes elided]...`` where ``N`` is the
exact number of the file's bytes left out -- counted on the file, so a marker written
in the file itself cannot change the count, and the result is never clamped again.
The file is mapped, not read whole, so a large file costs only the bytes kept (and,
for a line range, one scan for line breaks up to it). Text that is not UTF-8 is
refused: the model would only see replacement characters.
"""

from __future__ import annotations

import mmap
import os
from typing import Any, Final

import trio

from agentrio.engine.models.base import ToolCallRequest, ToolSpec
from agentrio.engine.processes.hidden import Hidden
from agentrio.engine.tools.base import Reach, ServiceTool, ToolContext, ToolOutcome, string_arg
from agentrio.engine.tools.file_reach import (
    FileRefused,
    open_regular,
    read_refusal,
    resolve_target,
)
from agentrio.engine.tools.workdir import WorkdirError, real_workdir

__all__ = ["ReadFileTool", "clamp_bytes", "read_text"]

#: Room kept for the elision marker (its count has at most 20 digits).
_MARKER_ROOM: Final = len("\n...[ bytes elided]...\n") + 20


def _marker(elided: int) -> str:
    return f"\n...[{elided} bytes elided]...\n"


def _continuation(data: Any, index: int) -> bool:
    return bool(data[index] & 0xC0 == 0x80)


def _decode(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise FileRefused("the file is not UTF-8 text") from None


def clamp_bytes(data: Any, start: int, end: int, limit: int) -> str:
    """``data[start:end]`` (bytes or a map) as text of at most ``limit`` UTF-8 bytes,
    the elision marker included (see the module docstring); cuts never split a
    character."""
    size = end - start
    if size <= limit:
        return _decode(bytes(data[start:end]))
    budget = max(0, limit - _MARKER_ROOM)
    head_end = start + budget * 3 // 4
    while head_end > start and _continuation(data, head_end):
        head_end -= 1
    tail_start = end - budget // 4
    while tail_start < end and _continuation(data, tail_start):
        tail_start += 1
    head = _decode(bytes(data[start:head_end]))
    tail = _decode(bytes(data[tail_start:end]))
    return f"{head}{_marker(tail_start - head_end)}{tail}"


def _line_span(data: Any, size: int, first: int, last: int | None) -> tuple[int, int] | None:
    """Byte offsets of lines ``first``..``last`` (1-based, inclusive; ``last`` None:
    to the end), or None when the file has fewer than ``first`` lines."""
    start = 0
    for _ in range(first - 1):
        found = data.find(b"\n", start)
        if found < 0:
            return None
        start = found + 1
    if start >= size and first > 1:
        return None
    if last is None:
        return start, size
    end = start
    for _ in range(last - first + 1):
        found = data.find(b"\n", end)
        if found < 0:
            return start, size
        end = found + 1
    return start, end


def read_text(real: str, first: int, last: int | None, limit: int) -> str | None:
    """The text of lines ``first``..``last`` of the regular file at ``real`` (whole:
    ``first`` 1, ``last`` None), clamped to ``limit`` bytes; None when it has fewer
    than ``first`` lines. Blocking; raises `FileRefused` or `OSError`."""
    fd = open_regular(real)
    try:
        size = os.fstat(fd).st_size
        if size == 0:
            return "" if first == 1 else None
        with mmap.mmap(fd, size, prot=mmap.PROT_READ) as data:
            span = _line_span(data, size, first, last)
            if span is None:
                return None
            return clamp_bytes(data, span[0], span[1], limit)
    finally:
        os.close(fd)


def _line_arg(call: ToolCallRequest, name: str) -> int | None:
    value = call.args.get(name)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"argument {name!r} must be a line number (1 or more)")
    return value


class ReadFileTool(ServiceTool):
    name = "read_file"
    reach = Reach(unasked=True, in_subagents=True, in_legs=True)  # never asks

    def spec(self) -> ToolSpec:
        return ToolSpec(
            name=self.name,
            description=(
                "Read a text file (optionally lines start_line to end_line, 1-based, "
                "inclusive). Relative paths are taken from the working directory. Large "
                "files come back with their middle elided: read a line range for it."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "start_line": {"type": "integer", "minimum": 1},
                    "end_line": {"type": "integer", "minimum": 1},
                },
                "required": ["path"],
            },
        )

    def available(self, ctx: ToolContext) -> bool:
        """Offered only where unasked reads are: with the sandbox working."""
        return self._services.sandbox.status.active

    async def execute(self, ctx: ToolContext, call: ToolCallRequest) -> ToolOutcome:
        path = string_arg(call, "path")
        first, last = _line_arg(call, "start_line") or 1, _line_arg(call, "end_line")
        if last is not None and last < first:
            raise ValueError("argument 'end_line' must not be before 'start_line'")
        try:
            base = await real_workdir(None, ctx.workdir.path)
        except WorkdirError as exc:
            return ToolOutcome(ok=False, output=f"not read: {exc}")
        hidden = await self._services.sandbox.places.current()
        limit = self._services.config.tools.max_result_bytes
        read = await trio.to_thread.run_sync(
            _read, path, base, hidden, first, last, limit, abandon_on_cancel=True
        )
        return read


def _read(
    path: str, base: str, hidden: Hidden, first: int, last: int | None, limit: int
) -> ToolOutcome:
    """`ReadFileTool.execute`'s file-system work, in a worker thread: judge, then
    read (a refusal is the call's ``skipped`` reason: nothing was read)."""
    target = resolve_target(path, base)
    refusal = read_refusal(target, hidden)
    if refusal:
        return ToolOutcome(ok=False, output="", skipped=refusal)
    try:
        text = read_text(target.real, first, last, limit)
    except FileRefused as exc:
        return ToolOutcome(ok=False, output="", skipped=f"{target.real}: {exc}")
    except OSError as exc:
        return ToolOutcome(ok=False, output=f"cannot read {target.real}: {exc.strerror or exc}")
    if text is None:
        return ToolOutcome(ok=False, output=f"{target.real} has fewer than {first} lines")
    return ToolOutcome(output=text)
