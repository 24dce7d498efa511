"""The ask, in one vocabulary: `Asked` is what a task asks a person, `Answer` what
comes back (issue 32 §1).

Every place that carries an ask builds on these two, so a field and its default are
written once: the ``ask`` frame is an `Asked` with the entry's ``id``, the ``reply``
frame and ``POST …/confirm`` body are an `Answer` (the frame adds ``id`` and
``request_id``), the cluster's ``ask_shown``/``answer_ask`` messages embed those
frames, the engine's pending registry holds an `Asked` (with the REPL window it
belongs to) and the `Answer` it resolved with, and the client SDK's ``Decision`` is an
`Answer`. The wire is what it was: the subclasses keep their ``id`` first
(`id_first`), and a field added after the first release of protocol 1 is left out
while it holds its default, so an older peer's decoder never meets it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Final, Literal

import attrs

from agentrio.protocol.causes import Cause, person_cause
from agentrio.protocol.events import Question, ToolDetails
from agentrio.protocol.rules import RuleOffer

__all__ = [
    "ACK_WAIT_S",
    "Ack",
    "AckRequest",
    "Answer",
    "AskInfo",
    "AskKind",
    "AskStateName",
    "Asked",
    "DeniedBy",
    "OpenAsks",
    "WithdrawnWhy",
    "answer_fields",
    "answer_of",
    "asked_fields",
    "frontend_name",
    "id_first",
]

AskKind = Literal["tool_confirm", "ask_user", "secret"]
#: Who denied a confirmation: the person, or a front-end's policy answering for them
#: (``agentrio exec``'s ``--allow`` rules); the model is told which (`wording.denied`).
DeniedBy = Literal["person", "policy"]

#: Field metadata: left out of the JSON while it holds its default (as
#: `agentrio.protocol.frames.OMIT_DEFAULT`, which is the same value).
_OMIT: Final = {"omit_if_default": True}


@attrs.frozen(kw_only=True)
class Asked:
    """What a task asks a person: approve a tool call (``tool_confirm``: ``tool_name``
    called with ``tool_args``, exactly as shown), answer ``questions`` (``ask_user``),
    or type one hidden value (``secret``: ``questions[0]``, the key in
    ``tool_args["key"]``). ``restricted``/``need_password`` mark a confirmation that
    touches a restricted path and needs the system password (R7)."""

    kind: AskKind
    session_id: str
    task_hash: str
    tool_name: str = ""
    tool_args: dict[str, Any] = attrs.field(factory=dict)
    questions: list[Question] = attrs.field(factory=list)
    restricted: bool = False
    need_password: bool = False
    #: The in-process sub-agent that asks (R80), ``sub-agent N/M: <objective>``, or the
    #: background sub-agents whose commands a follow-up offers (R84); empty when the
    #: task itself asks. Left out while empty (an older peer's frame).
    subagent: str = attrs.field(default="", metadata=_OMIT)
    #: Rules this confirmation offers as choices of their own (R92); left out if none.
    offers: list[RuleOffer] = attrs.field(factory=list, metadata=_OMIT)
    #: What the call would do, typed, for the dialog to draw (a file tool's diff:
    #: ``details.change``, issue 32); left out when the arguments say it all.
    details: ToolDetails | None = attrs.field(default=None, metadata=_OMIT)


@attrs.frozen(kw_only=True)
class Answer:
    """One answer to an ask. Confirmations use ``approve`` (``None``, as ``false``, is
    no approval), ``reason`` (told to the model on deny), ``remember`` (this exact
    command), ``allow_turn``, ``rule`` (the ``kind`` of one of the ask's ``offers``,
    R92) and ``password`` (R7); questions use ``answers``, one per question (or
    ``approve`` false: declined). ``stop`` stops the task with that cause as well
    ("Stop and discard": ``user_canceled``, "Stop, keep to resume": ``user_aborted``;
    older clients sent ``action``). ``denied_by`` says a denial came from a policy
    answering for the person (``agentrio exec``), not from them; left out while it is
    ``person``. ``password`` and ``answers`` never show in ``repr``: the answer to a
    ``secret`` ask is a secret (R73)."""

    approve: bool | None = None
    answers: list[str] | None = attrs.field(default=None, repr=False)
    password: str | None = attrs.field(default=None, repr=False)
    remember: bool = False
    allow_turn: bool = False
    reason: str = ""
    stop: Cause | None = attrs.field(default=None, validator=person_cause)
    rule: str = attrs.field(default="", metadata=_OMIT)
    denied_by: DeniedBy = attrs.field(
        default="person", validator=attrs.validators.in_(("person", "policy")), metadata=_OMIT
    )


def id_first(_: type, fields: list[attrs.Attribute[Any]]) -> list[attrs.Attribute[Any]]:
    """attrs ``field_transformer``: a subclass's ``id`` stays the first field, as it
    was before the shared fields moved into a base class (the JSON keeps its order)."""
    return sorted(fields, key=lambda f: f.name != "id")


def _fields_of(value: Any, base: type) -> dict[str, Any]:
    names: Sequence[str] = [f.name for f in attrs.fields(base)]
    return {name: getattr(value, name) for name in names}


def asked_fields(value: Asked) -> dict[str, Any]:
    """The `Asked` part of ``value`` (a frame, the registry's request), as keyword
    arguments for another `Asked` class: ``Ask(id=…, **asked_fields(request))``."""
    return _fields_of(value, Asked)


def answer_fields(value: Answer) -> dict[str, Any]:
    """The `Answer` part of ``value`` (a ``reply`` frame, a confirm body), as keyword
    arguments for another `Answer` class."""
    return _fields_of(value, Answer)


def answer_of(value: Answer) -> Answer:
    """The plain `Answer` in ``value`` (a ``reply`` frame, a confirm body, a client's
    ``Decision``), for the pending registry to hold: without a frame's ``id`` and
    ``request_id``."""
    return Answer(**answer_fields(value))


# ------------------------------------------------------------- an ask's life (issue 34)

#: Where an ask is: ``waiting`` for a listener to take it, ``shown`` on a front-end
#: (``acknowledged`` once it said it drew it), ``answered``, or ``withdrawn``.
AskStateName = Literal["waiting", "shown", "answered", "withdrawn"]
#: Why an ask was withdrawn: its task stopped, its listener went away (past its grace,
#: R79), or something else took its place (a parked question resumed another way).
WithdrawnWhy = Literal["task_stopped", "listener_gone", "superseded"]
#: Seconds a shown ask may go unacknowledged before it says so (``late``).
ACK_WAIT_S: Final = 3.0


@attrs.frozen(kw_only=True)
class Ack:
    """The front-end has drawn the ask ``id`` where the person sees it (issue 34): the
    REPL once its dialog is on screen, the page once its card is, a bot once its
    message was sent. Any connection that may answer the ask may acknowledge it."""

    TYPE: ClassVar[str] = "ack"
    id: str
    request_id: str = attrs.field(default="", metadata=_OMIT)


@attrs.frozen(kw_only=True)
class AckRequest:
    """``POST /v1/session/{id}/ack/{confirm_hash}``: the front-end ``frontend`` (the
    page says ``web``) has drawn the ask (issue 34); the body may be empty."""

    frontend: str = "http"


@attrs.frozen(kw_only=True)
class AskInfo:
    """One open ask and its state: ``frontend`` it is shown on (the client name of its
    ``hello``: ``repl``, ``web``, ``telegram``, …), whether that front-end
    ``acknowledged`` it, and ``late`` when it was shown more than `ACK_WAIT_S` ago and
    still is not acknowledged. ``since`` is when it entered its state (Unix time)."""

    id: str
    session_id: str
    task_hash: str
    kind: AskKind
    tool_name: str = ""
    state: AskStateName
    frontend: str = ""
    #: The daemon whose front-end it is shown on, when not the one answering (a
    #: cluster: a listener connected to another daemon, its ``statistics.cluster.daemon``).
    daemon: str = attrs.field(default="", metadata=_OMIT)
    acknowledged: bool = False
    late: bool = False
    since: float


@attrs.frozen(kw_only=True)
class OpenAsks:
    """``GET /v1/session/{id}/asks``: the session's open asks, oldest first."""

    asks: list[AskInfo]


def frontend_name(client: str) -> str:
    """The front-end a ``hello``'s ``client`` names, as asks' states say it:
    ``agentrio-repl/0.1.0`` is ``repl``, ``agentrio-telegram/1`` ``telegram``; a name
    without that form (``web``, a script's own) stays as it is."""
    name = client.split("/", 1)[0]
    return name.removeprefix("agentrio-") or client
