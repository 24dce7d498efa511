"""Session events: what happened in a task, in order.

Every event carries ``kind`` (its tag), ``seq`` (increasing per session, so a
subscriber can tell a gap from a quiet spell) and ``at`` (Unix time, seconds).
Events are values: the engine makes them, the hub fans them out, front-ends render
them; nothing reads them back to decide what to do.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import attrs

from agentrio.protocol.rules import RuleOffer

__all__ = [
    "EVENT_TYPES",
    "AgentsMd",
    "AskState",
    "Canceled",
    "Compacted",
    "Confirm",
    "Done",
    "Event",
    "Failed",
    "FileChange",
    "JobSettled",
    "LegFinished",
    "LegReport",
    "LegStarted",
    "McpPart",
    "McpResult",
    "Pending",
    "Question",
    "Retrying",
    "SecretAsk",
    "StartedLeg",
    "SteerInjected",
    "SubagentEnd",
    "SubagentLegEnd",
    "TaskStarted",
    "Text",
    "TokenUsage",
    "ToolCall",
    "ToolDetails",
    "ToolOutput",
    "ToolProgress",
    "ToolResult",
    "ToolSkipped",
    "Workdir",
]


@attrs.frozen(kw_only=True)
class Question:
    """One question of an ``ask_user`` call (or a ``secret`` ask).

    ``options`` empty means free text; ``multi`` allows several options (the answer is
    then the chosen options joined by ``", "``); ``secret`` asks for hidden input. An
    answer need not be one of the options: a front-end may offer the person's own
    words ("Other…" in the REPL), after any ticked options.
    """

    text: str
    options: list[str] = attrs.field(factory=list)
    multi: bool = False
    secret: bool = False


@attrs.frozen(kw_only=True)
class TaskStarted:
    """A run of a task began. ``input`` is the model's first message: for a resumed
    run (``resumed_from`` set) that is the engine's resume message, so ``said`` carries
    what the person did, for front-ends to show instead: the answers given joined by
    ``" | "`` (a secret answer as ``(secret)``), or ``resumed``."""

    KIND: ClassVar[str] = "task_started"
    seq: int
    at: float
    input: str
    origin: str
    resumed_from: str | None = None
    said: str = attrs.field(default="", metadata={"omit_if_default": True})


@attrs.frozen(kw_only=True)
class Text:
    KIND: ClassVar[str] = "text"
    seq: int
    at: float
    text: str


@attrs.frozen(kw_only=True)
class ToolCall:
    KIND: ClassVar[str] = "tool_call"
    seq: int
    at: float
    call_id: str
    tool_name: str
    args: dict[str, Any]


@attrs.frozen(kw_only=True)
class ToolOutput:
    """What a running command printed so far, for people to watch (issue 33 item 6):
    its newest ``lines`` (at most a few, each clipped; the last one may be unfinished)
    and how many lines it has printed in all (``total_lines``). Throttled and bounded
    by the engine (docs/protocol.md, ``tool_output``), sent only while the command
    runs long enough to be worth watching; the model never reads it — the call's
    ``tool_result`` carries its output."""

    KIND: ClassVar[str] = "tool_output"
    seq: int
    at: float
    call_id: str
    tool_name: str
    lines: list[str]
    total_lines: int


@attrs.frozen(kw_only=True)
class StartedLeg:
    """A background leg a tool call started (R20-R22): ``queued`` when the session's
    leg limit made it wait."""

    leg_id: str
    label: str
    queued: bool = False


@attrs.frozen(kw_only=True)
class SubagentEnd:
    """How one in-process sub-agent of a ``subagents`` call ended (R80): its label
    (``sub-agent N/M: <objective>``), status, error, the calls it made (one short
    line each) and its final answer."""

    label: str
    status: Literal["finished", "failed"]
    error: str = ""
    final: str = ""
    calls: list[str] = attrs.field(factory=list)


_OMIT: Any = {"omit_if_default": True}


@attrs.frozen(kw_only=True)
class McpPart:
    """One content part of an MCP tool result: ``type`` ``text`` (``text``), ``image``
    or ``audio`` (``mime_type``, ``size`` bytes of data, never the data), ``resource``
    (``uri``, ``text`` when the server embedded text) or ``resource_link`` (``uri``)."""

    type: str
    text: str = attrs.field(default="", metadata=_OMIT)
    mime_type: str = attrs.field(default="", metadata=_OMIT)
    uri: str = attrs.field(default="", metadata=_OMIT)
    size: int = attrs.field(default=0, metadata=_OMIT)


@attrs.frozen(kw_only=True)
class McpResult:
    """What an MCP server's tool answered (docs/mcp.md): the server, its own name
    for the tool, whether the server called it an error, and its content parts."""

    server: str
    tool: str
    is_error: bool = attrs.field(default=False, metadata=_OMIT)
    parts: list[McpPart] = attrs.field(factory=list, metadata=_OMIT)


@attrs.frozen(kw_only=True)
class FileChange:
    """A change to one file (``write_file``/``edit_file``), as a confirmation shows it
    and a result reports it (issue 32 section 2).

    ``path`` is the file's real path; ``diff`` the hunks of a unified diff of it
    (``@@ -a,b +c,d @@`` headers, lines starting with ``" "``, ``"-"`` or ``"+"``,
    each ending with ``\\n``, and ``\\ No newline at end of file`` after a line that
    has none; no ``---``/``+++`` header: ``path`` names the file). ``created``: the file
    did not exist. ``added``/``removed`` count the diff's ``+``/``-`` lines.
    ``rule_dir`` (confirmations only): the real directory the "Always allow edits
    under" choice would remember, as that choice shows it."""

    path: str
    diff: str
    added: int = 0
    removed: int = 0
    created: bool = attrs.field(default=False, metadata=_OMIT)
    rule_dir: str = attrs.field(default="", metadata=_OMIT)


@attrs.frozen(kw_only=True)
class ToolDetails:
    """What a tool result means, typed, for the front-ends (the model reads
    ``output``, the prose): the job and legs a background tool started, the ending of
    each sub-agent of a ``subagents`` call, the change a file tool made (or, on a
    confirmation, proposes). Renderers read these, never the prose; fields not set
    are left out of the JSON."""

    job_id: str = attrs.field(default="", metadata=_OMIT)
    legs: list[StartedLeg] = attrs.field(factory=list, metadata=_OMIT)
    subagents: list[SubagentEnd] = attrs.field(factory=list, metadata=_OMIT)
    #: An MCP tool's answer (``mcp__NAME__TOOL``).
    mcp: McpResult | None = attrs.field(default=None, metadata=_OMIT)
    change: FileChange | None = attrs.field(default=None, metadata=_OMIT)
    #: On a confirmation: the call was running when its task stopped and the resumed
    #: task calls it again, so it may have partly run (issue 34 item 5); the sentence
    #: every front-end shows above the arguments. Left out otherwise.
    interrupted: str = attrs.field(default="", metadata=_OMIT)


@attrs.frozen(kw_only=True)
class ToolResult:
    KIND: ClassVar[str] = "tool_result"
    seq: int
    at: float
    call_id: str
    tool_name: str
    ok: bool
    output: str
    #: Typed details for front-ends (`ToolDetails`); None, and left out, for a tool
    #: whose result is its text alone.
    details: ToolDetails | None = attrs.field(default=None, metadata=_OMIT)


@attrs.frozen(kw_only=True)
class ToolProgress:
    """A running tool call reported progress (an MCP server's progress notification):
    ``progress`` so far, of ``total`` when the server knows it (0: unknown), and its
    ``message``."""

    KIND: ClassVar[str] = "tool_progress"
    seq: int
    at: float
    call_id: str
    tool_name: str
    progress: float
    total: float = attrs.field(default=0.0, metadata=_OMIT)
    message: str = attrs.field(default="", metadata=_OMIT)


@attrs.frozen(kw_only=True)
class ToolSkipped:
    KIND: ClassVar[str] = "tool_skipped"
    seq: int
    at: float
    call_id: str
    tool_name: str
    reason: str


@attrs.frozen(kw_only=True)
class Confirm:
    """A tool call waits for approval; answer it with ``POST …/confirm/{confirm_hash}``."""

    KIND: ClassVar[str] = "confirm"
    seq: int
    at: float
    confirm_hash: str
    tool_name: str
    args: dict[str, Any]
    restricted: bool = False
    #: The in-process sub-agent whose call this is (R80), ``sub-agent N/M: <objective>``,
    #: or the background sub-agents whose commands a follow-up offers (R84); empty for
    #: the task's own calls, and then left out of the JSON.
    subagent: str = attrs.field(default="", metadata={"omit_if_default": True})
    #: Rules the confirmation offers as choices of their own (R92); left out if none.
    offers: list[RuleOffer] = attrs.field(factory=list, metadata=_OMIT)
    #: What the call would do, typed (a file tool's diff: ``details.change``); left
    #: out when the arguments say it all.
    details: ToolDetails | None = attrs.field(default=None, metadata=_OMIT)


@attrs.frozen(kw_only=True)
class AskState:
    """What became of ask ``ask_id`` (its ``confirm``/``secret_ask`` ``confirm_hash``,
    issue 34); one event per change. ``waiting``: no listener holds it; ``shown`` on
    ``frontend`` (``acknowledged`` once that front-end drew it; ``late`` once it went
    unacknowledged past a few seconds); ``answered`` through ``frontend`` (``http`` for
    ``POST …/confirm``) with ``answer`` (``approved``, ``denied``, ``answered``,
    ``declined``, ``stopped``: never the answers themselves); ``withdrawn`` with
    ``why`` (``task_stopped``, ``listener_gone``, ``superseded``) and ``reason``:
    nobody decided it."""

    KIND: ClassVar[str] = "ask_state"
    seq: int
    at: float
    ask_id: str
    state: Literal["waiting", "shown", "answered", "withdrawn"]
    frontend: str = attrs.field(default="", metadata=_OMIT)
    #: The daemon that front-end is connected to, when not the task's (a cluster).
    daemon: str = attrs.field(default="", metadata=_OMIT)
    acknowledged: bool = attrs.field(default=False, metadata=_OMIT)
    late: bool = attrs.field(default=False, metadata=_OMIT)
    answer: str = attrs.field(default="", metadata=_OMIT)
    why: str = attrs.field(default="", metadata=_OMIT)
    reason: str = attrs.field(default="", metadata=_OMIT)


@attrs.frozen(kw_only=True)
class SecretAsk:
    """The ``store_secret`` tool waits for a value typed in a hidden field (R60).

    Answer with ``POST …/confirm/{confirm_hash}`` and ``{"answers": ["<value>"]}`` (or a
    ``reply`` frame). The event names the key only: the value never enters an event.
    """

    KIND: ClassVar[str] = "secret_ask"
    seq: int
    at: float
    confirm_hash: str
    key: str
    text: str
    #: The in-process sub-agent asking (R80); empty for the task's own calls.
    subagent: str = attrs.field(default="", metadata={"omit_if_default": True})


@attrs.frozen(kw_only=True)
class Pending:
    """The task parked (R11): it ended and waits for answers to ``questions``."""

    KIND: ClassVar[str] = "pending"
    seq: int
    at: float
    questions: list[Question]
    ask_id: str | None = None


@attrs.frozen(kw_only=True)
class SteerInjected:
    KIND: ClassVar[str] = "steer_injected"
    seq: int
    at: float
    text: str


@attrs.frozen(kw_only=True)
class LegStarted:
    KIND: ClassVar[str] = "leg_started"
    seq: int
    at: float
    job_id: str
    leg_id: str
    label: str
    queued: bool = False


@attrs.frozen(kw_only=True)
class LegReport:
    KIND: ClassVar[str] = "leg_report"
    seq: int
    at: float
    job_id: str
    leg_id: str
    text: str


@attrs.frozen(kw_only=True)
class SubagentLegEnd:
    """How a background sub-agent leg ended (R30): its report file, its error, the
    calls it could not run for want of approval, and its final answer."""

    report: str
    error: str = attrs.field(default="", metadata=_OMIT)
    needs: list[str] = attrs.field(factory=list, metadata=_OMIT)
    answer: str = attrs.field(default="", metadata=_OMIT)


@attrs.frozen(kw_only=True)
class LegFinished:
    KIND: ClassVar[str] = "leg_finished"
    seq: int
    at: float
    job_id: str
    leg_id: str
    status: Literal["finished", "failed", "canceled"]
    result: str
    #: A background sub-agent's ending, typed for the renderers (``result`` is the
    #: prose the model reads); None, and left out, for commands.
    subagent: SubagentLegEnd | None = attrs.field(default=None, metadata=_OMIT)


@attrs.frozen(kw_only=True)
class JobSettled:
    KIND: ClassVar[str] = "job_settled"
    seq: int
    at: float
    job_id: str
    followup_task: str | None = None


@attrs.frozen(kw_only=True)
class Canceled:
    """The task was cancelled; ``cause`` says whether its pending record was kept."""

    KIND: ClassVar[str] = "canceled"
    seq: int
    at: float
    cause: str
    kept: bool


@attrs.frozen(kw_only=True)
class Failed:
    """The task failed; ``error`` says why. ``kept``: its model kept failing (after
    the retries and any fallback), so the task was kept resumable in ``/pending``
    instead of ended; resuming it calls the model again."""

    KIND: ClassVar[str] = "failed"
    seq: int
    at: float
    error: str
    kept: bool = attrs.field(default=False, metadata=_OMIT)


@attrs.frozen(kw_only=True)
class TokenUsage:
    """Tokens model calls consumed, as the providers reported them (0: not reported),
    and their cost in USD from the configured prices (0: no price configured)."""

    input_tokens: int = 0
    output_tokens: int = 0
    #: The part of ``input_tokens`` served from the provider's prompt cache.
    cached_input_tokens: int = 0
    calls: int = 0
    cost_usd: float = 0.0

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cached_input_tokens=self.cached_input_tokens + other.cached_input_tokens,
            calls=self.calls + other.calls,
            cost_usd=self.cost_usd + other.cost_usd,
        )


@attrs.frozen(kw_only=True)
class AgentsMd:
    """The task's system prompt includes these ``AGENTS.md`` files (real paths, the
    repository root's first, the working directory's last); sent once per session for
    each file, so the person knows what the model was told besides their input."""

    KIND: ClassVar[str] = "agents_md"
    seq: int
    at: float
    paths: list[str] = attrs.field(factory=list)


@attrs.frozen(kw_only=True)
class Compacted:
    """The session's earlier conversation was compacted to fit the model's context:
    ``summarised`` exchanges folded into its summary, ``elided`` older tool results
    left out of this task's input. ``reason``: ``budget`` (it no longer fit),
    ``context_length`` (the provider refused the input as too long) or ``request``
    (``/compact``, the ``compact`` frame, ``POST …/compact``: then the event belongs
    to no task, its task hash empty, and the asker is also answered)."""

    KIND: ClassVar[str] = "compacted"
    seq: int
    at: float
    summarised: int
    elided: int = 0
    reason: str = "budget"
    #: The in-process sub-agent whose own input this was (R80; its older tool results
    #: elided on a context-length refusal), ``sub-agent N/M: <objective>``; empty for
    #: the task's own, and then left out of the JSON.
    subagent: str = attrs.field(default="", metadata={"omit_if_default": True})


@attrs.frozen(kw_only=True)
class Retrying:
    """A model call failed in a way worth another try (a rate limit, a server error, a
    dropped connection, a timeout) and is tried again in ``delay_s`` seconds (the
    provider's ``Retry-After`` when it sent one). ``attempt`` is the try that failed
    (1: the first). ``reason`` is short and for people (``rate limited``, ``server
    error 503``, ``timed out``); a fallback to the next model of ``[model] fallback``
    is one too, with no wait (``gpt-5 failed, trying claude-sonnet-4-5``). A cancel
    during the wait ends the task at once."""

    KIND: ClassVar[str] = "retrying"
    seq: int
    at: float
    reason: str
    attempt: int
    delay_s: float
    #: The in-process sub-agent whose model call this is (R80), ``sub-agent N/M:
    #: <objective>``; empty for the task's own, and then left out of the JSON.
    subagent: str = attrs.field(default="", metadata={"omit_if_default": True})


@attrs.frozen(kw_only=True)
class Workdir:
    """The session's working directory moved (a ``cd``, R86): ``path`` is its real path,
    where the session's commands run from now on; front-ends show it (the REPL's status
    bar follows it)."""

    KIND: ClassVar[str] = "workdir"
    seq: int
    at: float
    path: str


@attrs.frozen(kw_only=True)
class Done:
    """The task finished; ``text`` is its final reply, ``usage`` what its model calls
    consumed and ``session_usage`` the session's total in this daemon's life."""

    KIND: ClassVar[str] = "done"
    seq: int
    at: float
    text: str
    usage: TokenUsage = TokenUsage()
    session_usage: TokenUsage = TokenUsage()


Event = (
    TaskStarted
    | Text
    | ToolCall
    | ToolOutput
    | ToolResult
    | ToolProgress
    | ToolSkipped
    | Confirm
    | SecretAsk
    | AskState
    | Pending
    | SteerInjected
    | LegStarted
    | LegReport
    | LegFinished
    | JobSettled
    | AgentsMd
    | Compacted
    | Retrying
    | Workdir
    | Canceled
    | Failed
    | Done
)

EVENT_TYPES: tuple[type[Any], ...] = Event.__args__
