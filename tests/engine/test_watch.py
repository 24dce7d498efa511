"""The keyword watcher (R28) and its decision-model check (R29), on a mock clock.

No subprocess runs here: the watcher is fed byte strings, and `autojump_clock` makes the
settle, max-settle and interval times pass at once and exactly.
"""

from __future__ import annotations

import importlib.util
import itertools
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

import agentrio.engine.watch as watch_module
from agentrio.engine.config import BackgroundConfig
from agentrio.engine.models.base import (
    Message,
    ModelError,
    ModelReply,
    RetrySink,
    TextSink,
    ToolSpec,
)
from agentrio.engine.watch import (
    LOWERS_TO_ASCII,
    AsciiKeywords,
    DecisionCheck,
    Verdict,
    Watcher,
    WatchReport,
    latest_output,
)

KEYWORDS = BackgroundConfig().keywords


class Recorder:
    """Collects reports with the (mock) time each was emitted."""

    def __init__(self) -> None:
        self.reports: list[tuple[float, WatchReport]] = []

    async def __call__(self, report: WatchReport) -> None:
        self.reports.append((trio.current_time(), report))


@asynccontextmanager
async def watching(
    recorder: Recorder, *, check: DecisionCheck | None = None
) -> AsyncIterator[Watcher]:
    watcher = Watcher(KEYWORDS, recorder, check=check)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(watcher.run)
        yield watcher
        watcher.close()


class VerdictModel:
    """A decision model answering from a list, or raising; records what it was asked."""

    name = "verdicts"

    def __init__(self, answers: Sequence[str | Exception]) -> None:
        self._answers = list(answers)
        self.asked: list[str] = []

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        *,
        on_text: TextSink | None = None,
        on_retry: RetrySink | None = None,
    ) -> ModelReply:
        await trio.lowlevel.checkpoint()
        self.asked.append(messages[-1].content)
        answer = self._answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return ModelReply(text=answer)


async def test_report_after_two_quiet_seconds(autojump_clock: trio.testing.MockClock) -> None:
    """R28: a keyword line is reported once output has been quiet for 2 s."""
    recorder = Recorder()
    async with watching(recorder) as watcher:
        start = trio.current_time()
        watcher.feed(b"compiling\nError: disk on fire\n")
        await trio.sleep(1.5)
        watcher.feed(b"still going\n")  # output moves the settle point on
        await trio.sleep(1.9)
        assert recorder.reports == []
        await trio.sleep(0.2)
        assert len(recorder.reports) == 1
        at, report = recorder.reports[0]
        assert at - start == pytest.approx(3.5)
        assert report == WatchReport(
            output="compiling\nError: disk on fire\nstill going\n",
            hit_line="Error: disk on fire",
        )


async def test_chatter_forces_report_after_ten_seconds(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R28: output that never settles is reported 10 s after the hit."""
    recorder = Recorder()
    async with watching(recorder) as watcher:
        start = trio.current_time()
        watcher.feed(b"FATAL: lost the plot\n")
        await trio.sleep(0.5)  # ticks at 1.5 s, 2.5 s, ...: never at a deadline
        for i in range(25):
            await trio.sleep(1)
            watcher.feed(f"tick {i}\n".encode())
        assert [at - start for at, _ in recorder.reports] == [pytest.approx(10.0)]
        assert recorder.reports[0][1].output.endswith("tick 8\n")


async def test_at_most_one_report_per_thirty_seconds(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R28: a second hit soon after a report waits out the 30 s interval, then reports
    the latest output (both hits merged)."""
    recorder = Recorder()
    async with watching(recorder) as watcher:
        start = trio.current_time()
        watcher.feed(b"error one\n")
        await trio.sleep(5)
        watcher.feed(b"error two\n")
        await trio.sleep(5)
        watcher.feed(b"error three\n")
        await trio.sleep(60)
        times = [at - start for at, _ in recorder.reports]
        assert times == [pytest.approx(2.0), pytest.approx(32.0)]
        assert recorder.reports[1][1].output == "error one\nerror two\nerror three\n"
        assert recorder.reports[1][1].hit_line == "error two"
        assert watcher.hits == 3


async def test_keywords_match_case_insensitively_and_once_per_line(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R28: keywords match in any case; a line split over chunks counts once; lines
    without a keyword raise nothing."""
    recorder = Recorder()
    async with watching(recorder) as watcher:
        watcher.feed(b"all good\nnothing to see\n")
        await trio.sleep(40)
        assert recorder.reports == []
        watcher.feed(b"Segmentation ")
        watcher.feed(b"FAULT")
        assert watcher.hits == 1  # the unfinished line already matched
        watcher.feed(b" (core dumped)\n")
        assert watcher.hits == 1  # ...and is not counted again when it ends
        await trio.sleep(3)
        assert [r.hit_line for _, r in recorder.reports] == ["Segmentation FAULT"]


async def test_close_drops_a_pending_hit(autojump_clock: trio.testing.MockClock) -> None:
    """R28: when the command ends before a hit settles, no update is raised (the leg's
    final report carries the output)."""
    recorder = Recorder()
    watcher = Watcher(KEYWORDS, recorder)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(watcher.run)
        watcher.feed(b"panic: oops\n")
        await trio.sleep(1)
        watcher.close()
    assert recorder.reports == []


async def test_report_keeps_the_latest_eight_kib(autojump_clock: trio.testing.MockClock) -> None:
    """R28: a report carries at most 8 KiB: the newest output."""
    recorder = Recorder()
    async with watching(recorder) as watcher:
        watcher.feed(("é" * 10_000 + "\n").encode())
        watcher.feed(b"exception: boom\n")
        await trio.sleep(3)
    output = recorder.reports[0][1].output
    assert len(output.encode()) <= 8 * 1024
    assert output.endswith("é\nexception: boom\n")
    assert "\ufffd" not in output
    assert latest_output(b"abc", 2) == "bc"


async def test_without_decision_model_every_hit_is_reported(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R29: with no decision model, identical hits are reported each time."""
    recorder = Recorder()
    async with watching(recorder) as watcher:
        watcher.feed(b"error\n")
        await trio.sleep(31)
        watcher.feed(b"error\n")
        await trio.sleep(31)
    assert len(recorder.reports) == 2
    assert recorder.reports[0][1].output == "error\n"
    assert recorder.reports[1][1].output == "error\nerror\n"


async def test_decision_model_drops_benign_hits(autojump_clock: trio.testing.MockClock) -> None:
    """R29: a hit the decision model calls BENIGN is dropped; REPORT keeps the next."""
    model = VerdictModel(["BENIGN", "REPORT"])
    recorder = Recorder()
    async with watching(recorder, check=DecisionCheck(model)) as watcher:
        watcher.feed(b"0 errors, 0 warnings\n")
        await trio.sleep(3)
        assert recorder.reports == []
        assert watcher.dropped == 1
        watcher.feed(b"error: linker failed\n")
        await trio.sleep(3)
    assert [r.note for _, r in recorder.reports] == [""]
    assert recorder.reports[0][1].hit_line == "error: linker failed"
    assert "Matching line:\n0 errors, 0 warnings" in model.asked[0]
    assert "Last report:\n(none)" in model.asked[1]


async def test_decision_model_drops_repeats_of_the_last_report(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R29: an output identical to the last report is dropped without asking; one the
    model calls a REPEAT is dropped too."""
    model = VerdictModel(["REPORT", "REPEAT"])
    recorder = Recorder()
    watcher = Watcher(["error"], recorder, check=DecisionCheck(model), keep_bytes=6)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(watcher.run)
        watcher.feed(b"error\n")
        await trio.sleep(31)
        watcher.feed(b"error\n")  # same latest 6 bytes as the report: not even asked
        await trio.sleep(31)
        assert len(model.asked) == 1
        watcher.feed(b"ERROR\n")
        await trio.sleep(31)
        watcher.close()
    assert len(model.asked) == 2
    assert [r.output for _, r in recorder.reports] == ["error\n"]
    assert watcher.dropped == 2


async def test_failed_decision_check_reports_unchecked(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R29: when the check fails (model error, unreadable answer) the report goes out
    anyway, with the failure noted."""
    model = VerdictModel([ModelError("provider down"), "maybe?"])
    recorder = Recorder()
    async with watching(recorder, check=DecisionCheck(model)) as watcher:
        watcher.feed(b"traceback (most recent call last)\n")
        await trio.sleep(3)
        watcher.feed(b"permission denied\n")
        await trio.sleep(40)
    notes = [r.note for _, r in recorder.reports]
    assert notes == [
        "decision check failed (model error: provider down)",
        "decision check failed (unreadable answer 'maybe?')",
    ]


async def test_decision_check_times_out(autojump_clock: trio.testing.MockClock) -> None:
    """R29: a decision model that does not answer in time counts as a failed check."""

    class Silent:
        name = "silent"

        async def complete(
            self,
            messages: Sequence[Message],
            tools: Sequence[ToolSpec],
            *,
            on_text: TextSink | None = None,
            on_retry: RetrySink | None = None,
        ) -> ModelReply:
            await trio.sleep_forever()
            raise AssertionError("unreachable")

    verdict = await DecisionCheck(Silent(), timeout_s=5)("error", "error\n", None)
    assert verdict == Verdict(keep=True, note="decision check failed (no answer within 5 s)")


@pytest.mark.parametrize("first_hit", [10, 65_530, 65_540, 131_070, 299_990])
async def test_a_big_chunk_gives_the_hits_of_one_whole_chunk(
    monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.testing.MockClock, first_hit: int
) -> None:
    """R28: a chunk far larger than the watcher's slices (multi-byte characters,
    keywords on and near slice edges, an unfinished last line) gives exactly the hits,
    hit line and report of looking at it in one piece."""
    lines = [f"step {n} ✓ compiled module {n:05d}".encode() for n in range(10_000)]
    data = bytearray(b"\n".join(lines) + b"\n")
    data[first_hit : first_hit + 5] = b"ERROR"
    data += b"tail Panic at the end"
    chunk = bytes(data)

    async def observe() -> tuple[int, list[WatchReport]]:
        recorder = Recorder()
        async with watching(recorder) as watcher:
            watcher.feed(chunk)
            await trio.sleep(40)
        return watcher.hits, [report for _, report in recorder.reports]

    sliced = await observe()
    monkeypatch.setattr(watch_module, "_SLICE_BYTES", 10**9)
    whole = await observe()
    assert sliced == whole
    assert sliced[0] == 2
    assert len(sliced[1]) == 1
    assert "ERROR" in sliced[1][0].hit_line


async def test_a_line_longer_than_a_slice_counts_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R28: a keyword in a line longer than the watcher's slices is one hit, as when the
    line arrives over several reads; the report carries the latest 8 KiB."""
    line = b"x" * 100_000 + b" Fatal: out of cheese " + b"y" * 100_000 + b"\n"
    recorder = Recorder()
    async with watching(recorder) as watcher:
        watcher.feed(line + b"next line\n")
        await trio.sleep(40)
    assert watcher.hits == 1
    assert [report.output for _, report in recorder.reports] == [
        ("y" * 100_000 + "\nnext line\n")[-8192:]
    ]


class LineWatcher(Watcher):
    """Records the line of every hit (not only the first of a pending report); with
    ``decoded`` it looks at every piece through the decoded path."""

    def __init__(
        self, keywords: Sequence[str], *, keep_bytes: int, decoded: bool, fast: bool = True
    ) -> None:
        super().__init__(keywords, Recorder(), keep_bytes=keep_bytes)
        self._ascii = AsciiKeywords([k.lower() for k in keywords if k], fast=fast)
        self.lines: list[str] = []
        self._decoded = decoded

    def _look(self, piece: bytes, is_ascii: bool) -> None:
        if self._decoded:
            self._scan(piece)
        else:
            super()._look(piece, is_ascii)

    def _hit(self, line: str | bytes) -> None:
        self.lines.append(line.decode("ascii") if isinstance(line, bytes) else line)
        super()._hit(line)


_PIECES = [
    b"error",
    b"ERR",
    b"r!",
    b"Fail",
    b"fa",
    b"tal",
    b"\n",
    b" ",
    b"x" * 7,
    b"ok\n",
    "é".encode(),
    "TRACEBAC\u212a".encode(),
    b"\xe2\x84",
    b"\xaa",
    b"\xff",
    b"Panic\n",
]


@settings(max_examples=300, deadline=None)
@given(
    pieces=st.lists(st.sampled_from(_PIECES), max_size=60),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=8),
    keep_bytes=st.sampled_from([8, 24, 8192]),
    keywords=st.sampled_from([KEYWORDS, ["ERROR", "tal\nx", "\u212aill"], ["é", "fail"]]),
    fast=st.booleans(),
)
def test_the_ascii_search_gives_the_hits_of_the_decoded_lines(
    pieces: list[bytes], cuts: list[int], keep_bytes: int, keywords: list[str], fast: bool
) -> None:
    """R28: the undecoded search of ASCII output, and the byte search that lets other
    output skip the keyword scans, give exactly the hits, hit lines and unfinished line
    of lower-casing the decoded lines, however the stream is cut into chunks and
    whatever mix of ASCII, non-ASCII, split and invalid characters it has -- with
    Hyperscan and with the plain search (issue 30: the fast path is an extra)."""
    data = b"".join(pieces)
    bounds = sorted({min(cut, len(data)) for cut in cuts} | {0, len(data)})
    chunks = [data[a:b] for a, b in itertools.pairwise(bounds)]

    async def observe(decoded: bool) -> tuple[int, list[str], str, bool]:
        watcher = LineWatcher(keywords, keep_bytes=keep_bytes, decoded=decoded, fast=fast)
        for chunk in chunks:
            watcher.feed(chunk)
        return watcher.hits, watcher.lines, watcher._partial, watcher._partial_hit

    assert trio.run(observe, False) == trio.run(observe, True)


@pytest.mark.parametrize("fast", [True, False], ids=["hyperscan", "plain"])
def test_the_ascii_search_skips_keywords_no_ascii_line_can_hold(fast: bool) -> None:
    """R28: keywords that stay non-ASCII once lower-cased, or hold a newline, are not
    searched in ASCII text (no ASCII line can contain them); the others are, case-less,
    in one pass over pieces searched as one (a keyword across two pieces is found;
    overlapping ones each count)."""
    search = AsciiKeywords(["é", "a\nb", "\u212aill", "Fail"], fast=fast)
    assert search.fast is fast
    assert search.ends([b"KILL fai", b"L a\nb"]) == [4, 9]
    assert AsciiKeywords(["é"], fast=fast).ends([b"e E"]) == []
    assert AsciiKeywords(["aa", "a"], fast=fast).ends([b"a", b"AA"]) == [1, 2, 2, 3, 3]


@settings(max_examples=200, deadline=None)
@given(
    parts=st.lists(st.sampled_from([*_PIECES, b"", b"aa", b"AAA"]), max_size=12),
    keywords=st.sampled_from([KEYWORDS, ["aa", "a", "\u212aill"], ["é", "fail"]]),
)
def test_the_plain_search_answers_as_hyperscan_does(
    parts: list[bytes], keywords: list[str]
) -> None:
    """Issue 30: without the ``fast`` extra the plain search runs, and it finds exactly
    what Hyperscan finds -- every end offset, and whether a line may hold a keyword."""
    fast = AsciiKeywords(keywords, fast=True)
    plain = AsciiKeywords(keywords, fast=False)
    assert plain.ends(parts) == fast.ends(parts)
    assert plain.may_hit(parts) == fast.may_hit(parts)


def test_without_hyperscan_the_plain_search_is_chosen(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 30: where ``hyperscan`` cannot be imported (no ``fast`` extra, or a
    machine without its wheel) the watcher takes the plain path, and finds the same;
    where it can, Hyperscan is the default."""
    installed = importlib.util.find_spec("hyperscan") is not None
    assert AsciiKeywords(["Fail"]).fast is installed
    monkeypatch.setitem(sys.modules, "hyperscan", None)
    watch_module._hyperscan.cache_clear()
    try:
        search = AsciiKeywords(["Fail"])
        assert search.fast is False
        assert search.ends([b"x FAIL"]) == [6]
        with pytest.raises(RuntimeError, match=r"agentrio\[fast\]"):
            AsciiKeywords(["Fail"], fast=True)
    finally:
        watch_module._hyperscan.cache_clear()


def test_the_characters_that_lower_case_to_ascii_are_all_known() -> None:
    """R28: `LOWERS_TO_ASCII` is every non-ASCII character whose ``str.lower`` holds an
    ASCII character in this Python's Unicode tables (a newer table may add one), and no
    character lower-cases to nothing -- what lets a byte search rule out a keyword in
    non-ASCII text."""
    found = []
    for code in range(0x80, 0x110000):
        if 0xD800 <= code < 0xE000:
            continue
        lowered = chr(code).lower()
        assert lowered
        if any(c.isascii() for c in lowered):
            found.append(chr(code))
    assert tuple(found) == LOWERS_TO_ASCII


def test_non_ascii_text_is_ruled_out_only_without_a_keyword_or_such_a_character() -> None:
    """R28: in UTF-8 text, `AsciiKeywords.may_hit` is False only where no keyword nor a
    character of `LOWERS_TO_ASCII` is (a keyword across pieces counts); a keyword that
    stays non-ASCII may be anywhere."""
    search = AsciiKeywords(["Error", "\u212aill"])
    assert search.may_hit(["✓ built ".encode(), b"ok\n"]) is False
    assert search.may_hit(["✓ ERR".encode(), b"or\n"]) is True
    assert search.may_hit(["\u212a".encode()[:2], "\u212a".encode()[2:] + b"ILL"]) is True
    assert search.may_hit(["İ".encode()]) is True
    assert AsciiKeywords(["échec"]).may_hit([b"nothing"]) is True


async def test_a_line_full_of_keywords_is_one_hit(autojump_clock: trio.testing.MockClock) -> None:
    """R28: a line holding a keyword 200,000 times, over three chunks, is one hit, and
    the next line with one is another (each line is looked at once, not per keyword)."""
    recorder = Recorder()
    async with watching(recorder) as watcher:
        watcher.feed(b"error " * 100_000)
        watcher.feed(b"ERROR " * 100_000)
        watcher.feed(b"done\nfail\n")
        await trio.sleep(40)
    assert watcher.hits == 2
    assert [report.hit_line[:12] for _, report in recorder.reports] == ["error error "]
