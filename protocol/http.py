"""HTTP request and response bodies of the daemon's ``/v1`` routes (SPEC §7)."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import attrs

from agentrio.protocol.asks import AckRequest, Answer, OpenAsks
from agentrio.protocol.events import Question
from agentrio.protocol.frames import (
    AllowedRule,
    LegInfo,
    McpServerInfo,
    ModelChoice,
    PendingTaskInfo,
)
from agentrio.protocol.stops import StopReceipt

__all__ = [
    "BODY_TYPES",
    "AckRequest",
    "AllowedRules",
    "CancelResult",
    "Compaction",
    "ConfirmRequest",
    "ErrorBody",
    "ErrorDetail",
    "FrontendInfo",
    "Health",
    "HistoryEntry",
    "HistoryList",
    "HistoryRecord",
    "LegCancelResult",
    "Legs",
    "McpServerInfo",
    "ModelRequest",
    "OpenAsks",
    "PendingTasks",
    "Questions",
    "RecentExchange",
    "RecentExchanges",
    "ResumeAccepted",
    "ResumeRequest",
    "SandboxInfo",
    "SendRequest",
    "SendStarted",
    "SendSteered",
    "SessionList",
    "SessionModel",
    "ShutdownAccepted",
    "ShutdownRequest",
    "StoreInfo",
]


@attrs.frozen(kw_only=True)
class SendRequest:
    """``POST /v1/send``: start a task, steer a running one, or resume one (R35).
    ``cwd`` as on the ``run`` frame: the session's working directory from this task
    on (R86); a steer or a resume refuses it (they keep the directory they run in)."""

    input: str
    session_id: str | None = None
    pending_task: str | None = None
    allow_all: bool = False
    cwd: str | None = None


@attrs.frozen(kw_only=True)
class SendStarted:
    session_id: str
    task_hash: str


@attrs.frozen(kw_only=True)
class SendSteered:
    session_id: str
    steer: bool = True


@attrs.frozen(kw_only=True)
class CancelResult:
    """``stopped``: what the cancel or pause ended, once it has (`agentrio.protocol.stops`);
    left out when nothing was stopped here (stale, already ending, another daemon's)."""

    cancelled: bool
    stale: bool = False
    stopped: StopReceipt | None = attrs.field(default=None, metadata={"omit_if_default": True})


@attrs.frozen(kw_only=True)
class ConfirmRequest(Answer):
    """``POST …/confirm/{confirm_hash}``: an `Answer`, as a ``reply`` frame carries it
    (older clients sent ``action`` for ``stop``)."""


@attrs.frozen(kw_only=True)
class PendingTasks:
    tasks: list[PendingTaskInfo]


@attrs.frozen(kw_only=True)
class SessionList:
    """``GET /v1/sessions?origin=chat-``: the ids of the sessions of one origin that
    started a task, sorted (the web page's session list, issue 33 item 11)."""

    sessions: list[str]


@attrs.frozen(kw_only=True)
class Questions:
    task_hash: str
    questions: list[Question]


@attrs.frozen(kw_only=True)
class ResumeRequest:
    answers: list[str] | None = None


@attrs.frozen(kw_only=True)
class ResumeAccepted:
    task_hash: str


@attrs.frozen(kw_only=True)
class HistoryEntry:
    task_hash: str
    end_at: float
    objective: str
    model: str
    reasoning: str
    status: Literal["finished", "failed", "canceled"]


@attrs.frozen(kw_only=True)
class HistoryList:
    tasks: list[HistoryEntry]


@attrs.frozen(kw_only=True)
class HistoryRecord:
    task_hash: str
    content: str


@attrs.frozen(kw_only=True)
class RecentExchange:
    """One ended task of the session as a reopened window shows it: what the person
    said (``input``) and the answer it got (``reply``: the task's last text, a
    ``[Canceled]`` or failure note), each clamped to 4 KiB."""

    task_hash: str
    end_at: float
    input: str
    reply: str


@attrs.frozen(kw_only=True)
class RecentExchanges:
    """``GET /v1/session/{id}/recent?limit=N``: the session's last ``N`` (default 5,
    at most 50) exchanges, oldest first, from its stored conversation -- what the REPL
    reopened with ``--session`` and the page print before anything new (issue 31)."""

    exchanges: list[RecentExchange]


@attrs.frozen(kw_only=True)
class Legs:
    """``GET /v1/session/{id}/legs``: the session's queued and running background legs
    (the HTTP twin of the ``leg_list`` frame, for the web dashboard)."""

    legs: list[LegInfo]


@attrs.frozen(kw_only=True)
class LegCancelResult:
    """``POST /v1/session/{id}/legs/{leg_id}/cancel``: how many legs were cancelled
    (one, or every leg of the session for ``leg_id`` ``all``)."""

    cancelled: int


@attrs.frozen(kw_only=True)
class AllowedRules:
    """``GET /v1/session/{id}/allowed``: the home's remembered rules (R76, R92);
    ``DELETE …/allowed/{rule_id}`` answers the rules left and those ``removed``."""

    rules: list[AllowedRule]
    removed: list[AllowedRule] = attrs.field(factory=list, metadata={"omit_if_default": True})


@attrs.frozen(kw_only=True)
class ModelRequest:
    """``PUT /v1/session/{id}/model``: use the model ``name`` for the session's next
    tasks (``default``: back to ``[model]``)."""

    name: str


@attrs.frozen(kw_only=True)
class Compaction:
    """``POST /v1/session/{id}/compact``: the session's conversation was compacted on
    request; ``summarised`` earlier exchanges were folded into its summary."""

    summarised: int


@attrs.frozen(kw_only=True)
class SessionModel:
    """``GET``/``PUT /v1/session/{id}/model``: the session's model (``name`` chosen,
    ``model`` what it names) and every choice."""

    name: str
    model: str
    choices: list[ModelChoice]


@attrs.frozen(kw_only=True)
class SandboxInfo:
    """Whether commands nobody was asked about can run (R75): ``active`` False means
    every command asks; ``detail`` says why, or which bubblewrap serves."""

    active: bool
    detail: str


@attrs.frozen(kw_only=True)
class StoreInfo:
    """The store behind the daemon: ``backend`` ``sqlite`` or ``redis``; ``ok`` False
    when it cannot be reached now (Redis down: new work is refused with a 503
    ``unavailable`` until it is back); ``detail`` says why."""

    backend: str
    ok: bool
    detail: str = ""


@attrs.frozen(kw_only=True)
class FrontendInfo:
    """One chat front-end the daemon runs (R82, issue 33): ``state`` ``starting``,
    ``running`` (its process is up; ``pid``), ``restarting`` (it exited and starts again
    after a backoff) or ``stopped`` (it cannot start as configured: no restart until
    the daemon restarts); ``restarts`` counts its exits so far; ``last_error`` is what
    it said last before exiting (its log's last error line, else its exit code)."""

    name: str
    state: Literal["starting", "running", "restarting", "stopped"]
    pid: int | None = None
    restarts: int = 0
    last_error: str = ""


@attrs.frozen(kw_only=True)
class Health:
    ok: bool
    version: str
    uptime_s: float
    tasks: int
    legs: int
    sandbox: SandboxInfo | None = None
    store: StoreInfo | None = None
    frontends: list[FrontendInfo] = attrs.field(factory=list)
    #: The MCP servers (``[mcp.NAME]``), in the order configured.
    mcp: list[McpServerInfo] = attrs.field(factory=list)
    statistics: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class ShutdownRequest:
    """``POST /v1/shutdown``: stop the daemon as SIGTERM does (R53); ``reason`` is
    logged and left in ``<home>/daemon.stopped``, so an open REPL does not restart a
    daemon stopped on purpose."""

    reason: str = ""


@attrs.frozen(kw_only=True)
class ShutdownAccepted:
    """202 reply of ``POST /v1/shutdown``: the daemon's ``pid`` (to wait for its exit),
    the ``tasks`` it runs now (cancelled with cause ``shutdown``, kept resumable) and
    the background ``legs`` it ends (R27)."""

    pid: int
    tasks: int
    legs: int


@attrs.frozen(kw_only=True)
class ErrorDetail:
    code: str
    message: str


@attrs.frozen(kw_only=True)
class ErrorBody:
    """Every HTTP error: ``{"error": {"code": "...", "message": "..."}}``."""

    TYPE: ClassVar[str] = "error"
    error: ErrorDetail


BODY_TYPES: tuple[type[Any], ...] = (
    AckRequest,
    OpenAsks,
    Compaction,
    ModelRequest,
    SessionModel,
    SendRequest,
    SendStarted,
    SendSteered,
    CancelResult,
    ConfirmRequest,
    PendingTasks,
    SessionList,
    Questions,
    ResumeRequest,
    ResumeAccepted,
    HistoryEntry,
    HistoryList,
    HistoryRecord,
    RecentExchanges,
    Legs,
    LegCancelResult,
    AllowedRules,
    Health,
    ShutdownRequest,
    ShutdownAccepted,
    ErrorBody,
)
