"""WebSocket frames of ``/v1/ws``: one JSON object per text message, tagged by ``type``.

The first client frame is ``hello``; the daemon answers ``welcome`` or closes with
4401. Every ``run`` and ``pending`` gets exactly one ``done`` with the same
``request_id``; every other problem is an ``error`` frame and the connection lives on.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import attrs

from protocol.events import Event, Question

__all__ = [
    "CLIENT_FRAME_TYPES",
    "PROTOCOL_VERSION",
    "SERVER_FRAME_TYPES",
    "Accepted",
    "AllowedList",
    "AllowedRule",
    "Ask",
    "BackgroundCancel",
    "Cancel",
    "ClientFrame",
    "DoneFrame",
    "ErrorFrame",
    "EventFrame",
    "ForgetAllowed",
    "Hello",
    "LegInfo",
    "LegList",
    "ListAllowed",
    "ListLegs",
    "ListPending",
    "Listen",
    "PendingFrame",
    "PendingList",
    "PendingTaskInfo",
    "Reply",
    "Run",
    "ServerFrame",
    "Steer",
    "Subscribe",
    "Verify",
    "Welcome",
    "Withdrawn",
]

PROTOCOL_VERSION = 1


DoneStatus = Literal["finished", "canceled", "paused", "parked", "aborted", "failed"]
AskKind = Literal["tool_confirm", "ask_user", "secret"]
ReplyAction = Literal["cancel_task", "abort_task"]

# ---------------------------------------------------------------- client → daemon


@attrs.frozen(kw_only=True)
class Hello:
    TYPE: ClassVar[str] = "hello"
    token: str
    client: str
    protocol: int


@attrs.frozen(kw_only=True)
class Run:
    """Start a task. ``window_hash`` binds the task's asks to this window (R5)."""

    TYPE: ClassVar[str] = "run"
    request_id: str
    session_id: str
    input: str
    window_hash: str = ""
    allow_all: bool = False


@attrs.frozen(kw_only=True)
class Steer:
    """Inject ``input`` at the start of the running task's next turn (R35)."""

    TYPE: ClassVar[str] = "steer"
    session_id: str
    task_hash: str
    input: str


@attrs.frozen(kw_only=True)
class Cancel:
    """Cancel (``pause`` false: cause ``user_canceled``) or pause a task (R40, R41)."""

    TYPE: ClassVar[str] = "cancel"
    task_hash: str
    pause: bool = False


@attrs.frozen(kw_only=True)
class Reply:
    """Answer the ask ``id``: ``approve`` for confirmations, ``answers`` (one per
    question) for questions, ``password`` for restricted confirmations (R7)."""

    TYPE: ClassVar[str] = "reply"
    id: str
    approve: bool | None = None
    answers: list[str] | None = None
    password: str | None = None
    remember: bool = False
    allow_turn: bool = False
    reason: str = ""
    action: ReplyAction | None = None


@attrs.frozen(kw_only=True)
class PendingFrame:
    """Resume the pending task ``task_hash`` in this window (R42)."""

    TYPE: ClassVar[str] = "pending"
    request_id: str
    session_id: str
    task_hash: str
    window_hash: str = ""
    answers: list[str] | None = None


@attrs.frozen(kw_only=True)
class BackgroundCancel:
    """Cancel one leg (``leg_id``) or every leg of the session (``"all"``) (R44)."""

    TYPE: ClassVar[str] = "background_cancel"
    session_id: str
    leg_id: str


@attrs.frozen(kw_only=True)
class Listen:
    """Become a listener for asks whose session origin starts with ``prefix`` (R2)."""

    TYPE: ClassVar[str] = "listen"
    prefix: str


@attrs.frozen(kw_only=True)
class Subscribe:
    """Receive every event of ``session_id`` (recent ones replayed first)."""

    TYPE: ClassVar[str] = "subscribe"
    session_id: str


@attrs.frozen(kw_only=True)
class ListPending:
    TYPE: ClassVar[str] = "list_pending"
    session_id: str


@attrs.frozen(kw_only=True)
class ListLegs:
    TYPE: ClassVar[str] = "list_legs"
    session_id: str


@attrs.frozen(kw_only=True)
class ListAllowed:
    """The session's remembered "Always allow" commands; answered by ``allowed`` (R76)."""

    TYPE: ClassVar[str] = "list_allowed"
    session_id: str


@attrs.frozen(kw_only=True)
class ForgetAllowed:
    """Remove one remembered command (``rule_id``) or all of them (``"all"``); answered
    by ``allowed`` with the rules left (R76)."""

    TYPE: ClassVar[str] = "forget_allowed"
    session_id: str
    rule_id: str


ClientFrame = (
    Hello
    | Run
    | Steer
    | Cancel
    | Reply
    | PendingFrame
    | BackgroundCancel
    | Listen
    | Subscribe
    | ListPending
    | ListLegs
    | ListAllowed
    | ForgetAllowed
)

# ---------------------------------------------------------------- daemon → client


@attrs.frozen(kw_only=True)
class Welcome:
    TYPE: ClassVar[str] = "welcome"
    protocol: int
    daemon_version: str


@attrs.frozen(kw_only=True)
class Accepted:
    """The task hash of a ``run``/``pending`` request, sent before its first event."""

    TYPE: ClassVar[str] = "accepted"
    request_id: str
    session_id: str
    task_hash: str


@attrs.frozen(kw_only=True)
class EventFrame:
    TYPE: ClassVar[str] = "event"
    session_id: str
    task_hash: str
    event: Event


@attrs.frozen(kw_only=True)
class Ask:
    """A question for a person; answer with ``reply {id}``."""

    TYPE: ClassVar[str] = "ask"
    id: str
    kind: AskKind
    session_id: str
    task_hash: str
    tool_name: str = ""
    tool_args: dict[str, Any] = attrs.field(factory=dict)
    questions: list[Question] = attrs.field(factory=list)
    restricted: bool = False
    need_password: bool = False


@attrs.frozen(kw_only=True)
class Withdrawn:
    """The ask ``id`` is gone (its task was cancelled or it was answered elsewhere)."""

    TYPE: ClassVar[str] = "withdrawn"
    id: str
    reason: str


@attrs.frozen(kw_only=True)
class Verify:
    """Result of the system-password check of a restricted confirmation (R7)."""

    TYPE: ClassVar[str] = "verify"
    id: str
    ok: bool
    error: str = ""


@attrs.frozen(kw_only=True)
class DoneFrame:
    TYPE: ClassVar[str] = "done"
    request_id: str
    task_hash: str
    status: DoneStatus
    error: str = ""


@attrs.frozen(kw_only=True)
class ErrorFrame:
    TYPE: ClassVar[str] = "error"
    code: str
    message: str
    ref: str = ""


@attrs.frozen(kw_only=True)
class PendingTaskInfo:
    """One resumable task, as listed by ``GET …/task`` and ``pending_list``."""

    task_hash: str
    objective: str
    has_questions: bool
    questions: list[Question]
    updated_at: float
    has_jobs: bool


@attrs.frozen(kw_only=True)
class PendingList:
    TYPE: ClassVar[str] = "pending_list"
    session_id: str
    tasks: list[PendingTaskInfo]


@attrs.frozen(kw_only=True)
class LegInfo:
    leg_id: str
    job_id: str
    task_hash: str
    label: str
    state: Literal["queued", "running"]
    started_at: float


@attrs.frozen(kw_only=True)
class LegList:
    TYPE: ClassVar[str] = "leg_list"
    session_id: str
    legs: list[LegInfo]


@attrs.frozen(kw_only=True)
class AllowedRule:
    """One remembered command: exactly this text runs without asking again (R76)."""

    id: str
    command: str
    added_at: float


@attrs.frozen(kw_only=True)
class AllowedList:
    TYPE: ClassVar[str] = "allowed"
    session_id: str
    rules: list[AllowedRule]


ServerFrame = (
    Welcome
    | Accepted
    | EventFrame
    | Ask
    | Withdrawn
    | Verify
    | DoneFrame
    | ErrorFrame
    | PendingList
    | LegList
    | AllowedList
)

CLIENT_FRAME_TYPES: tuple[type[Any], ...] = ClientFrame.__args__
SERVER_FRAME_TYPES: tuple[type[Any], ...] = ServerFrame.__args__
