"""Which tool calls were in flight, and which a resumed run meets again (issue 34 item 5).

A call stopped midway (a pause, an abort, a closed window) stays *interrupted* in its
task's snapshot (`agentrio.engine.snapshot.InterruptedCall`), and the resumed model is
told to repeat it if it is still needed. Two such calls are not alike: one stopped
while it waited on a person (a confirmation open, R6) never ran; one stopped while it
ran may have partly run. A run's `CallLedger` tells them apart: every call goes through
`CallLedger.running` (`agentrio.engine.tools.base.run_tool`), and `asking` marks the
call of the current Trio task while it waits in `ToolContext.ask`. A stop keeps both
marks as they were (the snapshot reads them: ``InterruptedCall.ran``).

The resumed run's ledger holds the interrupted calls that may have partly run
(``interrupted``); `CallLedger.met_again` finds the one a new call repeats (same tool,
same arguments). The gate then lets it run unasked only because it is read-only (the
sandbox's judgment), never through a remembered rule, "Allow this turn" or
``allow_all``, and its confirmation says it may have partly run (`again_details`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TypeVar

import attrs
import trio

from agentrio.engine.messages import INTERRUPTED_CALL_NOTE
from agentrio.engine.models.base import ToolCallRequest
from agentrio.engine.snapshot import InterruptedCall
from agentrio.protocol.events import ToolDetails

__all__ = ["CallLedger", "again_details", "asked_only", "asking"]

_T = TypeVar("_T")


@attrs.define(eq=False)
class _CallState:
    #: The call waits on a person (inside `ToolContext.ask`).
    asking: bool = False


_CURRENT: ContextVar[_CallState | None] = ContextVar("agentrio_call_state", default=None)


@attrs.define(eq=False)
class CallLedger:
    """One run's calls in flight, and the calls of the stopped run it resumes that may
    have partly run (see the module docstring)."""

    interrupted: list[InterruptedCall] = attrs.field(factory=list)
    _open: dict[int, _CallState] = attrs.field(factory=dict)
    _met: dict[int, InterruptedCall] = attrs.field(factory=dict)

    @contextmanager
    def running(self, call: ToolCallRequest) -> Iterator[None]:
        """Around one call: it is in flight until it returns; a stop leaves it so."""
        state = _CallState()
        self._open[id(call)] = state
        token = _CURRENT.set(state)
        stopped = False
        try:
            yield
        except trio.Cancelled:
            stopped = True
            raise
        finally:
            _CURRENT.reset(token)
            if not stopped:
                self._open.pop(id(call), None)

    def ran(self, call: ToolCallRequest) -> bool:
        """Whether ``call``, in flight when the run stopped, may have partly run: False
        only when it was waiting on a person."""
        state = self._open.get(id(call))
        return state is None or not state.asking

    def met_again(self, call: ToolCallRequest) -> InterruptedCall | None:
        """The interrupted call ``call`` repeats (same tool, same arguments), taken
        from ``interrupted`` once; the same answer for the same call object again."""
        met = self._met.get(id(call))
        if met is not None:
            return met
        for index, old in enumerate(self.interrupted):
            if old.tool_name == call.name and old.args == call.args:
                self._met[id(call)] = self.interrupted.pop(index)
                return self._met[id(call)]
        return None


async def asking(ask: Awaitable[_T]) -> _T:
    """Await ``ask`` with the current call marked as waiting on a person; a stop while
    it waits leaves the mark (the call never ran)."""
    state = _CURRENT.get() or _CallState()
    state.asking = True
    try:
        answer = await ask
    except trio.Cancelled:
        raise
    except BaseException:
        state.asking = False
        raise
    state.asking = False
    return answer


def asked_only() -> None:
    """Mark the current call as one that never ran: its task is stopped from the call's
    own ask (a confirmation's "Stop and discard" / "Stop, keep to resume")."""
    state = _CURRENT.get()
    if state is not None:
        state.asking = True


def again_details(details: ToolDetails | None = None) -> ToolDetails:
    """``details`` of a confirmation for a call met again, with the note every
    front-end shows (`agentrio.protocol.faithful.confirm_lines`)."""
    return attrs.evolve(details or ToolDetails(), interrupted=INTERRUPTED_CALL_NOTE)
