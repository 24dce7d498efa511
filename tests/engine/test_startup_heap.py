"""Issue 22 (performance round two, bench B2's p99): the first engine a process opens
moves the startup heap out of the garbage collector's full collections, once.

Run in a fresh interpreter: the test process may have opened engines already."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_OPEN_TWICE = """
import gc, json, sys, tempfile
import trio
from agentrio.engine import Config, open_engine

async def main(home):
    counts = [gc.get_freeze_count()]
    async with open_engine(Config(home=home + "/a")):
        counts.append(gc.get_freeze_count())
    made_since = [[] for _ in range(1000)]
    async with open_engine(Config(home=home + "/b")):
        counts.append(gc.get_freeze_count())
    del made_since
    return counts

with tempfile.TemporaryDirectory() as home:
    print(json.dumps(trio.run(main, home)))
"""


def test_first_engine_freezes_the_startup_heap_once() -> None:
    """Issue 22: nothing is frozen before the first engine; once it runs, the heap of
    that moment is frozen; a second engine in the same process freezes nothing more
    (what was made after the first stays collectable). Frozen objects freed by
    reference counting leave the count, so it may only shrink."""
    done = subprocess.run(
        [sys.executable, "-c", _OPEN_TWICE],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    before, first, second = json.loads(done.stdout.splitlines()[-1])
    assert before == 0
    assert first > 1000
    assert second <= first
