"""Which tool calls were in flight, and which a resumed run meets again (issue 34 item 5).

A call stopped midway (a pause, an abort, a closed window) stays *interrupted* in its
task's snapshot (`agentrio.engine.snapshot.InterruptedCall`), and the resumed model is
told to repeat it if it is still needed. Two such calls are not alike: one stopped
while it waited on a person (a confirmation open, R6) never ran; one stopped while it
ran may have partly run. A run's `CallLedger` tells them apart: every call goes through
`CallLedger.running` (`agentrio.engine.tools.base.run_tool`), and `asking` marks the
call of the current Trio task while it waits in `ToolContext.ask`. A stop keeps both
marks as they were (the snapshot reads them: ``InterruptedCall.ran``).

**Durably, before the effect.** A stop runs the exit path, which writes the snapshot;
a daemon killed (SIGKILL, a crash) writes nothing. So each tool with a side effect
calls `CallLedger.effect` right before it starts that effect (a command approved, a
file written, an MCP call sent, a secret stored): the call is marked as started (and
so is the call it runs under: an in-process sub-agent's marks its ``subagents``
call), and the run's ``journal`` (`agentrio.engine.runs`) first writes the task's row
with a snapshot listing its open calls as interrupted -- this one ``ran`` -- in one
store write. `CallLedger.settled` writes it again once the call ended and its result
is recorded. After a kill and a restart the task is resumable from that snapshot, and
its repeat of the call is met again like a stopped one's.

The resumed run's ledger holds the interrupted calls that may have partly run
(``interrupted``); `CallLedger.met_again` finds the one a new call repeats (same tool,
same arguments). The gate then lets it run unasked only because it is read-only (the
sandbox's judgment), never through a remembered rule, "Allow this turn" or
``allow_all``, and its confirmation says it may have partly run (`again_details`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TypeVar

import attrs

from agentrio.engine.messages import INTERRUPTED_CALL_NOTE
from agentrio.engine.models.base import ToolCallRequest
from agentrio.engine.snapshot import InterruptedCall
from agentrio.protocol.events import ToolDetails

__all__ = ["CallLedger", "Journal", "again_details", "asked_only", "asking"]

_T = TypeVar("_T")


@attrs.define(eq=False)
class _CallState:
    #: ``id`` of the call (the ledger's key for it).
    key: int
    #: The call an in-process sub-agent's call runs under (its ``subagents`` call).
    parent: _CallState | None = None
    #: The call waits on a person (inside `ToolContext.ask`).
    asking: bool = False
    #: Its side effect began (`CallLedger.effect`).
    started: bool = False


_CURRENT: ContextVar[_CallState | None] = ContextVar("agentrio_call_state", default=None)

#: Writes the run's row with its calls in flight (`agentrio.engine.runs`), durably.
Journal = Callable[[], Awaitable[None]]


@attrs.define(eq=False)
class CallLedger:
    """One run's calls in flight, and the calls of the stopped run it resumes that may
    have partly run (see the module docstring)."""

    interrupted: list[InterruptedCall] = attrs.field(factory=list)
    #: Set once the run's row exists (`agentrio.engine.runs.execute_task`); None: the
    #: calls are known in memory only (a run that is not stored).
    journal: Journal | None = None
    _open: dict[int, _CallState] = attrs.field(factory=dict)
    _met: dict[int, InterruptedCall] = attrs.field(factory=dict)
    _journaled: set[int] = attrs.field(factory=set)

    @contextmanager
    def running(self, call: ToolCallRequest) -> Iterator[None]:
        """Around one call: it is in flight until it returns; a stop leaves it so."""
        state = _CallState(key=id(call), parent=_CURRENT.get())
        self._open[id(call)] = state
        token = _CURRENT.set(state)
        stopped = False
        try:
            yield
        except Exception:
            raise
        except BaseException:  # a stop: `trio.Cancelled`, alone or in a nursery's group
            stopped = True
            raise
        finally:
            _CURRENT.reset(token)
            if not stopped:
                self._open.pop(id(call), None)

    def ran(self, call: ToolCallRequest) -> bool:
        """Whether ``call``, open when the run stopped, may have partly run: False when
        it never began (a later call of the same turn) or waited on a person before
        its effect started."""
        state = self._open.get(id(call))
        return state is not None and (state.started or not state.asking)

    async def effect(self) -> None:
        """The current call's side effect starts now (module docstring): marked started,
        with the calls it runs under, and journaled before this returns."""
        state = _CURRENT.get()
        if state is None:
            return
        self._journaled.add(state.key)
        marked: _CallState | None = state
        while marked is not None:
            marked.started = True
            marked = marked.parent
        if self.journal is not None:
            await self.journal()

    async def settled(self, call: ToolCallRequest) -> None:
        """``call`` ended and its result is recorded: journal the run again if its
        effect was journaled, so a kill now no longer reads it as in flight."""
        if id(call) in self._journaled:
            self._journaled.discard(id(call))
            if self.journal is not None:
                await self.journal()

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
    state = _CURRENT.get() or _CallState(key=0)
    state.asking = True
    try:
        answer = await ask
    except Exception:  # a failed ask; a stop (`trio.Cancelled`, grouped or not) keeps it
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
