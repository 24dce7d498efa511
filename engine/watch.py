"""The keyword watcher of a command leg (R28) and the decision-model check (R29).

A `Watcher` is fed the leg's output chunks as they arrive (`Watcher.feed`, synchronous,
from `agentrio.engine.processes.runner.run_in_group`'s ``on_output``) and runs one loop
(`Watcher.run`) that decides when a *hit* becomes a report. It starts no process and
reads no clock but Trio's, so it is tested with a mock clock and plain byte strings.

Semantics, with the defaults of ``[background]`` in config:

- A **hit** is a line containing a keyword, compared case-insensitively (both lower-cased
  with `str.lower`, on the output decoded as UTF-8). A line is checked once: as soon as
  it (or its unfinished part) contains a keyword; a line that ends later is not counted
  a second time. Hits while a report is pending join it.
- A pending hit becomes a report once output **settles**: ``settle_s`` (2 s) without new
  output, but at most ``max_settle_s`` (10 s) after the hit, so a command that never
  goes quiet is still reported.
- At most one report per ``report_interval_s`` (30 s): a hit that settles sooner after
  the previous *emitted* report waits until the interval has passed, and then reports
  the latest output, which includes everything that came in meanwhile. Nothing is lost,
  only merged.
- A report carries the **latest output**: the last ``keep_bytes`` (8 KiB) bytes of the
  stream, cut at a character boundary.
- With a `DecisionCheck` (R29), each hit is checked first: an output identical to the
  last emitted report is dropped without asking; otherwise the model answers ``REPORT``
  or ``BENIGN`` (``REPEAT`` for a repeat in other words). Benign hits and repeats are
  dropped. When the check fails — model error, timeout, an answer that is none of those
  words — the report goes out unchecked, with the failure noted. Without a check every
  hit is reported.
- `Watcher.close` (the command ended) ends `run`; a hit still pending then is dropped:
  the leg's final report carries the output anyway.

How a chunk is looked at: plain ASCII output (the bulk of what commands print) is never
decoded. One case-less multi-keyword search (`AsciiKeywords`) runs over the
unfinished line and the new bytes together (Hyperscan with the ``fast`` extra, else a
plain `bytes.find` per keyword), and only the lines around its hits are cut
out and decoded; for ASCII text that gives exactly the hits of lower-casing each line.
Anything else -- a non-ASCII byte, a character split across chunks -- goes through the
decoded path, slice by slice, where ``str.lower`` decides (some non-ASCII characters
lower-case to ASCII letters, e.g. the Kelvin sign to ``k``); the same byte search first
tells whether any line of the slice can hold a keyword at all, and when none can (the
usual case) only the unfinished line is kept track of (`AsciiKeywords.may_hit`).
"""

from __future__ import annotations

import codecs
import functools
import math
import re
from collections.abc import Awaitable, Callable, Sequence
from types import ModuleType
from typing import Final, Protocol

import attrs
import trio

from agentrio.engine.models.base import Message, Model, ModelError

__all__ = [
    "CHECK_TIMEOUT_S",
    "LOWERS_TO_ASCII",
    "REPORT_KEEP_BYTES",
    "AsciiKeywords",
    "Checker",
    "DecisionCheck",
    "Verdict",
    "WatchReport",
    "Watcher",
    "ascii_keywords",
    "latest_output",
]

#: Most bytes of output one watch report carries (R28).
REPORT_KEEP_BYTES: Final = 8 * 1024
#: How long the decision model may take over one hit before the check counts as failed.
CHECK_TIMEOUT_S: Final = 30.0
#: `Watcher.feed` looks at a large chunk in slices of about this size.
_SLICE_BYTES: Final = 64 * 1024

_VERDICT_RE: Final = re.compile(r"\b(REPORT|BENIGN|REPEAT)\b")


@attrs.frozen(kw_only=True)
class WatchReport:
    """One report the watcher raised: the latest output, the line that triggered it,
    and ``note`` (non-empty when the decision check failed and it went out unchecked)."""

    output: str
    hit_line: str
    note: str = ""


@attrs.frozen(kw_only=True)
class Verdict:
    """A decision check's answer: ``keep`` the report or drop it; ``note`` says why a
    check failed (then ``keep`` is True: an unchecked report beats a lost one)."""

    keep: bool
    note: str = ""


class Checker(Protocol):
    async def __call__(self, hit_line: str, output: str, last_report: str | None) -> Verdict: ...


class DecisionCheck:
    """Asks a model whether a watcher hit is worth a report (R29).

    The model gets one system and one user message and must answer with one of the
    words ``REPORT``, ``BENIGN`` or ``REPEAT``. Anything else, a `ModelError`, or no
    answer within ``timeout_s`` is a failed check: `Verdict` keep with the failure noted.
    """

    def __init__(self, model: Model, *, timeout_s: float = CHECK_TIMEOUT_S) -> None:
        self._model = model
        self._timeout_s = timeout_s

    async def __call__(self, hit_line: str, output: str, last_report: str | None) -> Verdict:
        messages = [
            Message(
                role="system",
                content=(
                    "You watch the output of a command running in the background. A line "
                    "matched an error keyword. Answer with exactly one word: REPORT if the "
                    "output shows a real problem the user should hear about now, BENIGN if "
                    "the match is harmless (for example '0 errors'), REPEAT if it says "
                    "nothing new compared with the last report."
                ),
            ),
            Message(
                role="user",
                content=(
                    f"Matching line:\n{hit_line}\n\nLatest output:\n{output}\n\n"
                    f"Last report:\n{last_report if last_report is not None else '(none)'}"
                ),
            ),
        ]
        reply = None
        try:
            with trio.move_on_after(self._timeout_s):
                reply = await self._model.complete(messages, [])
        except ModelError as exc:
            return Verdict(keep=True, note=f"decision check failed (model error: {exc})")
        if reply is None:
            return Verdict(
                keep=True, note=f"decision check failed (no answer within {self._timeout_s:g} s)"
            )
        match = _VERDICT_RE.search(reply.text.upper())
        if match is None:
            return Verdict(
                keep=True, note=f"decision check failed (unreadable answer {reply.text[:80]!r})"
            )
        return Verdict(keep=match.group(1) == "REPORT")


#: The non-ASCII characters that `str.lower` turns into text holding ASCII letters
#: (U+0130 to "i" and a combining dot, the Kelvin sign to "k"); the test of
#: `AsciiKeywords` checks this against every code point of the running Python.
LOWERS_TO_ASCII: Final = ("\u0130", "\u212a")


class AsciiKeywords:
    """One case-less pass for every keyword over raw output bytes.

    Only the keywords that can be in a line of ASCII text are searched: those that are
    ASCII once lower-cased and hold no newline. For ASCII text, a case-less match of
    such a keyword is exactly the lower-cased text containing it, and no other keyword
    can be in it (`ends`). In other UTF-8 text the ASCII characters of the lower-cased
    text are the ASCII bytes, in the same order and neighbours, unless it holds one of
    `LOWERS_TO_ASCII`: so where neither a keyword nor one of those is found, no line of
    it holds an ASCII keyword (`may_hit`). Built once per keyword list
    (`ascii_keywords`).

    Two searches give the same answers: Hyperscan (vectored, case-less literals; the
    ``fast`` extra) where it is installed, else the plain one, `bytes.lower` and
    `bytes.find` per keyword over the parts joined (docs/benchmarks.md, B5, has both).
    ``fast`` chooses: None takes Hyperscan when it can be imported.
    """

    def __init__(self, keywords: Sequence[str], *, fast: bool | None = None) -> None:
        lowered = {k.lower() for k in keywords if k and "\n" not in k}
        patterns = sorted(k.encode() for k in lowered if k.isascii())
        #: A keyword that stays non-ASCII may be anywhere in non-ASCII text.
        self._all_ascii = all(k.isascii() for k in lowered)
        use_fast = _hyperscan() is not None if fast is None else fast
        self._search: _Search = _FastSearch(patterns) if use_fast else _PlainSearch(patterns)

    @property
    def fast(self) -> bool:
        """Whether Hyperscan searches (else the plain search)."""
        return isinstance(self._search, _FastSearch)

    def ends(self, parts: Sequence[bytes]) -> list[int]:
        """The end offsets of every keyword found in ``parts`` joined (not copied
        together), in increasing order."""
        parts = [part for part in parts if part]
        return sorted(self._search.ends(parts)) if parts else []

    def may_hit(self, parts: Sequence[bytes]) -> bool:
        """Whether a line of ``parts`` joined -- UTF-8, decoded with replacement and
        lower-cased -- may hold a keyword; False only when none can."""
        if not self._all_ascii:
            return True
        parts = [part for part in parts if part]
        return bool(parts) and self._search.any(parts)


class _Search(Protocol):
    def ends(self, parts: list[bytes]) -> list[int]:
        """The end offset of every keyword occurrence in ``parts`` joined, any order."""

    def any(self, parts: list[bytes]) -> bool:
        """Whether ``parts`` joined hold a keyword or one of `LOWERS_TO_ASCII`."""


@functools.cache
def _hyperscan() -> ModuleType | None:
    """The ``hyperscan`` module, or None when the ``fast`` extra is not installed."""
    try:
        import hyperscan
    except ImportError:
        return None
    return hyperscan


class _FastSearch:
    """Hyperscan, vectored: the parts are scanned as one stream without being copied
    together. A scan holds the database's own lock, and runs only in the Trio thread."""

    def __init__(self, patterns: list[bytes]) -> None:
        hs = _hyperscan()
        if hs is None:
            raise RuntimeError("the fast path needs hyperscan: pip install 'agentrio[fast]'")
        self._hs = hs
        self._keyword_ids = len(patterns)
        expressions = patterns + [c.encode() for c in LOWERS_TO_ASCII]
        self._database = hs.Database(mode=hs.HS_MODE_VECTORED)
        self._database.compile(
            expressions=expressions,
            ids=list(range(len(expressions))),
            elements=len(expressions),
            flags=[hs.HS_FLAG_CASELESS] * len(patterns) + [0] * len(LOWERS_TO_ASCII),
            literal=True,
        )

    def ends(self, parts: list[bytes]) -> list[int]:
        found: list[int] = []

        def on_match(pattern: int, start: int, end: int, flags: int, context: object) -> None:
            if pattern < self._keyword_ids:
                found.append(end)

        self._database.scan(parts, match_event_handler=on_match)
        return found

    def any(self, parts: list[bytes]) -> bool:
        def on_match(pattern: int, start: int, end: int, flags: int, context: object) -> bool:
            return True  # one is enough: stop

        try:
            self._database.scan(parts, match_event_handler=on_match)
        except self._hs.ScanTerminated:
            return True
        return False


class _PlainSearch:
    """The parts joined and lower-cased (`bytes.lower` changes ASCII letters only, so
    it is exactly Hyperscan's case-less match of ASCII literals), then `bytes.find`
    for each keyword, overlapping occurrences included."""

    def __init__(self, patterns: list[bytes]) -> None:
        self._patterns = patterns
        self._lowers = [c.encode() for c in LOWERS_TO_ASCII]

    def ends(self, parts: list[bytes]) -> list[int]:
        text = b"".join(parts).lower()
        found: list[int] = []
        for pattern in self._patterns:
            at = text.find(pattern)
            while at >= 0:
                found.append(at + len(pattern))
                at = text.find(pattern, at + 1)
        return found

    def any(self, parts: list[bytes]) -> bool:
        joined = b"".join(parts)
        if any(c in joined for c in self._lowers):
            return True
        text = joined.lower()
        return any(pattern in text for pattern in self._patterns)


@functools.lru_cache(maxsize=16)
def ascii_keywords(keywords: tuple[str, ...]) -> AsciiKeywords:
    """The `AsciiKeywords` of a keyword list, compiled once (about a millisecond)."""
    return AsciiKeywords(keywords)


def latest_output(data: bytes | bytearray, keep_bytes: int = REPORT_KEEP_BYTES) -> str:
    """The last ``keep_bytes`` of ``data`` as text, starting at a character boundary
    (invalid bytes replaced)."""
    tail = bytes(data[-keep_bytes:]) if keep_bytes else b""
    start = 0
    while start < len(tail) and start < 4 and tail[start] & 0xC0 == 0x80:
        start += 1
    return tail[start:].decode("utf-8", errors="replace")


def _ascii_tail(data: bytes, keep_bytes: int) -> str:
    """``data`` decoded, or only its last ``keep_bytes`` when that is all an unfinished
    line keeps of it."""
    return (data[-keep_bytes:] if 0 < keep_bytes < len(data) else data).decode("ascii")


class Watcher:
    """Turns a stream of output chunks into watch reports; see the module docstring.

    ``emit`` is awaited with each report that survives the check, from inside `run`.
    """

    def __init__(
        self,
        keywords: Sequence[str],
        emit: Callable[[WatchReport], Awaitable[None]],
        *,
        settle_s: float = 2.0,
        max_settle_s: float = 10.0,
        report_interval_s: float = 30.0,
        keep_bytes: int = REPORT_KEEP_BYTES,
        check: Checker | None = None,
    ) -> None:
        self._keywords = [k.lower() for k in keywords if k]
        self._ascii = ascii_keywords(tuple(self._keywords))
        self._emit = emit
        self._settle_s = settle_s
        self._max_settle_s = max_settle_s
        self._interval_s = report_interval_s
        self._keep_bytes = keep_bytes
        self._check = check
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._buffer = bytearray()
        self._partial = ""
        self._partial_hit = False
        self._wakeup = trio.Event()
        self._closed = False
        self._last_output_at = -math.inf
        self._hit_at: float | None = None
        self._hit_line = ""
        self._last_report_at = -math.inf
        self._last_report: str | None = None
        #: Counters for tests and statistics.
        self.hits = 0
        self.reports = 0
        self.dropped = 0

    # ------------------------------------------------------------------ input

    def feed(self, chunk: bytes) -> None:
        """Take one chunk of output; never blocks, never raises for odd bytes.

        An ASCII chunk is searched whole, undecoded (`_scan_ascii`). Another large chunk
        is looked at in slices of about `_SLICE_BYTES` that end just after a newline
        (or, in a longer line, at the slice size), which gives the same hits as the
        whole chunk at once while keeping every temporary string small: large
        allocations cost page faults, and small ones stay in the CPU's cache."""
        if self._closed or not chunk:
            return
        self._last_output_at = trio.current_time()
        if len(chunk) >= self._keep_bytes:
            self._buffer[:] = chunk[-self._keep_bytes :]
        else:
            self._buffer += chunk
            if len(self._buffer) > 2 * self._keep_bytes:
                del self._buffer[: len(self._buffer) - self._keep_bytes]
        is_ascii = chunk.isascii()
        if is_ascii or len(chunk) <= _SLICE_BYTES:
            self._look(chunk, is_ascii)
        else:
            start = 0
            while start < len(chunk):
                end = start + _SLICE_BYTES
                if end < len(chunk):
                    newline = chunk.rfind(b"\n", start, end)
                    if newline >= 0:
                        end = newline + 1
                piece = chunk[start:end]
                self._look(piece, piece.isascii())
                start = end
        self._wakeup.set()

    def _look(self, piece: bytes, is_ascii: bool) -> None:
        """`_scan_ascii` where it gives the same hits as `_scan`: ASCII bytes (``is_ascii``
        says) after an ASCII unfinished line, no character left half-decoded. Else
        `_scan`, told whether the byte search found anything a line could hit on."""
        pending = self._decoder.getstate()[0]
        if is_ascii and self._partial.isascii() and not pending:
            self._scan_ascii(piece)
        else:
            # The bytes of the text this piece ends: the unfinished line, a character
            # begun in the last piece, the piece.
            parts = (self._partial.encode(), pending, piece)
            self._scan(piece, may_hit=self._ascii.may_hit(parts))

    def _scan_ascii(self, data: bytes) -> None:
        """`_scan` for ASCII: one keyword search over the unfinished line and ``data``;
        only the lines holding a hit are cut out, each counted once."""
        partial = self._partial.encode("ascii")
        offset = len(partial)  # where ``data`` starts in the searched stream
        # Where the last line counted ends, in ``data``: later hits before it are in
        # that line (each line is looked at once, however many keywords it holds).
        counted_end = -1
        if self._partial_hit:
            counted_end = data.find(b"\n")
            counted_end = len(data) if counted_end < 0 else counted_end
        for end in self._ascii.ends((partial, data)):
            last = end - 1 - offset  # the keyword's last byte, in ``data`` (< 0: in partial)
            if last < counted_end:
                continue
            newline = data.rfind(b"\n", 0, last) if last > 0 else -1
            counted_end = data.find(b"\n", max(last, 0))
            counted_end = len(data) if counted_end < 0 else counted_end
            if newline < 0:
                self._hit(partial + data[:counted_end])
            else:
                self._hit(data[newline + 1 : counted_end])
        newline = data.rfind(b"\n")
        if newline < 0:
            self._partial += _ascii_tail(data, self._keep_bytes)
        else:
            self._partial = _ascii_tail(data[newline + 1 :], self._keep_bytes)
        self._partial_hit = counted_end == len(data)
        if len(self._partial) > self._keep_bytes:
            self._partial = self._partial[-self._keep_bytes :]

    def _scan(self, chunk: bytes, *, may_hit: bool = True) -> None:
        """Look for hits in the next piece of the stream (decoded); only keep track of
        its unfinished line where ``may_hit`` says no line of it can hold a keyword."""
        text = self._partial + self._decoder.decode(chunk)
        complete, newline, self._partial = text.rpartition("\n")
        if newline:
            if may_hit and self._matches(complete):
                for line in complete.split("\n"):
                    if self._partial_hit:
                        self._partial_hit = False  # counted while it was partial
                    elif self._matches(line):
                        self._hit(line)
            self._partial_hit = False
        if may_hit and self._partial and not self._partial_hit and self._matches(self._partial):
            self._partial_hit = True
            self._hit(self._partial)
        if len(self._partial) > self._keep_bytes:
            self._partial = self._partial[-self._keep_bytes :]

    def close(self) -> None:
        """The stream ended: `run` returns; a pending hit is dropped."""
        self._closed = True
        self._wakeup.set()

    def _matches(self, text: str) -> bool:
        """Whether ``text`` (a line, or a whole block of lines) holds a keyword.

        Called first on a whole chunk's complete lines: most chunks of a chatty
        command hold no keyword and are never split into lines (one ``lower`` and a
        few substring scans, all at C speed)."""
        lowered = text.lower()
        return any(keyword in lowered for keyword in self._keywords)

    def _hit(self, line: str | bytes) -> None:
        """Count a hit; the first one of a pending report names its line (``bytes``:
        ASCII, decoded only then)."""
        self.hits += 1
        if self._hit_at is None:
            self._hit_at = trio.current_time()
            self._hit_line = (line.decode("ascii") if isinstance(line, bytes) else line).strip()

    # ------------------------------------------------------------------ loop

    def _due(self) -> float:
        assert self._hit_at is not None
        settled = min(self._last_output_at + self._settle_s, self._hit_at + self._max_settle_s)
        return max(settled, self._last_report_at + self._interval_s)

    async def run(self) -> None:
        """Raise reports until `close`; cancel it to stop at once."""
        while not self._closed:
            if self._hit_at is None:
                await self._wait_input()
                continue
            with trio.move_on_at(self._due()):
                await self._wait_input()
                continue
            await self._fire()

    async def _wait_input(self) -> None:
        self._wakeup = trio.Event()
        await self._wakeup.wait()

    async def _fire(self) -> None:
        hit_line, self._hit_at = self._hit_line, None
        output = latest_output(self._buffer, self._keep_bytes)
        note = ""
        if self._check is not None:
            if output == self._last_report:
                self.dropped += 1
                return
            verdict = await self._check(hit_line, output, self._last_report)
            if not verdict.keep:
                self.dropped += 1
                return
            note = verdict.note
        if self._closed:
            return
        self._last_report_at = trio.current_time()
        self._last_report = output
        self.reports += 1
        await self._emit(WatchReport(output=output, hit_line=hit_line, note=note))
