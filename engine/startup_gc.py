"""The cyclic garbage collector held while the daemon starts.

Starting, the daemon imports some 280 attrs classes and thousands of functions, dicts
and tuples, and opens its store and engine: nothing of it is garbage, yet every burst of
allocations triggers a collection that walks all that was allocated so far, and a
collector re-enabled right after the import walks it all again as it ages. Held from the
command line's first line (``agentrio daemon``, ``python -m agentrio.engine``) until the
first engine runs, when `agentrio.engine.assembly.freeze_startup_heap` moves that heap
out of the collector's sight and lets it go, no collection runs at all while starting:
about a sixth of the daemon's start (docs/benchmarks.md, B7).

Only the command line holds it: a program that imports the engine as a library keeps
its collector as it was.
"""

from __future__ import annotations

import gc

__all__ = ["hold_collector", "release_collector"]

_held = False


def hold_collector() -> None:
    """Disable the collector until `release_collector` (a collector already disabled by
    someone else stays theirs: it is neither held nor later enabled)."""
    global _held
    if gc.isenabled():
        gc.disable()
        _held = True


def release_collector() -> None:
    """Enable the collector again if `hold_collector` disabled it; idempotent."""
    global _held
    if _held:
        _held = False
        gc.enable()
