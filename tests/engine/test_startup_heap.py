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


_DAEMON_START = """
import gc, json, sys, tempfile
from agentrio.engine.startup_gc import hold_collector

hold_collector()  # as ``python -m agentrio.engine`` does on its first line
import trio
from agentrio.engine import Config, open_engine

async def main(home):
    seen = [gc.isenabled()]
    async with open_engine(Config(home=home)):
        seen.append(gc.isenabled())
        seen.append(gc.get_freeze_count() > 1000)
    return seen

with tempfile.TemporaryDirectory() as home:
    print(json.dumps(trio.run(main, home)))
"""

_LIBRARY_IMPORT = """
import gc, json
from agentrio.engine import Config, open_engine
print(json.dumps([gc.isenabled(), gc.get_freeze_count(), Config.__name__]))
"""


def _last_json(code: str) -> object:
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(done.stdout.splitlines()[-1])


def test_the_daemon_start_holds_the_collector_until_its_heap_is_frozen() -> None:
    """Bench B7: held from the command line's first line, the collector runs no
    collection while the daemon starts; once the first engine runs its heap is frozen
    and the collector works again (never left off for the daemon's life)."""
    assert _last_json(_DAEMON_START) == [False, True, True]


def test_a_library_import_of_the_engine_leaves_the_collector_alone() -> None:
    """Bench B7: importing the engine's face (its names load on first use) neither
    disables the collector nor freezes anything in the importing program."""
    assert _last_json(_LIBRARY_IMPORT) == [True, 0, "Config"]
