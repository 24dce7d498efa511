"""`CappedLog`: a leg's log never passes ``[background] max_log_bytes`` (R81); it keeps
its head, a rolling tail, and one marker counting what was elided between them."""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path

import pytest
import trio

from agentrio.engine.background.logs import CappedLog, LogWriter, elision_marker, open_log


def _stream(total: int, chunk: int) -> list[bytes]:
    """``total`` bytes of numbered lines, cut into ``chunk``-sized pieces."""
    text = b"".join(b"line %08d\n" % n for n in range(total // 14 + 1))[:total]
    return [text[i : i + chunk] for i in range(0, len(text), chunk)]


@pytest.mark.parametrize("chunk", [7, 1000, 65536])
def test_log_keeps_head_marker_and_latest_tail(tmp_path: Path, chunk: int) -> None:
    path = tmp_path / "leg.log"
    max_bytes = 64 * 1024
    pieces = _stream(1_000_000, chunk)
    output = b"".join(pieces)
    with open_log(path) as file:
        log = CappedLog(file, max_bytes)
        for start in range(0, len(pieces), 5):
            log.append(pieces[start : start + 5])
            assert path.stat().st_size <= max_bytes
    data = path.read_bytes()
    head = max_bytes // 2
    assert data[:head] == output[:head]
    marker = re.search(rb"\n\[agentrio: (\d{20}) bytes of output elided here\]\n", data)
    assert marker is not None
    assert marker.start() == head
    elided = int(marker.group(1))
    tail = data[marker.end() :]
    assert tail
    assert output.endswith(tail)
    assert head + elided + len(tail) == len(output)


def test_small_log_is_untouched(tmp_path: Path) -> None:
    path = tmp_path / "leg.log"
    with open_log(path) as file:
        CappedLog(file, 64 * 1024).append([b"hello\n", b"world\n"])
    assert path.read_bytes() == b"hello\nworld\n"
    assert len(elision_marker(10**6)) == len(elision_marker(0))


async def test_writer_caps_a_flood(tmp_path: Path) -> None:
    """Like ``cat /dev/zero``: 8 MiB through the writer, a 256 KiB cap holds."""
    path = tmp_path / "leg.log"
    with open_log(path) as file:
        writer = LogWriter(file, limit=1 << 20, max_bytes=256 * 1024)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(writer.run)
            for _ in range(128):
                await writer.append(b"\0" * 65536)
            while writer.queued_bytes:
                await trio.sleep(0.01)
            await trio.sleep(0.1)
            nursery.cancel_scope.cancel()
    assert 0 < path.stat().st_size <= 256 * 1024
    assert b"bytes of output elided here" in path.read_bytes()


def test_a_file_system_without_kernel_copy_gives_the_same_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R81: where copy_file_range is refused (another file system, an older kernel),
    the kept tail is read and written back: the same log, byte for byte."""
    pieces = _stream(400_000, 4096)

    def capped(path: Path) -> bytes:
        with open_log(path) as file:
            log = CappedLog(file, 64 * 1024)
            for start in range(0, len(pieces), 3):
                log.append(pieces[start : start + 3])
        return path.read_bytes()

    kernel = capped(tmp_path / "kernel.log")

    def refuse(*args: object) -> int:
        raise OSError(errno.EXDEV, "no copy across these")

    monkeypatch.setattr(os, "copy_file_range", refuse)
    assert capped(tmp_path / "user.log") == kernel
    assert b"bytes of output elided here" in kernel
