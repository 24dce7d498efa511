"""The words every front-end shows for the same action, in one place.

A person who learns "Stop and discard" in the REPL must read the same words on the web
page and in the docs, and each word must say what the action does to the task: the
confirmation's ``cancel_task`` deletes the pending task, its ``abort_task`` (like Esc's
pause) stops it and keeps it resumable. The REPL imports these names; the web page
(``engine/server/static/app.js``) spells the same strings, and a test holds the two
equal.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from agentrio.protocol.stops import StopReceipt

__all__ = [
    "ALLOW_TURN",
    "ALLOW_TURN_BUTTON",
    "ALWAYS_ALLOW",
    "ALWAYS_ALLOW_RULE",
    "APPROVE",
    "DENY",
    "ESC_KEEP_RUNNING",
    "PASSWORD_REPL_ONLY",
    "RESTRICTED_ELSEWHERE",
    "STOP_DISCARD",
    "STOP_KEEP",
    "agents_md_line",
    "compacted_line",
    "confirm_title",
    "denied",
    "ended_line",
    "offer_label",
    "plural",
    "progress_text",
    "retrying_line",
    "stop_receipt_line",
    "usage_line",
    "workdir_line",
]

#: Run the proposed call once.
APPROVE: Final = "Approve"
#: Refuse the call; the reason goes to the model.
DENY: Final = "Deny with reason"
#: Remember this exact command, in the directory shown (its ``cwd``), for the home,
#: across restarts (R76, R92; issue 29 finding 4).
ALWAYS_ALLOW: Final = "Always allow this exact command in this directory"
#: The start of each rule a confirmation offers as a choice of its own (R92): the
#: choice reads "Always allow <covers>" (`offer_label`), after the six fixed choices,
#: so a number learned for one of those never picks a rule.
ALWAYS_ALLOW_RULE: Final = "Always allow"
#: Approve this call and, for the rest of this model turn, what the words say: plain
#: programs, never a shell, an interpreter given code, sudo or a restricted path
#: (engine/tools/turn_scope.py holds the engine to it; issue 29 finding 6).
ALLOW_TURN: Final = (
    "Allow this turn: plain programs only (no shell, interpreter code, sudo or restricted path)"
)
#: "Allow this turn" where a choice's label is short (a Discord button holds 80
#: characters): the chat bots write `ALLOW_TURN` in full in the confirmation, above
#: its buttons, and this button names it, as an offered rule's button does.
ALLOW_TURN_BUTTON: Final = "Allow this turn (plain programs only, above)"
#: Who a denied call's result names (`denied`): the person, or a policy answering
#: for them (``agentrio exec``'s ``--allow`` rules), so the model knows which.
DENIED_BY: Final = {"person": "denied by the user", "policy": "denied by the exec policy"}


def denied(reason: str, by: str = "person") -> str:
    """What the model reads of a denied confirmation: ``denied by the user: <reason>``,
    or ``denied by the exec policy: <reason>`` when a policy answered for the person."""
    head = DENIED_BY.get(by, DENIED_BY["person"])
    return f"{head}: {reason}" if reason else head


#: Stop the task and delete it (cause ``user_canceled``, R40).
STOP_DISCARD: Final = "Stop and discard"
#: Stop the task and keep it resumable in /pending (cause ``paused``/``aborted``, R41).
STOP_KEEP: Final = "Stop, keep to resume"
#: Why a restricted-path confirmation (R7) offers no approving choice on the web page
#: or in a chat: the system password is asked only in the REPL (docs/frontends.md,
#: "Every decision on every front-end").
RESTRICTED_ELSEWHERE: Final = (
    "restricted path: the system password is asked only in the REPL; "
    "run this from the REPL (agentrio) instead"
)
#: Why the daemon refuses a reply carrying a ``password`` (R7) that did not come from
#: the REPL (``POST …/confirm``, a connection whose ``hello`` names another client):
#: the confirmation stays open, to be answered again without one.
PASSWORD_REPL_ONLY: Final = (
    "the system password is taken only from the REPL (agentrio): this reply was refused "
    "and the confirmation is still open; answer it without a password, or from the REPL"
)
#: The harmless choice of the Esc popup.
ESC_KEEP_RUNNING: Final = "Keep running"


def plural(count: int, word: str, many: str = "") -> str:
    """``1 question``, ``2 questions``: a count and its noun, singular or plural
    (``many`` when the plural is not ``word + "s"``)."""
    return f"{count} {word if count == 1 else (many or word + 's')}"


def offer_label(covers: str) -> str:
    """The choice of an offered rule: ``Always allow `npm test …` (any further
    arguments) in /home/ada/app`` (its ``covers`` line, as the daemon wrote it)."""
    return f"{ALWAYS_ALLOW_RULE} {covers}"


def progress_text(done: float, total: float, message: str) -> str:
    """``3/10 (30%) fetching page 3``: a call's progress as its server reported it
    (``total`` 0: not known)."""
    count = f"{done:g}/{total:g} ({done / total:.0%})" if total > 0 else f"{done:g}"
    return f"{count} {message}".rstrip()


def confirm_title(tool_name: str, *, restricted: bool = False) -> str:
    """The first line of a confirmation, the same in every front-end."""
    tail = " (restricted path: needs the system password)" if restricted else ""
    return f"Allow {tool_name}?{tail}"


def ended_line(status: str, *, reason: str = "") -> str:
    """How a run that did not finish ended, by what it did to the task.

    ``status`` is a ``done`` status or a ``canceled`` event's cause, or ``failed_kept``
    for a ``failed`` event with ``kept`` (its model kept failing). Every kept status
    says where the task waits; only ``user_canceled``/``canceled`` says it is gone.
    """
    why = f": {reason}" if reason else ""
    match status:
        case "user_canceled" | "canceled":
            return "✗ stopped and discarded"
        case "paused":
            return "‖ paused — kept: resume it with /pending"
        case "aborted" | "user_aborted":
            return f"‖ stopped{why} — kept: resume it with /pending"
        case "disconnected":
            return "‖ stopped (window closed) — kept: resume it with /pending"
        case "parked":
            return "? waits for answers — answer it with /pending"
        case "failed":
            return f"✗ failed{why or ': unknown error'}"
        case "failed_kept":  # the model kept failing: kept resumable (issue 31 item 6)
            return f"✗ failed{why or ': unknown error'} — kept: resume it with /pending"
        case "shutdown":
            return "‖ stopped (daemon shut down) — kept: resume it with /pending"
    return f"‖ stopped ({status}){why} — kept: resume it with /pending"


def stop_receipt_line(receipt: StopReceipt) -> str:
    """What a cancel or pause ended, on one line under the run's end line (issue 34):
    ``■ ended with it: 2 background legs (cmd_…, sub_…), 1 sub-agent, 1 ask withdrawn,
    2 process groups — nothing left running``; a leg the stop left running and a
    process group still alive (R48 broken) are said too."""
    parts: list[str] = []
    if receipt.legs:
        ids = ", ".join(leg.leg_id for leg in receipt.legs)
        parts.append(f"{plural(len(receipt.legs), 'background leg')} ({ids})")
    if receipt.subagents:
        parts.append(plural(len(receipt.subagents), "sub-agent"))
    if receipt.mcp_calls:
        parts.append(plural(len(receipt.mcp_calls), "MCP call"))
    if receipt.asks_withdrawn:
        parts.append(f"{plural(len(receipt.asks_withdrawn), 'ask')} withdrawn")
    if receipt.process_groups:
        parts.append(plural(len(receipt.process_groups), "process group"))
    line = f"■ ended with it: {', '.join(parts)}" if parts else "■ nothing else was running"
    if receipt.left_running:
        ids = ", ".join(leg.leg_id for leg in receipt.left_running)
        line += f"; left running: {ids}"
    if receipt.still_alive:
        groups = ", ".join(str(group) for group in receipt.still_alive)
        return f"{line} — still alive: process group {groups}"
    return f"{line} — nothing left running" if parts else line


def agents_md_line(paths: Sequence[str]) -> str:
    """An ``agents_md`` event as every front-end says it."""
    return "≡ instructions read from " + ", ".join(paths)


def compacted_line(summarised: int, elided: int, subagent: str = "") -> str:
    """A ``compacted`` event as every front-end says it (an in-process sub-agent's
    named first, `for_subagent`)."""
    parts = []
    if summarised:
        parts.append(f"{plural(summarised, 'earlier exchange')} summarised")
    if elided:
        parts.append(f"{plural(elided, 'older tool result')} left out")
    return for_subagent(
        subagent, "⟲ ", "conversation compacted: " + (", ".join(parts) or "nothing to fold")
    )


def for_subagent(subagent: str, mark: str, line: str) -> str:
    """``mark line``, or ``mark [sub-agent N/M: <objective>] line`` when an in-process
    sub-agent's model call is the one it is about (R80)."""
    return f"{mark}[{subagent}] {line}" if subagent else f"{mark}{line}"


def workdir_line(path: str) -> str:
    """A ``workdir`` event (the session's directory moved) as every front-end says it."""
    return f"→ working directory: {path}"


def usage_line(input_tokens: int, cached: int, output_tokens: int, cost_usd: float) -> str:
    """A task's or session's token usage as every front-end says it."""
    cached_part = f" ({cached} cached)" if cached else ""
    cost = f" · ${cost_usd:.4f}" if cost_usd else ""
    return f"tokens: {input_tokens} in{cached_part}, {output_tokens} out{cost}"


def retrying_line(reason: str, delay_s: float, subagent: str = "") -> str:
    """A ``retrying`` event as every front-end says it: ``↻ rate limited, retrying in
    4 s``, the wait rounded up to the second (never promising a retry sooner than it
    comes), ``<1 s`` under a second; a fallback to another model, which does not wait,
    is its reason alone. An in-process sub-agent's is named first (`for_subagent`)."""
    if delay_s <= 0:
        return for_subagent(subagent, "↻ ", reason)
    shown = "<1" if delay_s < 1 else str(math.ceil(delay_s))
    return for_subagent(subagent, "↻ ", f"{reason}, retrying in {shown} s")
