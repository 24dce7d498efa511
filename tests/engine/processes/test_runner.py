"""engine/processes/runner.py, groups.py and output.py: commands in their own process group (R48).

These tests run real processes, so they use the real clock (a mock clock would jump
over the very waits being measured). Each keeps its real waits short. "Running" below
means: the pid exists and is not a zombie. An orphaned member killed here is reparented
to PID 1, and some container init processes never reap it, so its pid can linger as a
zombie that runs nothing; where PID 1 reaps, `os.kill(pid, 0)` raises ProcessLookupError.
"""

from __future__ import annotations

import fcntl
import os
import re
import signal
import sys
import time
import tracemalloc
from pathlib import Path

import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from agentrio.engine.nursery_tasks import cancel_scope
from agentrio.engine.processes import runner
from agentrio.engine.processes.groups import group_alive
from agentrio.engine.processes.output import ClampedOutput
from agentrio.engine.processes.runner import DRAIN_IDLE_S, CommandResult, run_in_group
from agentrio.engine.snapshot import clamp
from agentrio.protocol.causes import Cause


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return False
    state = raw[raw.rfind(b")") + 2 :].split()[0]
    return state not in (b"Z", b"X")


class PidWatcher:
    """Collects output and parses the first line as whitespace-separated pids."""

    def __init__(self) -> None:
        self.seen = bytearray()
        self.chunks: list[bytes] = []
        self.pids: list[int] = []
        self.ready = trio.Event()

    async def __call__(self, chunk: bytes) -> None:
        self.chunks.append(chunk)
        self.seen += chunk
        if not self.ready.is_set() and b"\n" in self.seen:
            line = bytes(self.seen).split(b"\n", 1)[0]
            self.pids = [int(word) for word in line.split()]
            self.ready.set()


async def test_echo_output_and_exit_code() -> None:
    """R48: a shell string's merged stdout and stderr, and its exit code."""
    result = await run_in_group("echo out; echo err >&2; exit 3")
    assert result.exit_code == 3
    assert result.signal is None
    assert result.output == "out\nerr\n"
    assert result.output_bytes == 8
    assert result.timed_out is False
    assert 0 <= result.duration_s < 5


async def test_zero_exit() -> None:
    """R48: a successful argv command reports exit code 0."""
    result = await run_in_group(["echo", "hello"])
    assert (result.exit_code, result.output) == (0, "hello\n")


async def test_argv_is_not_parsed_by_a_shell() -> None:
    """R48: a list runs as argv, so shell syntax in it is literal text."""
    result = await run_in_group(["echo", "a;b", "$HOME", "*"])
    assert result.output == "a;b $HOME *\n"


async def test_string_runs_through_sh() -> None:
    """R48: a string runs through /bin/sh -c, operators and all."""
    result = await run_in_group("echo a; echo b | tr b c")
    assert result.output == "a\nc\n"


async def test_cwd_env_and_stdin(tmp_path: Path) -> None:
    """R48: cwd, a replaced environment and stdin bytes reach the command."""
    (tmp_path / "marker.txt").write_text("x")
    assert (await run_in_group(["ls"], cwd=str(tmp_path))).output == "marker.txt\n"
    env = {"PATH": os.environ["PATH"], "AGENTRIO_TEST": "value"}
    result = await run_in_group("echo $AGENTRIO_TEST; echo ${HOME:-unset}", env=env)
    assert result.output == "value\nunset\n"
    assert (await run_in_group(["cat"], stdin=b"abc\n")).output == "abc\n"


async def test_without_stdin_the_child_reads_nothing() -> None:
    """R48: without stdin bytes the child's stdin is /dev/null, not the daemon's."""
    result = await run_in_group(["cat"])
    assert (result.exit_code, result.output) == (0, "")


async def test_missing_program_raises() -> None:
    """R48: a program that cannot be started raises FileNotFoundError."""
    with pytest.raises(FileNotFoundError):
        await run_in_group(["/nonexistent/agentrio-no-such-program"])


async def test_on_output_receives_every_chunk_in_order() -> None:
    """R48: on_output sees all the output in order even when the kept output is clamped."""
    chunks: list[bytes] = []

    async def collect(chunk: bytes) -> None:
        chunks.append(chunk)

    result = await run_in_group(["seq", "1", "100000"], on_output=collect, keep_bytes=1024)
    expected = "".join(f"{n}\n" for n in range(1, 100001))
    assert b"".join(chunks).decode() == expected
    assert result.output_bytes == len(expected)
    assert result.output == clamp(expected, 1024)


async def test_big_output_is_clamped_in_bounded_memory() -> None:
    """R48: 20 MB of output is kept as head and tail, counted exactly, in bounded memory."""
    size = 20_000_000
    tracemalloc.start()
    try:
        result = await run_in_group("yes | head -c 20000000", keep_bytes=4096)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.exit_code == 0
    assert result.output_bytes == size
    head, tail = "y\n" * 1536, "y\n" * 512
    assert result.output == f"{head}\n...[{size - 4096} bytes elided]...\n{tail}"
    assert peak < 2_000_000


async def test_cancel_leaves_no_process_of_the_group() -> None:
    """R48: a cancelled `sh -c 'sleep 1000 & sleep 1000'` leaves no process of its group
    running within 3 s of the cancel, and the cancel propagates."""
    watcher = PidWatcher()
    finished: list[CommandResult] = []

    async def run() -> None:
        finished.append(
            await run_in_group("sleep 1000 & echo $! $$; sleep 1000", on_output=watcher)
        )

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run)
        with trio.fail_after(5):
            await watcher.ready.wait()
        background, leader = watcher.pids
        assert os.getpgid(background) == leader
        assert group_alive(leader)
        cancelled_at = time.monotonic()
        cancel_scope(nursery.cancel_scope, Cause.USER_CANCELED)
    assert time.monotonic() - cancelled_at < 3
    assert finished == []
    assert [_running(pid) for pid in (background, leader)] == [False, False]
    assert group_alive(leader) is False


async def test_sigterm_ignored_means_sigkill_after_grace() -> None:
    """R48: a group that ignores SIGTERM is SIGKILLed once kill_grace_s has passed."""
    watcher = PidWatcher()

    async def run() -> None:
        await run_in_group(
            "trap '' TERM; sleep 1000 & echo $! $$; wait", kill_grace_s=0.5, on_output=watcher
        )

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run)
        with trio.fail_after(5):
            await watcher.ready.wait()
        cancelled_at = time.monotonic()
        cancel_scope(nursery.cancel_scope, Cause.USER_CANCELED)
    elapsed = time.monotonic() - cancelled_at
    assert 0.5 <= elapsed < 2.5
    assert [_running(pid) for pid in watcher.pids] == [False, False]
    assert group_alive(watcher.pids[1]) is False


async def test_timeout_kills_the_group_and_reports_it() -> None:
    """R48: timeout_s returns timed_out=True, the leader's signal, and a dead group."""
    watcher = PidWatcher()
    result = await run_in_group(
        "sleep 1000 & echo $! $$; sleep 1000", timeout_s=0.5, on_output=watcher
    )
    background, leader = watcher.pids
    assert result.timed_out is True
    assert (result.exit_code, result.signal) == (None, signal.SIGTERM)
    assert result.output == f"{background} {leader}\n"
    assert 0.5 <= result.duration_s < 2.5
    assert [_running(pid) for pid in (background, leader)] == [False, False]
    assert group_alive(leader) is False


async def test_background_child_of_a_finished_command_is_not_waited_for() -> None:
    """R48: `sleep 1000 & echo hi` returns promptly with its output and no survivors."""
    started = time.monotonic()
    result = await run_in_group('sleep 1000 & echo "hi $! $$"')
    elapsed = time.monotonic() - started
    match = re.fullmatch(r"hi (\d+) (\d+)\n", result.output)
    assert match is not None
    background, leader = int(match[1]), int(match[2])
    assert (result.exit_code, result.timed_out) == (0, False)
    # Not waited for: far below the child's 1000 s (a loaded machine took over 1.5 s
    # once; the drain's own wait is the lower bound).
    assert DRAIN_IDLE_S <= elapsed < 10
    assert [_running(pid) for pid in (background, leader)] == [False, False]
    assert group_alive(leader) is False


async def test_on_output_error_propagates_and_ends_the_group() -> None:
    """R48: an on_output error comes out as itself, after the group is gone."""
    watcher = PidWatcher()

    async def fail_after_pids(chunk: bytes) -> None:
        await watcher(chunk)
        raise ValueError("sink broke")

    with pytest.raises(ValueError, match="sink broke"):
        await run_in_group("sleep 1000 & echo $! $$; sleep 1000", on_output=fail_after_pids)
    assert [_running(pid) for pid in watcher.pids] == [False, False]
    assert group_alive(watcher.pids[1]) is False


async def test_cancel_comes_out_as_plain_cancelled() -> None:
    """R48: the caller sees trio.Cancelled itself, not the internal nursery's group."""
    seen: list[type[BaseException]] = []
    with trio.move_on_after(0.2):
        try:
            await run_in_group("sleep 1000")
        except BaseException as exc:
            seen.append(type(exc))
            raise
    assert seen == [trio.Cancelled]


def test_group_alive_for_a_missing_group() -> None:
    """R48: a group with no members is not alive."""
    assert group_alive(2**22 + 12345) is False


@settings(max_examples=300, deadline=None)
@given(
    chunks=st.lists(st.binary(max_size=40), max_size=12),
    utf8=st.lists(st.text(max_size=20), max_size=6),
    limit=st.integers(min_value=0, max_value=64),
)
def test_clamped_output_matches_snapshot_clamp(
    chunks: list[bytes], utf8: list[str], limit: int
) -> None:
    """R48: the kept output is exactly `clamp` of the whole decoded output, including
    characters split across chunks and invalid bytes."""
    pieces = [text.encode() for text in utf8] + chunks
    data = b"".join(pieces)
    # Also split the stream at every third byte, cutting multi-byte characters.
    for split in (pieces, [data[i : i + 3] for i in range(0, len(data), 3)]):
        kept = ClampedOutput(limit)
        for piece in split:
            kept.add(piece)
        assert kept.total_bytes == len(data)
        assert kept.text() == clamp(data.decode("utf-8", errors="replace"), limit)


async def test_a_busy_pipe_grows_and_reads_grow_with_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """R48: output that outpaces its reader comes in reads larger than a default 64 KiB
    pipe could ever hold (the pipe grew; Linux), every byte in order.

    The kernel may refuse to grow a pipe (a user over ``pipe-user-pages-soft``, as a
    whole test suite's daemons in parallel workers can be): the test asks the pipe its
    size right after the runner grew it, and checks the read sizes only when it did. Over
    that limit new pipes hold a page or two, and the runner still knows them full."""
    chunks: list[bytes] = []
    grown: list[bool] = []
    grown_at: list[int] = []
    grow = runner._grow_pipe

    def grow_and_look(fd: int) -> None:
        grow(fd)
        size = fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ)  # type: ignore[attr-defined]
        grown.append(size > 64 * 1024)

    monkeypatch.setattr(runner, "_grow_pipe", grow_and_look)

    async def slow_at_first(chunk: bytes) -> None:
        chunks.append(chunk)
        # The reader lags until the output has outpaced it (a read came back full, which
        # is what grows the pipe), then twice more so the grown pipe fills: a fixed count
        # of waits was not always enough on a loaded machine (a whole suite's daemons on
        # two cores), where `yes | head` had not filled 64 KiB by then.
        if grown and not grown_at:
            grown_at.append(len(chunks))
        if len(chunks) <= 20 and (not grown_at or len(chunks) <= grown_at[0] + 2):
            await trio.sleep(0.5)

    size = 8_000_000
    result = await run_in_group(f"yes 0123456789 | head -c {size}", on_output=slow_at_first)
    data = b"".join(chunks)
    assert (result.exit_code, result.output_bytes, len(data)) == (0, size, size)
    assert data == (b"0123456789\n" * (size // 11 + 1))[:size]
    if sys.platform == "linux":
        assert grown, "a busy pipe was never grown"
        if grown[0]:
            assert max(len(chunk) for chunk in chunks) > 64 * 1024


class _Pipe(trio.abc.ReceiveStream):
    """Hands out the given chunks, recording the (mock) time of each read."""

    def __init__(self, chunks: list[bytes]) -> None:
        self._chunks = chunks
        self.read_at: list[float] = []

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        await trio.lowlevel.checkpoint()
        self.read_at.append(trio.current_time())
        return self._chunks.pop(0) if self._chunks else b""

    async def aclose(self) -> None:
        await trio.lowlevel.checkpoint()


async def test_reads_of_a_busy_pipe_are_paced_and_quiet_ones_are_not(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Issue 22 (B5): after a read that found a busy pipe (4 KiB or more, less than
    asked) the next read waits a millisecond, so a fast command's output comes in
    fewer, larger chunks; a quiet command's short lines are read at once, and every
    byte is handed on in order."""
    chunks = [b"a" * 8192, b"b" * 8192, b"line\n", b"line\n", b"c" * 4096]
    pipe = _Pipe(list(chunks))
    seen: list[bytes] = []

    async def on_output(chunk: bytes) -> None:
        seen.append(chunk)

    reader = runner._Reader(pipe, ClampedOutput(1024), on_output)
    start = trio.current_time()
    await reader.run()
    gaps = [round((at - start) * 1000, 6) for at in pipe.read_at]
    assert gaps == [0.0, 1.0, 2.0, 2.0, 2.0, 3.0]
    assert seen == chunks
