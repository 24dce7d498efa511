"""WebSocket frames of ``/v1/ws``: one JSON object per text message, tagged by ``type``.

The first client frame is ``hello``; the daemon answers ``welcome`` or closes with
4401. Every ``run`` and ``pending`` gets exactly one ``done`` with the same
``request_id``; every other problem is an ``error`` frame and the connection lives on.

**Acknowledgements.** Every other client frame but ``hello`` (the *control* frames,
`CONTROL_FRAME_TYPES`) may carry a ``request_id``. Empty (the default) asks for no
answer on success, as in the first release of protocol 1. Non-empty, the daemon
answers exactly once, after it handled the frame: with the list frame carrying that
``request_id`` for a query (``list_pending``, ``list_legs``, ``list_allowed``,
``forget_allowed``), with ``ok {request_id}`` for every other control frame, or with
an ``error`` whose ``ref`` is that ``request_id``.

Fields marked `OMIT_DEFAULT` are left out of the JSON while they hold their default,
so a frame that does not use them is byte for byte the frame of the first release:
the decoders of protocol 1 refuse unknown keys, and an older peer keeps working.
"""

from __future__ import annotations

from typing import Any, ClassVar, Final, Literal

import attrs

from agentrio.protocol.asks import Ack, Answer, Asked, id_first
from agentrio.protocol.causes import Cause, person_cause
from agentrio.protocol.events import Event, Question
from agentrio.protocol.rules import AllowedRule
from agentrio.protocol.stops import StopReceipt

__all__ = [
    "CLIENT_FRAME_TYPES",
    "CONTROL_FRAME_TYPES",
    "OMIT_DEFAULT",
    "PROTOCOL_VERSION",
    "REPL_CLIENT",
    "SERVER_FRAME_TYPES",
    "Accepted",
    "Ack",
    "AllowedList",
    "AllowedRule",
    "Ask",
    "BackgroundCancel",
    "Cancel",
    "Challenge",
    "ClientFrame",
    "Compact",
    "CompactedSession",
    "DoneFrame",
    "ErrorFrame",
    "EventFrame",
    "ForgetAllowed",
    "Hello",
    "LegInfo",
    "LegList",
    "ListAllowed",
    "ListLegs",
    "ListMcp",
    "ListPending",
    "Listen",
    "McpList",
    "McpServerInfo",
    "ModelChoice",
    "ModelInfo",
    "Ok",
    "OpenWindow",
    "PendingFrame",
    "PendingList",
    "PendingTaskInfo",
    "Prove",
    "Reply",
    "Run",
    "ServerFrame",
    "SetModel",
    "Steer",
    "Subscribe",
    "Verify",
    "Welcome",
    "Withdrawn",
    "names_repl",
]

PROTOCOL_VERSION = 1

#: Field metadata: the encoder leaves the field out while it holds its default (see
#: the module doc). Used for the fields added to protocol 1 after its first release.
OMIT_DEFAULT: Final = {"omit_if_default": True}


DoneStatus = Literal["finished", "canceled", "paused", "parked", "aborted", "failed"]
#: The endings after which the task is pending (resumable): front-ends list it again.
KEPT_STATUSES: Final[frozenset[DoneStatus]] = frozenset({"paused", "parked", "aborted"})


def done_status(cause: Cause) -> DoneStatus:
    """The ending of a task stopped with ``cause``: ``canceled`` (discarded),
    ``paused``, else ``aborted`` (kept) -- the one place a cause becomes a status."""
    if cause is Cause.USER_CANCELED:
        return "canceled"
    return "paused" if cause is Cause.PAUSED else "aborted"


# ---------------------------------------------------------------- client → daemon


#: The ``hello`` ``client`` of the REPL (``agentrio-repl/<version>``): the one front-end
#: whose replies may carry the system password of a restricted confirmation (R7).
REPL_CLIENT: Final = "agentrio-repl"


def names_repl(client: str) -> bool:
    """Whether a ``hello``'s ``client`` names the REPL (`REPL_CLIENT`, alone or with a
    ``/version``): only then does the daemon take a ``password`` in its replies (R7)."""
    return client == REPL_CLIENT or client.startswith(REPL_CLIENT + "/")


@attrs.frozen(kw_only=True)
class Hello:
    """The first frame. Either ``token`` (the bearer token itself: the web page, curl
    users, clients on the daemon's Unix socket, clients of the first release) or
    ``nonce`` (a fresh random value, 16-64 URL-safe characters): then the token never
    crosses the wire; the daemon answers ``challenge``, proving first that it knows
    the token, and the client answers ``prove`` (issue 29 finding 3, docs/security.md).
    """

    TYPE: ClassVar[str] = "hello"
    client: str
    protocol: int
    token: str = attrs.field(default="", metadata=OMIT_DEFAULT)
    nonce: str = attrs.field(default="", metadata=OMIT_DEFAULT)


@attrs.frozen(kw_only=True)
class Prove:
    """The client's half of the mutual challenge: ``proof`` is
    ``hex(HMAC-SHA256(token, "agentrio-client-v1|" + hello.nonce + "|" + challenge.nonce))``
    (`agentrio.protocol.challenge`). Sent only after the daemon's own proof checked out."""

    TYPE: ClassVar[str] = "prove"
    proof: str


@attrs.frozen(kw_only=True)
class Run:
    """Start a task. ``window_hash`` binds the task's asks to this window (R5).
    ``cwd`` (an absolute path, or one relative to the session's directory) becomes the
    session's working directory before the task starts (R86; the REPL sends its own);
    empty: the session's directory stays (the configured default for a new session).
    ``share_asks``: the task's asks go first to the session's other listeners, and to
    this connection only when none can take them (R99; ``agentrio exec`` sends it)."""

    TYPE: ClassVar[str] = "run"
    request_id: str
    session_id: str
    input: str
    window_hash: str = ""
    allow_all: bool = False
    cwd: str = attrs.field(default="", metadata=OMIT_DEFAULT)
    share_asks: bool = attrs.field(default=False, metadata=OMIT_DEFAULT)


@attrs.frozen(kw_only=True)
class Steer:
    """Inject ``input`` at the start of the running task's next turn (R35)."""

    TYPE: ClassVar[str] = "steer"
    session_id: str
    task_hash: str
    input: str
    request_id: str = attrs.field(default="", metadata=OMIT_DEFAULT)


@attrs.frozen(kw_only=True)
class Cancel:
    """Stop a task with ``cause`` (R40, R41): ``user_canceled`` discards it,
    ``user_aborted`` and ``paused`` keep it resumable. (Older clients sent ``pause``.)

    ``session_id`` is optional: a task that does not run in the daemon is a *stale*
    cancel (SPEC §7), recorded as a ``canceled`` event in that session when it is
    named; without it there is no session to record into."""

    TYPE: ClassVar[str] = "cancel"
    task_hash: str
    cause: Cause = attrs.field(default=Cause.USER_CANCELED, validator=person_cause)
    session_id: str = attrs.field(default="", metadata=OMIT_DEFAULT)
    request_id: str = attrs.field(default="", metadata=OMIT_DEFAULT)


@attrs.frozen(kw_only=True, field_transformer=id_first)
class Reply(Answer):
    """Answer the ask ``id`` (`Answer`: ``approve`` for confirmations, ``answers``,
    one per question, for questions, ``password`` for restricted confirmations, R7;
    ``stop``, the stop choice, for both)."""

    TYPE: ClassVar[str] = "reply"
    id: str
    request_id: str = attrs.field(default="", metadata=OMIT_DEFAULT)


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
    request_id: str = attrs.field(default="", metadata=OMIT_DEFAULT)


@attrs.frozen(kw_only=True)
class Listen:
    """Become a listener for asks whose session origin starts with ``prefix`` (R2)."""

    TYPE: ClassVar[str] = "listen"
    prefix: str
    request_id: str = attrs.field(default="", metadata=OMIT_DEFAULT)


@attrs.frozen(kw_only=True)
class Subscribe:
    """Receive every event of ``session_id`` (recent ones replayed first)."""

    TYPE: ClassVar[str] = "subscribe"
    session_id: str
    request_id: str = attrs.field(default="", metadata=OMIT_DEFAULT)


@attrs.frozen(kw_only=True)
class ListPending:
    """The resumable tasks of one session (``session_id``), or of every session of one
    origin (``origin``, e.g. ``"cli-"``: a reopened REPL finds the work its earlier
    sessions left). Exactly one of the two is given; answered by ``pending_list``."""

    TYPE: ClassVar[str] = "list_pending"
    session_id: str = attrs.field(default="", metadata=OMIT_DEFAULT)
    origin: str = attrs.field(default="", metadata=OMIT_DEFAULT)
    request_id: str = attrs.field(default="", metadata=OMIT_DEFAULT)


@attrs.frozen(kw_only=True)
class ListLegs:
    TYPE: ClassVar[str] = "list_legs"
    session_id: str
    request_id: str = attrs.field(default="", metadata=OMIT_DEFAULT)


@attrs.frozen(kw_only=True)
class ListMcp:
    """Ask for the daemon's MCP servers and their states (answered by ``mcp_list``)."""

    TYPE: ClassVar[str] = "list_mcp"
    request_id: str = attrs.field(default="", metadata=OMIT_DEFAULT)


@attrs.frozen(kw_only=True)
class OpenWindow:
    """A REPL window works in ``session_id`` (issue 33): this connection owns window
    ``window_hash`` (R78) and is sent the session's events routed to it; the session's
    background jobs whose window is open nowhere (the REPL that started them closed)
    move to this window, so their legs' ends and their follow-up reach it."""

    TYPE: ClassVar[str] = "open_window"
    session_id: str
    window_hash: str
    request_id: str = attrs.field(default="", metadata=OMIT_DEFAULT)


@attrs.frozen(kw_only=True)
class ListAllowed:
    """The home's remembered rules (every session's, kept across restarts: R76, R92);
    answered by ``allowed``. ``session_id`` names the session asking."""

    TYPE: ClassVar[str] = "list_allowed"
    session_id: str
    request_id: str = attrs.field(default="", metadata=OMIT_DEFAULT)


@attrs.frozen(kw_only=True)
class ForgetAllowed:
    """Remove one remembered rule (``rule_id``) or all of them (``"all"``); answered
    by ``allowed`` with the rules left and the ones ``removed`` (R76, R92)."""

    TYPE: ClassVar[str] = "forget_allowed"
    session_id: str
    rule_id: str
    request_id: str = attrs.field(default="", metadata=OMIT_DEFAULT)


@attrs.frozen(kw_only=True)
class SetModel:
    """Choose the model of the session's next tasks (``name``: ``default`` or a
    ``[models.NAME]`` table), or with ``name`` empty just ask which it is; answered by
    ``model``. An unknown name gets an ``error`` frame ``bad_request``."""

    TYPE: ClassVar[str] = "set_model"
    session_id: str
    name: str = attrs.field(default="", metadata=OMIT_DEFAULT)
    request_id: str = attrs.field(default="", metadata=OMIT_DEFAULT)


@attrs.frozen(kw_only=True)
class Compact:
    """Compact the session's conversation now (the REPL's ``/compact``, issue 31 item
    3): every earlier exchange is folded into its stored summary, so the next task's
    model input starts from the summary. Answered by ``compacted_session``."""

    TYPE: ClassVar[str] = "compact"
    session_id: str
    request_id: str = attrs.field(default="", metadata=OMIT_DEFAULT)


ClientFrame = (
    Hello
    | Prove
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
    | ListMcp
    | OpenWindow
    | ListAllowed
    | ForgetAllowed
    | SetModel
    | Compact
    | Ack
)

# ---------------------------------------------------------------- daemon → client


@attrs.frozen(kw_only=True)
class Welcome:
    TYPE: ClassVar[str] = "welcome"
    protocol: int
    daemon_version: str


@attrs.frozen(kw_only=True)
class Challenge:
    """The daemon's answer to a ``hello`` with a ``nonce``: its own fresh ``nonce`` and
    ``proof`` = ``hex(HMAC-SHA256(token, "agentrio-daemon-v1|" + hello.nonce + "|" +
    nonce))``: only the daemon of that home can compute it, so a process that took a
    freed port learns nothing (`agentrio.protocol.challenge`)."""

    TYPE: ClassVar[str] = "challenge"
    nonce: str
    proof: str


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


@attrs.frozen(kw_only=True, field_transformer=id_first)
class Ask(Asked):
    """A question for a person (`Asked`, shown by the entry ``id``); answer with
    ``reply {id}``."""

    TYPE: ClassVar[str] = "ask"
    id: str


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
    #: What a cancel or pause ended (`agentrio.protocol.stops`); left out otherwise.
    stopped: StopReceipt | None = attrs.field(default=None, metadata=OMIT_DEFAULT)


@attrs.frozen(kw_only=True)
class ErrorFrame:
    TYPE: ClassVar[str] = "error"
    code: str
    message: str
    ref: str = ""


@attrs.frozen(kw_only=True)
class Ok:
    """The control frame with this ``request_id`` was handled (see the module doc).

    It says the daemon did what the frame asks *now*: a ``listen`` or ``subscribe`` is
    in place, a ``cancel`` was delivered (the run's own ``done`` follows when it has
    stopped), a ``reply`` was accepted."""

    TYPE: ClassVar[str] = "ok"
    request_id: str


@attrs.frozen(kw_only=True)
class PendingTaskInfo:
    """One resumable task, as listed by ``GET …/task`` and ``pending_list``.

    ``session_id`` is given in lists by origin (whose tasks come from many sessions)
    and left out of lists of one session. ``failure`` says why a task whose model kept
    failing was kept (issue 31 item 6); it is left out for every other kept task."""

    task_hash: str
    objective: str
    has_questions: bool
    questions: list[Question]
    updated_at: float
    has_jobs: bool
    session_id: str = attrs.field(default="", metadata=OMIT_DEFAULT)
    failure: str = attrs.field(default="", metadata=OMIT_DEFAULT)


@attrs.frozen(kw_only=True)
class PendingList:
    """Reply to ``list_pending``: ``session_id`` or ``origin`` as it asked."""

    TYPE: ClassVar[str] = "pending_list"
    session_id: str
    tasks: list[PendingTaskInfo]
    request_id: str = attrs.field(default="", metadata=OMIT_DEFAULT)
    origin: str = attrs.field(default="", metadata=OMIT_DEFAULT)


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
    request_id: str = attrs.field(default="", metadata=OMIT_DEFAULT)


@attrs.frozen(kw_only=True)
class McpServerInfo:
    """One MCP server of the daemon (``[mcp.NAME]``, docs/mcp.md): ``transport``
    ``stdio`` or ``http``; ``state`` ``starting``, ``ready`` (its ``tools`` are offered;
    a stdio server's ``pid``), ``restarting`` (``reason`` it went, starting again in
    ``retry_in_s``) or ``failed`` (``reason``; no restart until the daemon restarts);
    ``restarts`` so far."""

    name: str
    transport: Literal["stdio", "http"]
    state: Literal["starting", "ready", "restarting", "failed"]
    reason: str = ""
    pid: int | None = None
    tools: int = 0
    restarts: int = 0
    retry_in_s: float | None = None


@attrs.frozen(kw_only=True)
class McpList:
    """The answer to ``list_mcp``: every ``[mcp.NAME]`` server, in configured order."""

    TYPE: ClassVar[str] = "mcp_list"
    servers: list[McpServerInfo]
    request_id: str = attrs.field(default="", metadata=OMIT_DEFAULT)


@attrs.frozen(kw_only=True)
class AllowedList:
    """The home's remembered rules (R92), oldest first; after a ``forget_allowed``,
    ``removed`` holds the rules it removed (so a front-end says what went)."""

    TYPE: ClassVar[str] = "allowed"
    session_id: str
    rules: list[AllowedRule]
    removed: list[AllowedRule] = attrs.field(factory=list, metadata=OMIT_DEFAULT)
    request_id: str = attrs.field(default="", metadata=OMIT_DEFAULT)


@attrs.frozen(kw_only=True)
class ModelChoice:
    """A model a session may choose: its ``name`` (``default`` for ``[model]``, else a
    ``[models.NAME]`` table) and the model it names."""

    name: str
    model: str


@attrs.frozen(kw_only=True)
class ModelInfo:
    """The session's model: ``name`` chosen (``default`` or a table), ``model`` what
    it names, and every choice (answers ``set_model``)."""

    TYPE: ClassVar[str] = "model"
    session_id: str
    name: str
    model: str
    choices: list[ModelChoice]
    request_id: str = attrs.field(default="", metadata=OMIT_DEFAULT)


@attrs.frozen(kw_only=True)
class CompactedSession:
    """The answer to ``compact``: how many earlier exchanges were folded into the
    session's summary (0: there was nothing to fold)."""

    TYPE: ClassVar[str] = "compacted_session"
    session_id: str
    summarised: int
    request_id: str = attrs.field(default="", metadata=OMIT_DEFAULT)


ServerFrame = (
    Welcome
    | Challenge
    | Accepted
    | EventFrame
    | Ask
    | Withdrawn
    | Verify
    | DoneFrame
    | ErrorFrame
    | Ok
    | PendingList
    | LegList
    | McpList
    | AllowedList
    | ModelInfo
    | CompactedSession
)

CLIENT_FRAME_TYPES: tuple[type[Any], ...] = ClientFrame.__args__
SERVER_FRAME_TYPES: tuple[type[Any], ...] = ServerFrame.__args__
#: Client frames answered by ``ok`` (or their list frame) when they carry a
#: ``request_id``: every client frame but ``hello``, ``prove``, ``run`` and ``pending``.
CONTROL_FRAME_TYPES: tuple[type[Any], ...] = tuple(
    cls for cls in CLIENT_FRAME_TYPES if cls not in (Hello, Prove, Run, PendingFrame)
)
