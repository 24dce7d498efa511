"""Deadlines of asks that wait for a new listener after theirs went away (R79).

The pending registry (`agentrio.engine.pending`) decides *which* asks wait and what ends a wait
(a new listener that accepts the ask); this module only keeps the clock: one deadline
and one reason per waiting ask id, and `Graces.wait_due`, the sleep of the loop that
ends them (`agentrio.engine.pending.PendingRegistry.run_graces`). It holds ask ids, not
entries, so it knows nothing of listeners.
"""

from __future__ import annotations

import math

import attrs
import trio

__all__ = ["Grace", "Graces"]


@attrs.frozen
class Grace:
    """One waiting ask: the Trio time it fails at, and the reason it then fails with
    (the reason of the close that started the wait)."""

    until: float
    reason: str


class Graces:
    """The waiting asks of one registry. ``grace_s`` 0 turns waiting off."""

    def __init__(self, grace_s: float) -> None:
        self.grace_s = grace_s
        self._waiting: dict[str, Grace] = {}
        self._changed = trio.Event()

    @property
    def enabled(self) -> bool:
        return self.grace_s > 0

    def __contains__(self, ask_id: str) -> bool:
        return ask_id in self._waiting

    def __len__(self) -> int:
        return len(self._waiting)

    def get(self, ask_id: str) -> Grace | None:
        return self._waiting.get(ask_id)

    def start(self, ask_id: str, reason: str) -> None:
        """Start the wait of ``ask_id`` now; one already waiting keeps its deadline."""
        if ask_id not in self._waiting:
            self._waiting[ask_id] = Grace(trio.current_time() + self.grace_s, reason)
            self._changed.set()

    def end(self, ask_id: str) -> None:
        """``ask_id`` waits no more (a listener took it, or it left the registry)."""
        self._waiting.pop(ask_id, None)

    def due(self, now: float) -> dict[str, Grace]:
        """The waits over by ``now``, removed from here."""
        over = {ask_id: g for ask_id, g in self._waiting.items() if g.until <= now}
        for ask_id in over:
            del self._waiting[ask_id]
        return over

    async def wait_due(self) -> None:
        """Sleep until the nearest deadline, or until a new wait starts (whose
        deadline may be nearer); the caller then looks at `due`."""
        self._changed = trio.Event()
        nearest = min((g.until for g in self._waiting.values()), default=math.inf)
        with trio.move_on_at(nearest):
            await self._changed.wait()
