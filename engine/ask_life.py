"""An ask's life, made visible (issue 34 item 1): the state the daemon knows of every
open ask, and one ``ask_state`` event per change.

The pending registry (`agentrio.engine.pending`) tells `AskLife` of each change as it
makes it (`AskLife.changed`): an entry waits for a listener, is claimed (shown) by
one, is answered, or is withdrawn (failed or dropped: nobody decided it). The
server tells it which front-end a listener belongs to (`AskLife.name`) and when a
front-end acknowledges an ask it has drawn (`AskLife.acknowledge`). `run_late` is
the loop that says so when a shown ask is not acknowledged within `ACK_WAIT_S`
(a frozen REPL, a page that never drew it): the ``late`` flag of the event, of
``GET /v1/session/{id}/asks`` and of ``agentrio status``.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

import attrs
import trio

from agentrio.engine.asks import TASK_CANCELED, TASK_PAUSED
from agentrio.protocol import events as ev
from agentrio.protocol.asks import ACK_WAIT_S, Answer, AskInfo, AskStateName, frontend_name

if TYPE_CHECKING:
    from agentrio.engine.pending import Entry, Listener

__all__ = ["AskLife", "answer_word", "session_emitter"]

#: The withdrawal reasons that mean the task stopped (R3).
_TASK_STOPPED: Final = frozenset({TASK_CANCELED, TASK_PAUSED})
#: What an answer through no listener (``POST …/confirm``) is said to come from.
HTTP_FRONTEND: Final = "http"

#: ``emit(session_id, task_hash, **fields)``: one ``ask_state`` event of a session.
Emit = Callable[..., Any]


def answer_word(kind: str, answer: Answer) -> str:
    """What an answer was, in one word for events and listings: ``stopped``,
    ``approved``, ``denied`` (a confirmation), ``declined`` or ``answered`` (a
    question); never the answers or the password themselves (R73)."""
    if answer.stop is not None:
        return "stopped"
    if kind == "tool_confirm":
        return "approved" if answer.approve else "denied"
    return "declined" if answer.approve is False else "answered"


@attrs.define(kw_only=True)
class _State:
    entry: Entry
    state: AskStateName = "waiting"
    frontend: str = ""
    #: The daemon the front-end is connected to, when not this one (a cluster, issue 21).
    daemon: str = ""
    acknowledged: bool = False
    late: bool = False
    since: float = 0.0
    shown_at: float = 0.0


class AskLife:
    """The open asks' states (see the module doc). ``emit`` publishes an event into a
    session; ``clock`` is wall time for ``since``."""

    def __init__(
        self, emit: Emit, clock: Callable[[], float], *, ack_wait_s: float = ACK_WAIT_S
    ) -> None:
        self._emit = emit
        self._clock = clock
        #: ``[server] ack_wait_s``: how long a shown ask may go unacknowledged.
        self._ack_wait_s = ack_wait_s
        self._states: dict[str, _State] = {}
        #: Listener -> its front-end and daemon ("" here); weak, so a closed listener
        #: leaves by itself.
        self._frontends: weakref.WeakKeyDictionary[Listener, tuple[str, str]] = (
            weakref.WeakKeyDictionary()
        )
        self._wakeup = trio.Event()

    def name(self, listener: Listener, client: str, *, daemon: str = "") -> None:
        """Asks ``listener`` takes are shown on the front-end ``client`` names (a
        ``hello``'s client), connected to ``daemon`` (a peer's listener's proxy)."""
        self._frontends[listener] = (frontend_name(client), daemon)

    def frontend_of(self, listener: Listener) -> str:
        """The front-end ``listener`` shows asks on, as `name` was told ("" unknown)."""
        return self._frontends.get(listener, ("", ""))[0]

    def changed(self, entry: Entry, change: str, *, by: Listener | None, reason: str) -> None:
        """The registry's report: ``change`` is ``waiting``, ``shown`` (claimed by
        ``by``), ``answered`` (through ``by``, None over HTTP), ``failed`` (its
        listener went away, R6/R79) or ``withdrawn`` (dropped with ``reason``). An
        entry answered, failed or withdrawn leaves."""
        state = self._states.setdefault(entry.id, _State(entry=entry))
        state.since = self._clock()
        if change == "waiting":
            state.state, state.acknowledged, state.late = "waiting", False, False
            state.frontend = state.daemon = ""
            self._event(state)
        elif change == "shown":
            state.state, state.acknowledged, state.late = "shown", False, False
            state.frontend, state.daemon = self._frontend(by) if by is not None else ("", "")
            state.shown_at = trio.current_time()
            self._wakeup.set()
            self._event(state)
        else:
            del self._states[entry.id]
            self._ended(state, change, by, reason)

    def acknowledge(self, entry: Entry, client: str, *, daemon: str = "") -> None:
        """The front-end ``client`` names drew ``entry`` (an ``ack`` frame or HTTP
        call, a bot's sent message), connected to ``daemon`` ("" this one): shown
        there, acknowledged. Idempotent; a second front-end's ack (a subscriber's page
        beside a bot) makes it the one named."""
        frontend = frontend_name(client)
        state = self._states.get(entry.id)
        if state is None or (
            state.acknowledged and (state.frontend, state.daemon) == (frontend, daemon)
        ):
            return
        state.state, state.acknowledged, state.late = "shown", True, False
        state.frontend, state.daemon = frontend, daemon
        state.since = self._clock()
        self._event(state)

    def open(self, session_id: str) -> list[AskInfo]:
        """The session's open asks with their state, oldest first."""
        return [
            AskInfo(
                id=entry_id,
                session_id=state.entry.request.session_id,
                task_hash=state.entry.request.task_hash,
                kind=state.entry.request.kind,
                tool_name=state.entry.request.tool_name,
                state=state.state,
                frontend=state.frontend,
                daemon=state.daemon,
                acknowledged=state.acknowledged,
                late=state.late,
                since=state.since,
            )
            for entry_id, state in self._states.items()
            if state.entry.request.session_id == session_id
        ]

    def counts(self) -> dict[str, int]:
        """How many asks are open, and how many of them are shown but not acknowledged
        and ``late`` (``/v1/health``'s ``statistics.asks``, ``agentrio status``): counts
        only, since the health route answers without the token."""
        states = list(self._states.values())
        return {
            "open": len(states),
            "waiting": sum(s.state == "waiting" for s in states),
            "acknowledged": sum(s.acknowledged for s in states),
            "late": sum(s.late for s in states),
        }

    async def run_late(self, *, task_status: trio.TaskStatus[None]) -> None:
        """Until cancelled: mark ``late`` each shown ask not acknowledged
        ``ack_wait_s`` (`ACK_WAIT_S` by default) after it was shown, with an event (the
        person sees that their front-end has not drawn it)."""
        task_status.started()
        while True:
            now = trio.current_time()
            waiting = [s for s in self._states.values() if s.state == "shown" and not s.late]
            wait_s = self._ack_wait_s
            due = [s for s in waiting if not s.acknowledged and now - s.shown_at >= wait_s]
            for state in due:
                state.late = True
                self._event(state)
            pending = [s.shown_at + wait_s for s in waiting if not s.acknowledged]
            pending = [deadline for deadline in pending if deadline > now]
            self._wakeup = trio.Event()
            with trio.move_on_at(min(pending, default=float("inf"))):
                await self._wakeup.wait()

    def _ended(self, state: _State, change: str, by: Listener | None, reason: str) -> None:
        entry = state.entry
        if change == "answered" and entry.reply is not None:
            frontend, daemon = self._frontend(by) if by is not None else (HTTP_FRONTEND, "")
            answer = answer_word(entry.request.kind, entry.reply)
            self._tell(entry, state="answered", frontend=frontend, daemon=daemon, answer=answer)
            return
        why = "task_stopped" if reason in _TASK_STOPPED else "superseded"
        if change == "failed":
            why = "listener_gone"
        self._tell(entry, state="withdrawn", why=why, reason=reason)

    def _event(self, state: _State) -> None:
        self._tell(
            state.entry,
            state=state.state,
            frontend=state.frontend,
            daemon=state.daemon,
            acknowledged=state.acknowledged,
            late=state.late,
        )

    def _tell(self, entry: Entry, **fields: Any) -> None:
        self._emit(entry.request.session_id, entry.request.task_hash, ask_id=entry.id, **fields)

    def _frontend(self, listener: Listener) -> tuple[str, str]:
        return self._frontends.get(listener, ("", ""))


def session_emitter(session_of: Callable[[str], Any]) -> Emit:
    """The `Emit` of an engine: ``session_of(session_id).hub.emit`` of ``ask_state``."""

    def emit(session_id: str, task_hash: str, **fields: Any) -> None:
        session_of(session_id).hub.emit(task_hash, ev.AskState, **fields)

    return emit
