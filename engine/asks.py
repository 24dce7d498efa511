"""What a task asks a person and what comes back: the values of the pending registry
(`agentrio.engine.pending`), and the routing rules they carry (R5, R78, R79).

Kept apart from the registry so that its state machine stays one readable module;
`agentrio.engine.pending` re-exports every name here.

Two rules are properties of a request, not of any front-end, so that no listener can
opt out of them:

* **Windowed asks (R5, R78).** A ``cli-`` ask carrying a window hash belongs to the
  REPL window that started its task. Only a listener that *owns* that window hash
  (`agentrio.engine.pending.Listener.own_window`) may take, count for, or answer it; a prefix
  listener (``listen("cli-")``, ``listen("")``), a session subscriber and an HTTP
  caller never can, whatever their prefix or match says.
* **Shared asks (R99).** An ask of a task started with ``share_asks`` (``agentrio
  exec``) is no windowed one: any listener of its session may take it (a ``listen``
  prefix, a subscriber, a REPL window open on the session), and its own window takes
  it only when none of them can -- or when the one that had it went away.
* **Grace (R79).** A ``chat-``/``tg-``/``dc-`` ask whose listener goes away waits a
  grace for another matching listener (a reloaded web page) before it fails closed.
  ``cli-`` asks fail at once (R6, R43: the window's runs are cancelled anyway), as do
  asks of sessions without an origin.
"""

from __future__ import annotations

from typing import Final

import attrs

from agentrio.engine.ids import origin_of
from agentrio.protocol.asks import Answer, Asked, AskKind

__all__ = [
    "ANSWERED_ELSEWHERE",
    "CLIENT_DISCONNECTED",
    "GRACE_ORIGINS",
    "TASK_CANCELED",
    "TASK_PAUSED",
    "AskKind",
    "AskReply",
    "AskRequest",
    "RegistryStatistics",
    "Verified",
    "Withdrawn",
]

#: The reason a claimer is given when the producer of its entry was cancelled (R3).
TASK_CANCELED: Final = "task canceled"
#: The same when the task was paused (kept to resume), not cancelled (issue 33).
TASK_PAUSED: Final = "task paused"
#: The default reason of `Listener.close` (R6).
CLIENT_DISCONNECTED: Final = "client disconnected"
#: The reason a claimer is given when someone else answered its entry.
ANSWERED_ELSEWHERE: Final = "answered elsewhere"
#: Origins whose asks outlive their listener by the grace (R79).
GRACE_ORIGINS: Final = ("chat-", "tg-", "dc-")


@attrs.frozen(kw_only=True)
class AskRequest(Asked):
    """What a task asks (`Asked`), and the REPL window it belongs to:
    ``window_hash`` names the window that started the task (R5). Never on the wire (a
    frame carries no window hash, R78)."""

    window_hash: str = ""
    #: Its window takes it only when no other listener can (R99): the window of an
    #: ``agentrio exec``, whose policy answers what nobody else is there to.
    shared: bool = False

    @property
    def origin(self) -> str:
        """The session's origin prefix (``cli-``, ``chat-``, …) or ``""``."""
        return origin_of(self.session_id)

    @property
    def windowed(self) -> bool:
        """A ``cli-`` ask of a task a REPL window started: only the listener owning
        ``window_hash`` may take or answer it (R78). A shared one is not (R99)."""
        return bool(self.window_hash) and self.origin == "cli-" and not self.shared

    @property
    def has_grace(self) -> bool:
        """Whether it waits for another listener when its own goes away (R79)."""
        return self.origin in GRACE_ORIGINS


#: One reply to an ask: the protocol's `Answer`, the one class for what is answered.
AskReply = Answer


@attrs.frozen
class Withdrawn:
    """A listener's notice: the entry it claimed is gone (``"task canceled"`` when its
    producer was cancelled, R3); stop showing it, a reply would be refused."""

    entry_id: str
    reason: str


@attrs.frozen
class Verified:
    """A listener's notice: the system password it passed along for entry
    ``entry_id`` was checked (R7); ``ok`` false means the call was denied."""

    entry_id: str
    ok: bool
    error: str = ""


@attrs.frozen(kw_only=True)
class RegistryStatistics:
    """``entries``/``claimed``/``parked`` count open entries now, ``in_grace`` those
    waiting for a new listener (R79); ``listeners`` counts registered listeners,
    passive ones included. The ``*_total`` counters only grow: ``asked_total`` counts
    `ask` and `offer_parked` registrations, ``answered_total`` accepted replies,
    ``withdrawn_total`` producer cancellations and `remove` calls, ``failed_total``
    entries resolved with an error."""

    entries: int
    claimed: int
    parked: int
    listeners: int
    asked_total: int
    answered_total: int
    withdrawn_total: int
    failed_total: int
    in_grace: int = 0
