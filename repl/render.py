"""Events → short styled lines for the transcript (pure; no prompt_toolkit import).

A line is ``(style, text)``: a prompt_toolkit style class string and one line of text
with no newline — or, for a line of rendered Markdown (`repl.markdown`), ``("",
fragments)`` with the line's styled pieces. Tool calls and results are compact:
arguments on one clipped line, long output folded to its first lines plus a count of
what was left out, so a big ``cat`` never floods the terminal (the full output stays
in the task's history). A background tool's result is written for the model (where
its reports will arrive); the person sees one line naming the legs it started.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

from protocol import wording
from protocol.events import (
    Canceled,
    Confirm,
    Done,
    Event,
    Failed,
    JobSettled,
    LegFinished,
    LegReport,
    LegStarted,
    Pending,
    SecretAsk,
    SteerInjected,
    TaskStarted,
    Text,
    ToolCall,
    ToolResult,
    ToolSkipped,
)
from repl.faithful import line_pieces
from repl.markdown import Fragments

__all__ = [
    "FOLD_LINES",
    "LINE_WIDTH",
    "Line",
    "clip",
    "fold",
    "format_args",
    "line_fragments",
    "line_text",
    "markdown_line",
    "render_done_status",
    "render_event",
]

Line = tuple[str, str | Fragments]

#: Lines of a tool result or report shown before folding the rest.
FOLD_LINES: Final = 8
#: Characters of one shown line before it is clipped.
LINE_WIDTH: Final = 200
#: Tools whose result tells the model where its legs' reports will arrive.
BACKGROUND_TOOLS: Final = frozenset({"background_command", "background_subagents"})
_LEG_RE: Final = re.compile(r"\b(?:cmd|sub)_[0-9a-f]{8}\b")


def markdown_line(fragments: Fragments) -> Line:
    """A rendered Markdown line; a line with no styles stays plain text."""
    if all(not style for style, _ in fragments):
        return ("", "".join(text for _, text in fragments))
    return ("", fragments)


def line_text(line: Line) -> str:
    """What ``line`` shows, without styles."""
    text = line[1]
    return text if isinstance(text, str) else "".join(piece for _, piece in text)


def line_fragments(lines: list[Line]) -> list[tuple[str, str]]:
    """prompt_toolkit fragments of ``lines``, each ended by a newline."""
    fragments: list[tuple[str, str]] = []
    for style, text in lines:
        fragments += [(style, text)] if isinstance(text, str) else list(text)
        fragments.append(("", "\n"))
    return fragments


def clip(text: str, width: int = LINE_WIDTH) -> str:
    """One line of at most ``width`` characters (``…`` marks a cut)."""
    text = text.replace("\t", "    ")
    return text if len(text) <= width else text[: width - 1] + "…"


def fold(text: str, *, style: str, indent: str = "  ", limit: int = FOLD_LINES) -> list[Line]:
    """The first ``limit`` lines of ``text`` (clipped), then ``… N more lines (folded)``."""
    lines = text.rstrip("\n").split("\n") if text.strip() else []
    shown: list[Line] = [(style, indent + clip(line)) for line in lines[:limit]]
    if len(lines) > limit:
        shown.append(("class:dim", f"{indent}… {len(lines) - limit} more lines (folded)"))
    return shown


def format_args(args: dict[str, Any], width: int = LINE_WIDTH) -> str:
    """Tool arguments on one line: a lone ``command`` shows as itself, else as JSON.

    Newlines, control, invisible and bidi characters show as escapes (`repl.faithful`,
    as in the confirmation dialog, R77), so the transcript never shows a two-line
    command as one; a cut says how much was left out."""
    if set(args) == {"command"} and isinstance(args["command"], str):
        text = args["command"]
    else:
        text = json.dumps(args, ensure_ascii=False, separators=(", ", ": "))
    shown = "".join(piece.text for piece in line_pieces(text, escape_newlines=True))
    if len(shown) <= width:
        return shown
    tail = f"… (+{len(shown) - (width - 16):,} characters)"
    return shown[: width - 16] + tail


def render_event(event: Event) -> list[Line]:
    """Lines for one event other than streamed `Text` (the caller streams that).

    `Confirm` renders nothing: the ``ask`` frame that goes with it opens the dialog.
    `Done` renders its final text; the caller skips it when the text already streamed.
    """
    match event:
        case TaskStarted(resumed_from=str(previous)):
            return [("class:dim", f"↻ resumed from task {previous[:8]}")]
        case TaskStarted():
            return []
        case Text(text=text):
            return [("", clip(line)) for line in text.rstrip("\n").split("\n")]
        case ToolCall(tool_name=name, args=args):
            return [("class:tool", f"⚙ {name}: {format_args(args)}")]
        case ToolResult(ok=True, output=output, tool_name=name) if name in BACKGROUND_TOOLS:
            legs = list(dict.fromkeys(_LEG_RE.findall(output)))
            if legs:
                started = f"{len(legs)} background leg{'s' if len(legs) > 1 else ''} started"
                return [("class:leg", f"  ⧗ {started}: {', '.join(legs)} — reports follow here")]
            return [("class:ok", f"  ✓ {name}"), *fold(output, style="class:result", indent="    ")]
        case ToolResult(ok=ok, output=output, tool_name=name):
            mark = ("class:ok", f"  ✓ {name}") if ok else ("class:error", f"  ✗ {name} failed")
            return [mark, *fold(output, style="class:result", indent="    ")]
        case ToolSkipped(tool_name=name, reason=reason):
            return [("class:warn", f"  ⊘ {name} not run: {clip(reason)}")]
        case Confirm() | SecretAsk():
            return []
        case Pending(questions=questions):
            asked = "; ".join(q.text for q in questions) or "questions"
            return [("class:warn", f"? waiting for an answer: {clip(asked)} — answer via /pending")]
        case SteerInjected(text=text):
            return [("class:dim", f"↪ steer applied: {clip(text)}")]
        case LegStarted(leg_id=leg, label=label, queued=queued):
            verb = "queued" if queued else "started"
            return [("class:leg", f"⧗ background {leg} {verb}: {clip(label)}")]
        case LegReport(leg_id=leg, text=text):
            return [("class:leg", f"⧗ report from {leg}:"), *fold(text, style="class:result")]
        case LegFinished(leg_id=leg, status=status, result=result):
            style = "class:leg" if status == "finished" else "class:warn"
            return [(style, f"⧗ background {leg} {status}"), *fold(result, style="class:result")]
        case JobSettled(job_id=job, followup_task=followup):
            tail = f"; follow-up task {followup[:8]}" if followup else ""
            return [("class:dim", f"⧗ {job} settled{tail}")]
        case Canceled(cause=cause):
            return [("class:warn", wording.ended_line(cause))]
        case Failed(error=error):
            return [("class:error", f"✗ failed: {clip(error)}")]
        case Done(text=text):
            return [("", clip(line)) for line in text.rstrip("\n").split("\n")] if text else []


def render_done_status(status: str, error: str) -> list[Line]:
    """The closing line of a run from its ``done`` frame status."""
    match status:
        case "finished":
            return []
        case "failed":
            return [("class:error", wording.ended_line(status, reason=clip(error)))]
        case "canceled" | "paused" | "parked" | "aborted":
            return [("class:warn", wording.ended_line(status, reason=clip(error)))]
    return [("class:dim", f"task ended: {status} {error}".rstrip())]
