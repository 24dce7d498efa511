"""Text → command parsing and frame building: the REPL's logic with no prompt_toolkit.

Everything here is a pure function of its arguments, so the meaning of every slash
command and every dialog choice is tested without a terminal. The mapping from a dialog
choice to the exact `Reply` / `Cancel` frame lives here (SPEC §11, R40, R41, R47).
"""

from __future__ import annotations

import enum
import secrets
from typing import Final

import attrs

from agentrio.protocol import wording
from agentrio.protocol.causes import Cause
from agentrio.protocol.faithful import one_line
from agentrio.protocol.frames import Ask, BackgroundCancel, Cancel, Reply

__all__ = [
    "APPROVING",
    "BUILTIN_VERBS",
    "COMMANDS",
    "AllowedCmd",
    "CancelChoice",
    "Command",
    "CompactCmd",
    "ConfirmChoice",
    "DropPending",
    "Empty",
    "Expand",
    "ForgetAllowedCmd",
    "Help",
    "History",
    "HistoryRecordCmd",
    "Input",
    "Legs",
    "ListPendingCmd",
    "McpCmd",
    "NewSession",
    "Quit",
    "ResumePending",
    "SessionInfo",
    "Unknown",
    "UsageCmd",
    "background_cancel_frame",
    "cancel_frame",
    "complete_command",
    "confirm_choices",
    "confirm_reply",
    "help_text",
    "new_request_id",
    "new_session_id",
    "new_window_hash",
    "parse_line",
    "question_reply",
    "verbs_text",
]

#: Slash commands and their one-line help, in picker order.
COMMANDS: Final[tuple[tuple[str, str], ...]] = (
    ("/pending", "list resumable tasks; /pending N resumes, /pending drop N drops one"),
    ("/legs", "list the session's background legs"),
    ("/allowed", "commands you chose Always allow for; /allowed forget N (or all) removes"),
    ("/history", "finished tasks; /history WORD|ID filters, /history show N opens a record"),
    ("/expand", "print the last folded output (… N more lines) in full"),
    ("/mcp", "show the MCP servers ([mcp.NAME]) and their states"),
    ("/model", "show the session's model and the choices; /model NAME uses NAME from now on"),
    ("/compact", "fold the session's earlier exchanges into its summary now (smaller input)"),
    ("/usage", "tokens (and cost, when priced) of each finished task and of the session"),
    ("/session", "show the session id, window and daemon"),
    ("/new", "start a new session"),
    ("/help", "show this help"),
    ("/quit", "leave the REPL (running tasks are kept in /pending)"),
)

#: What the built-in offline model understands, typed as a message (its help reply,
#: ``HELP_TEXT`` in engine/models/builtin.py, says the same; a test keeps them in step).
BUILTIN_VERBS: Final[tuple[tuple[str, str], ...]] = (
    ("run: CMD", "run a command (read-only ones at once, others ask first)"),
    ("runs: CMD ;; CMD", "run several commands in one model turn (see Allow this turn)"),
    ("ask: Q options: a, b", "ask you a question with options (or Q | a, b); ;; adds one"),
    ("bg: CMD ;; CMD", "run commands as background legs; their reports come back"),
    ("sub: OBJ ;; OBJ", "start background sub-agents, each on an objective"),
    ("subs: OBJ ;; OBJ", "run sub-agents now, inside this task, and wait for them"),
    ("secret: KEY", "ask you for a secret (hidden) and store it"),
    ("history: WORD", "search the finished tasks (history: alone lists them)"),
    ("fail: MESSAGE", "fail with MESSAGE, to see how a failed task looks"),
)


# ---------------------------------------------------------------- ids


def new_session_id() -> str:
    """A fresh REPL session id: origin ``cli-`` plus 8 hex (SPEC §0)."""
    return "cli-" + secrets.token_hex(4)


def new_window_hash() -> str:
    """A random window hash, one per REPL process (R5)."""
    return "w" + secrets.token_hex(8)


def new_request_id() -> str:
    return "r" + secrets.token_hex(6)


# ---------------------------------------------------------------- commands


@attrs.frozen
class Empty:
    """A blank line: nothing to do."""


@attrs.frozen
class Input:
    """Text for the agent: a new run, or a steer when a run of this window is active."""

    text: str


@attrs.frozen
class ListPendingCmd:
    pass


@attrs.frozen
class ResumePending:
    """``/pending N`` or ``/pending HASH``: ``ref`` is a 1-based index or a hash prefix."""

    ref: str


@attrs.frozen
class DropPending:
    ref: str


@attrs.frozen
class Legs:
    pass


@attrs.frozen
class AllowedCmd:
    """``/allowed``: list the home's remembered rules (R76, R92)."""


@attrs.frozen
class ForgetAllowedCmd:
    """``/allowed forget N``: ``ref`` is a 1-based index of the last list, a rule id,
    or ``all``."""

    ref: str


@attrs.frozen
class History:
    keyword: str = ""


@attrs.frozen
class ModelCmd:
    """``/model``: show the session's model; ``/model NAME``: choose ``[models.NAME]``
    (``default``: back to ``[model]``) for the session's next tasks (issue 31)."""

    name: str = ""


@attrs.frozen
class CompactCmd:
    """``/compact``: compact the session's conversation now (issue 31 item 3)."""


@attrs.frozen
class UsageCmd:
    """``/usage``: each finished task's tokens and the session's (issue 31 item 7)."""


@attrs.frozen
class HistoryRecordCmd:
    """``/history show N|ID``: open one finished task's whole record."""

    ref: str


@attrs.frozen
class Expand:
    """``/expand``: print the last output shown folded, in full (issue 33 item 6)."""


@attrs.frozen
class SessionInfo:
    pass


@attrs.frozen
class McpCmd:
    pass


@attrs.frozen
class NewSession:
    pass


@attrs.frozen
class Help:
    pass


@attrs.frozen
class Quit:
    pass


@attrs.frozen
class Unknown:
    """A line starting with ``/`` that is no command, or a command used wrongly."""

    message: str


Command = (
    Empty
    | Input
    | ListPendingCmd
    | ResumePending
    | DropPending
    | Legs
    | AllowedCmd
    | ForgetAllowedCmd
    | History
    | ModelCmd
    | UsageCmd
    | CompactCmd
    | HistoryRecordCmd
    | Expand
    | SessionInfo
    | McpCmd
    | NewSession
    | Help
    | Quit
    | Unknown
)


def parse_line(line: str) -> Command:
    """Parse one submitted line.

    A line starting with ``//`` sends the rest (starting with one ``/``) as input, so a
    message may begin with a slash. Commands take at most the arguments shown in
    `COMMANDS`; extra words are an `Unknown` with a usage message, never silently dropped.
    """
    text = line.strip()
    if not text:
        return Empty()
    if text.startswith("//"):
        return Input(text[1:])
    if not text.startswith("/"):
        return Input(text)
    name, _, rest = text.partition(" ")
    args = rest.split()
    match name:
        case "/pending":
            if not args:
                return ListPendingCmd()
            if args[0] == "drop":
                if len(args) != 2:
                    return Unknown("usage: /pending drop N")
                return DropPending(args[1])
            if len(args) != 1:
                return Unknown("usage: /pending [N | drop N]")
            return ResumePending(args[0])
        case "/allowed":
            if not args:
                return AllowedCmd()
            if args[0] == "forget" and len(args) == 2:
                return ForgetAllowedCmd(args[1])
            return Unknown("usage: /allowed [forget N | forget all]")
        case "/legs" | "/session" | "/mcp" | "/new" | "/help" | "/quit" | "/expand" | "/usage" if (
            args
        ):
            return Unknown(f"usage: {name} (takes no arguments)")
        case "/legs":
            return Legs()
        case "/session":
            return SessionInfo()
        case "/usage":
            return UsageCmd()
        case "/compact":
            return CompactCmd()
        case "/expand":
            return Expand()
        case "/mcp":
            return McpCmd()
        case "/new":
            return NewSession()
        case "/help":
            return Help()
        case "/quit" | "/exit":
            return Quit()
        case "/history":
            words = rest.split()
            if words[:1] == ["show"]:
                return HistoryRecordCmd(words[1] if len(words) > 1 else "")
            return History(rest.strip())
        case "/model":
            if len(args) > 1:
                return Unknown("usage: /model [NAME]")
            return ModelCmd(args[0] if args else "")
    return Unknown(f"unknown command {name} (type /help; start with // to send a slash)")


def complete_command(text: str) -> list[tuple[str, str]]:
    """Commands (name, help) the ``/`` picker offers for ``text`` typed so far.

    Only a first word starting with ``/`` completes; once a space is typed, the picker
    has nothing more to offer.
    """
    if not text.startswith("/") or " " in text or text.startswith("//"):
        return []
    return [(name, doc) for name, doc in COMMANDS if name.startswith(text)]


def help_text() -> str:
    width = max(len(name) for name, _ in COMMANDS)
    lines = [f"  {name.ljust(width)}  {doc}" for name, doc in COMMANDS]
    keys = [
        "",
        "  Enter sends; text typed while a task runs steers it (injected at its next turn).",
        "  Alt+Enter or Ctrl+J: new line (the message is sent whole with Enter).",
        "  Esc: close the picker / notice, stop the running task (asks first once it has",
        f"  shown output: {wording.ESC_KEEP_RUNNING} / {wording.STOP_KEEP} /",
        f"  {wording.STOP_DISCARD}), clear the input, or open the background-leg menu.",
        "  Esc in a confirmation or question opens the same stop menu; it never answers.",
        "  Ctrl+C stops the running task at once; on an empty line, twice quits.",
        "  Ctrl+R searches earlier inputs; Ctrl+D on an empty line quits.",
        "  Quitting keeps running tasks: they wait in /pending.",
    ]
    return "\n".join(["Commands:", *lines, *keys])


def verbs_text() -> str:
    """The `/help` section on the built-in model's verbs."""
    width = max(len(verb) for verb, _ in BUILTIN_VERBS)
    lines = [f"  {verb.ljust(width)}  {doc}" for verb, doc in BUILTIN_VERBS]
    return "\n".join(["", "Built-in model verbs (type them as a message):", *lines])


# ---------------------------------------------------------------- frames


class ConfirmChoice(enum.Enum):
    """The answers of a tool confirmation (SPEC §11), in dialog order: the six fixed
    ones, then ``RULE`` once per rule the ask offers (R92; its label is
    `agentrio.protocol.wording.offer_label` of the offer)."""

    APPROVE = wording.APPROVE
    DENY = wording.DENY
    ALWAYS = wording.ALWAYS_ALLOW
    TURN = wording.ALLOW_TURN
    CANCEL_TASK = wording.STOP_DISCARD
    ABORT_TASK = wording.STOP_KEEP
    RULE = wording.ALWAYS_ALLOW_RULE


#: The choices that approve the call (and so carry the system password, R7).
APPROVING: Final = frozenset(
    {ConfirmChoice.APPROVE, ConfirmChoice.ALWAYS, ConfirmChoice.TURN, ConfirmChoice.RULE}
)


def confirm_choices(ask: Ask) -> list[tuple[ConfirmChoice, str, str]]:
    """The dialog's choices for ``ask``: each choice, its label and the offered rule's
    kind ("" for the fixed ones). Offered rules come after the six fixed choices, so
    the number of each fixed choice never changes with what is offered -- except for a
    file change, which has four fixed choices and its edits rule."""
    # A file change (issue 32) offers its edits rule only: "this exact command" and
    # "Allow this turn" (plain programs) mean nothing for it.
    change = ask.details is not None and ask.details.change is not None
    skipped = {ConfirmChoice.RULE} | (
        {ConfirmChoice.ALWAYS, ConfirmChoice.TURN} if change else set()
    )
    fixed = [(c, c.value, "") for c in ConfirmChoice if c not in skipped]
    offered = [
        (ConfirmChoice.RULE, wording.offer_label(one_line(o.covers)), o.kind) for o in ask.offers
    ]
    return fixed + offered


def confirm_reply(
    ask_id: str,
    choice: ConfirmChoice,
    *,
    reason: str = "",
    password: str | None = None,
    rule: str = "",
) -> Reply:
    """The exact `Reply` for a confirmation choice (``rule``: the kind of the offered
    rule chosen, with `ConfirmChoice.RULE`).

    ``password`` rides along with the approving choices only (R7): a deny, cancel or
    abort never sends the system password anywhere.
    """
    match choice:
        case ConfirmChoice.APPROVE:
            return Reply(id=ask_id, approve=True, password=password)
        case ConfirmChoice.DENY:
            return Reply(id=ask_id, approve=False, reason=reason)
        case ConfirmChoice.ALWAYS:
            return Reply(id=ask_id, approve=True, remember=True, password=password)
        case ConfirmChoice.TURN:
            return Reply(id=ask_id, approve=True, allow_turn=True, password=password)
        case ConfirmChoice.CANCEL_TASK:
            return Reply(id=ask_id, stop=Cause.USER_CANCELED)
        case ConfirmChoice.ABORT_TASK:
            return Reply(id=ask_id, stop=Cause.USER_ABORTED)
        case ConfirmChoice.RULE:
            return Reply(id=ask_id, approve=True, rule=rule, password=password)


def question_reply(ask_id: str, answers: list[str]) -> Reply:
    """Answers of an ``ask_user``/``secret`` ask, one string per question in order."""
    return Reply(id=ask_id, answers=list(answers))


class CancelChoice(enum.Enum):
    """The Esc popup of a run that has shown output (R47)."""

    NO = wording.ESC_KEEP_RUNNING
    PAUSE = wording.STOP_KEEP
    YES = wording.STOP_DISCARD


def cancel_frame(task_hash: str, choice: CancelChoice) -> Cancel | None:
    """``Pause`` → cause ``paused`` (kept, R41); ``Yes`` → ``user_canceled`` (R40)."""
    match choice:
        case CancelChoice.NO:
            return None
        case CancelChoice.PAUSE:
            return Cancel(task_hash=task_hash, cause=Cause.PAUSED)
        case CancelChoice.YES:
            return Cancel(task_hash=task_hash, cause=Cause.USER_CANCELED)


def background_cancel_frame(session_id: str, leg_id: str) -> BackgroundCancel:
    """Cancel one leg, or every leg of the session with ``leg_id="all"`` (R44)."""
    return BackgroundCancel(session_id=session_id, leg_id=leg_id)
