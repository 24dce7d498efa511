"""engine/background.py `LogWriter`: a leg's log, batched and bounded (R23).

The file is a stand-in whose writes block (in their worker thread) until the test lets
them through: a disk slower than the command.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

import trio
import trio.testing

from agentrio.engine.background import LogWriter


class SlowDisk:
    """Records every write; each ``writelines`` waits until ``release`` lets one pass."""

    def __init__(self) -> None:
        self.batches: list[list[bytes]] = []
        self.flushed = 0
        self._gate = threading.Semaphore(0)

    def release(self) -> None:
        self._gate.release()

    def writelines(self, lines: Iterable[bytes], /) -> None:
        assert self._gate.acquire(timeout=10)
        self.batches.append(list(lines))

    def flush(self) -> None:
        self.flushed += 1

    def fileno(self) -> int:
        raise AssertionError("a log below its cap is only appended to")


async def until(condition: Callable[[], bool]) -> None:
    """Wait (bounded) for a worker thread's write to show."""
    with trio.fail_after(5):
        while not condition():
            await trio.sleep(0.001)


async def test_append_waits_while_the_disk_is_behind() -> None:
    """R23: every chunk reaches the file in order and flushed, batched while a write is
    in progress; past the limit, append waits instead of holding more output."""
    disk = SlowDisk()
    log = LogWriter(disk, limit=10)
    appended: list[bytes] = []

    async def produce() -> None:
        for n in range(8):
            chunk = f"chunk{n}\n".encode()
            await log.append(chunk)
            appended.append(chunk)

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(log.run)
            nursery.start_soon(produce)
            await trio.testing.wait_all_tasks_blocked()
            # The first write took chunk0 and chunk1 and is stuck; chunk2 and chunk3
            # queued behind it (14 bytes >= 10), so chunk4 waits.
            assert appended == [f"chunk{n}\n".encode() for n in range(4)]
            assert log.queued_bytes == 14
            disk.release()
            await until(lambda: len(appended) == 6)
            await trio.testing.wait_all_tasks_blocked()
            assert len(appended) == 6
            assert log.queued_bytes == 14
            for _ in range(3):
                disk.release()
            await until(lambda: len(disk.batches) == 4)
            assert len(appended) == 8
            assert log.queued_bytes == 0
            nursery.cancel_scope.cancel()
    finally:
        for _ in range(8):  # never leave a worker thread stuck on a failed assertion
            disk.release()
    assert [len(batch) for batch in disk.batches] == [2, 2, 2, 2]
    assert b"".join(b"".join(batch) for batch in disk.batches) == b"".join(appended)
    assert disk.flushed == 4
