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
* **Grace (R79).** A ``chat-``/``tg-``/``dc-`` ask whose listener goes away waits a
  grace for another matching listener (a reloaded web page) before it fails closed.
  ``cli-`` asks fail at once (R6, R43: the window's runs are cancelled anyway), as do
  asks of sessions without an origin.
"""

from __future__ import annotations

from typing import Any, Final, Literal

import attrs

from agentrio.engine.ids import origin_of
from agentrio.protocol.causes import Cause
from agentrio.protocol.events import Question, ToolDetails
from agentrio.protocol.frames import Reply
from agentrio.protocol.http import ConfirmRequest
from agentrio.protocol.rules import RuleOffer

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

AskKind = Literal["tool_confirm", "ask_user", "secret"]

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
class AskRequest:
    """What a task asks. ``window_hash`` names the REPL window that started the task
    (R5); ``restricted``/``need_password`` mark a confirmation that touches a restricted
    path and needs the system password (R7)."""

    kind: AskKind
    session_id: str
    task_hash: str
    window_hash: str = ""
    tool_name: str = ""
    tool_args: dict[str, Any] = attrs.field(factory=dict)
    questions: list[Question] = attrs.field(factory=list)
    restricted: bool = False
    need_password: bool = False
    #: Who asks, shown to the person: the in-process sub-agent (R80), or the background
    #: sub-agents whose commands a follow-up offers (R84); "" for the task.
    subagent: str = ""
    #: Rules the confirmation offers as choices of their own (R92), by kind.
    offers: list[RuleOffer] = attrs.field(factory=list)
    #: What a confirmed call would do, typed (a file tool's diff), shown with the
    #: arguments; None when they say it all.
    details: ToolDetails | None = None

    @property
    def origin(self) -> str:
        """The session's origin prefix (``cli-``, ``chat-``, …) or ``""``."""
        return origin_of(self.session_id)

    @property
    def windowed(self) -> bool:
        """A ``cli-`` ask of a task a REPL window started: only the listener owning
        ``window_hash`` may take or answer it (R78)."""
        return bool(self.window_hash) and self.origin == "cli-"

    @property
    def has_grace(self) -> bool:
        """Whether it waits for another listener when its own goes away (R79)."""
        return self.origin in GRACE_ORIGINS


@attrs.frozen(kw_only=True)
class AskReply:
    """One reply to an ask. ``password`` and ``answers`` never show in ``repr``: the
    answer to a ``secret`` ask is a secret (R73)."""

    approve: bool | None = None
    answers: list[str] | None = attrs.field(default=None, repr=False)
    password: str | None = attrs.field(default=None, repr=False)
    remember: bool = False
    allow_turn: bool = False
    reason: str = ""
    #: The stop choice that came with the answer: the task stops with this cause.
    stop: Cause | None = None
    #: The kind of the offered rule chosen (``offers``), or "" (R92).
    rule: str = ""

    @classmethod
    def from_wire(cls, answer: ConfirmRequest | Reply) -> AskReply:
        """The reply carried by a ``reply`` frame or a ``POST …/confirm`` body."""
        return cls(
            approve=answer.approve,
            answers=answer.answers,
            password=answer.password,
            remember=answer.remember,
            allow_turn=answer.allow_turn,
            reason=answer.reason,
            stop=answer.stop,
            rule=answer.rule,
        )


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
