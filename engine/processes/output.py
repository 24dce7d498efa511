"""A command's output kept the way `agentrio.engine.snapshot.clamp` keeps text, in bounded memory.

`agentrio.engine.processes.runner.run_in_group` feeds every chunk a command prints into a
`ClampedOutput`, so a command printing 200 MB runs in about ``2 * keep_bytes`` of memory
while its result still reads like a clamped snapshot value (R11, R24).
"""

from __future__ import annotations

import codecs

__all__ = ["ClampedOutput"]


class ClampedOutput:
    """A byte stream's text, kept as `agentrio.engine.snapshot.clamp` would keep it, in
    bounded memory.

    ``text()`` equals ``clamp(everything.decode("utf-8", errors="replace"), keep_bytes)``
    -- the first 3/4 and last 1/4 of ``keep_bytes`` (cut at character boundaries) around
    an ``...[N bytes elided]...`` marker that `agentrio.engine.snapshot.has_elided` recognises --
    but never holds more than about ``2 * keep_bytes`` bytes: chunks are decoded
    incrementally (a character split across chunks decodes whole), re-encoded, and only
    their head and a trimmed tail are kept, while ``decoded_bytes`` counts the rest.
    ``total_bytes`` counts the raw bytes received. (Unlike `clamp`, it never reads a
    marker the command printed itself as one of its own: the stream's middle is gone.)
    """

    def __init__(self, keep_bytes: int) -> None:
        if keep_bytes < 0:
            raise ValueError(f"keep_bytes must be 0 or more, got {keep_bytes}")
        self._limit = keep_bytes
        # clamp looks at the byte just past the head to find a character boundary.
        self._head_cap = keep_bytes * 3 // 4 + 1
        self._tail_cap = keep_bytes // 4
        self._head = bytearray()
        self._tail = bytearray()
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._finished = False
        self.total_bytes = 0
        self.decoded_bytes = 0

    def add(self, chunk: bytes) -> None:
        if self._finished:
            raise RuntimeError("ClampedOutput.add after text()")
        self.total_bytes += len(chunk)
        if chunk.isascii() and not self._decoder.getstate()[0]:
            # No character is split across chunks here, and ASCII decodes to itself.
            self._keep(chunk)
        else:
            self._keep(self._decoder.decode(chunk).encode("utf-8"))

    def _keep(self, data: bytes) -> None:
        self.decoded_bytes += len(data)
        room = self._head_cap - len(self._head)
        if room > 0:
            self._head += data[:room]
            data = data[room:]
        if not data:
            return
        if len(data) >= self._tail_cap:
            # The new data alone fills the tail: copy only the part kept.
            self._tail[:] = data[len(data) - self._tail_cap :]
            return
        self._tail += data
        if len(self._tail) > 2 * self._tail_cap:
            del self._tail[: len(self._tail) - self._tail_cap]

    def text(self) -> str:
        """The clamped text; ends the stream (an unfinished character becomes U+FFFD)."""
        if not self._finished:
            self._finished = True
            self._keep(self._decoder.decode(b"", final=True).encode("utf-8"))
        size = self.decoded_bytes
        tail_offset = size - len(self._tail)
        if size <= self._limit:
            # Everything fits, so nothing was trimmed: head and tail are contiguous.
            return (self._head + self._tail).decode("utf-8")
        head_end = self._limit * 3 // 4
        while head_end > 0 and _is_continuation(self._head[head_end]):
            head_end -= 1
        tail_start = size - self._tail_cap
        while tail_start < size and _is_continuation(self._byte_at(tail_start, tail_offset)):
            tail_start += 1
        if tail_start >= tail_offset:
            tail = bytes(self._tail[tail_start - tail_offset :])
        else:
            # The tail was never trimmed, so head and tail are contiguous.
            tail = bytes((self._head + self._tail)[tail_start:])
        head = self._head[:head_end].decode("utf-8")
        return f"{head}\n...[{tail_start - head_end} bytes elided]...\n{tail.decode('utf-8')}"

    def _byte_at(self, index: int, tail_offset: int) -> int:
        if index >= tail_offset:
            return self._tail[index - tail_offset]
        return self._head[index]


def _is_continuation(byte: int) -> bool:
    return byte & 0xC0 == 0x80
