"""Events → short styled lines for the transcript (pure; no prompt_toolkit import).

A line is ``(style, text)``: a prompt_toolkit style class string and one line of text
with no newline — or, for a line of rendered Markdown (`agentrio.repl.markdown`), ``("",
fragments)`` with the line's styled pieces. Tool calls and results are compact:
arguments on one clipped line, long output folded to its first lines plus a count of
what was left out, so a big ``cat`` never floods the terminal (the full output stays
in the task's history). A tool call names what it does in words where the tool is
known (`call_lines`). A background tool's result is written for the model (where its
reports will arrive); the person already saw each leg start (a `LegStarted` notice),
so it shows nothing. A ``subagents`` result folds to one line per sub-agent.
"""

from __future__ import annotations

import json
import os
from typing import Any, Final

from agentrio.protocol import wording
from agentrio.protocol.events import (
    AgentsMd,
    AskState,
    Canceled,
    Compacted,
    Confirm,
    Done,
    Event,
    Failed,
    JobSettled,
    LegFinished,
    LegReport,
    LegStarted,
    Pending,
    Retrying,
    SecretAsk,
    SteerInjected,
    SubagentEnd,
    SubagentLegEnd,
    TaskStarted,
    Text,
    ToolCall,
    ToolDetails,
    ToolOutput,
    ToolProgress,
    ToolResult,
    ToolSkipped,
    Workdir,
)
from agentrio.protocol.faithful import line_pieces
from agentrio.repl.markdown import Fragments, escaped, render_markdown

__all__ = [
    "FOLDED",
    "FOLD_LINES",
    "LINE_WIDTH",
    "Line",
    "clip",
    "fold",
    "folded_text",
    "format_args",
    "line_fragments",
    "line_text",
    "markdown_line",
    "output_line",
    "render_done_status",
    "render_event",
    "unfold",
]

Line = tuple[str, str | Fragments]

#: Lines of a tool result or report shown before folding the rest.
FOLD_LINES: Final = 8
#: How a fold says where its lines are (``/expand`` prints the last fold in full).
FOLDED: Final = "(folded: /expand shows them)"
#: Characters of one shown line before it is clipped.
LINE_WIDTH: Final = 200


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


def output_line(style: str, text: str) -> Line:
    """One line of a command's (or a report's) output as the transcript prints it:
    control, invisible and bidi characters as escapes in their own style, like a
    command's (issue 29 finding 10: a backspace, ``\\r`` or an ANSI sequence in a file
    must not repaint ``3 failed`` into ``passed``). Tabs were expanded by `clip`."""
    fragments = escaped([(style, text)])
    if len(fragments) == 1 and fragments[0][0] == style:
        return (style, fragments[0][1])
    return ("", fragments or ((style, ""),))


def fold(text: str, *, style: str, indent: str = "  ", limit: int = FOLD_LINES) -> list[Line]:
    """The first ``limit`` lines of ``text`` (clipped, escaped: `output_line`), then
    ``… N more lines (folded)``."""
    lines = text.rstrip("\n").split("\n") if text.strip() else []
    shown: list[Line] = [output_line(style, indent + clip(line)) for line in lines[:limit]]
    if len(lines) > limit:
        shown.append(("class:dim", f"{indent}… {len(lines) - limit} more lines {FOLDED}"))
    return shown


def folded_text(event: Event) -> str | None:
    """The whole text ``event`` showed folded (`fold`), for ``/expand``; None when it
    showed all of it."""
    match event:
        case ToolResult(output=text, details=None) | LegReport(text=text):
            pass
        case LegFinished(result=text, subagent=None):
            pass
        case _:
            return None
    return text if len(text.rstrip("\n").split("\n")) > FOLD_LINES else None


def unfold(text: str, indent: str = "    ") -> list[Line]:
    """``text`` in full, each line clipped and escaped as `fold` shows its first."""
    lines = text.rstrip("\n").split("\n")
    return [output_line("class:result", indent + clip(line)) for line in lines]


def format_args(args: dict[str, Any], width: int = LINE_WIDTH) -> str:
    """Tool arguments on one line: a lone ``command`` shows as itself, else as JSON.

    Newlines, control, invisible and bidi characters show as escapes (`agentrio.protocol.faithful`,
    as in the confirmation dialog, R77), so the transcript never shows a two-line
    command as one; a cut says how much was left out."""
    if set(args) == {"command"} and isinstance(args["command"], str):
        return _faithful(args["command"], width)
    return _faithful(_json(args), width)


def _faithful(text: str, width: int = LINE_WIDTH) -> str:
    """``text`` on one line, escaped (`agentrio.protocol.faithful`), cut at ``width``
    with a count."""
    shown = "".join(piece.text for piece in line_pieces(text, escape_newlines=True))
    if len(shown) <= width:
        return shown
    tail = f"… (+{len(shown) - (width - 16):,} characters)"
    return shown[: width - 16] + tail


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


def call_lines(name: str, args: dict[str, Any]) -> list[Line]:
    """A tool call as the person reads it: ``⚙ tool: what it does``.

    The tools a model calls most show their arguments in words — a question with its
    options, each background command or sub-agent objective on a line of its own, a
    secret's key, a history search — escaped like `format_args`. Arguments they do
    not know stay visible as JSON after them; only a background call's ``objective``
    and ``next``, the model's notes to its own follow-up task, are left out (the
    confirmation shows them). Any other tool, or arguments of unexpected shape, show
    as `format_args`."""
    readable = _readable(name, args)
    if readable is None:
        return [("class:tool", f"⚙ {name}: {format_args(args)}")]
    items, used = readable
    rest = {key: value for key, value in args.items() if key not in used}
    tail = f" {_faithful(_json(rest))}" if rest else ""
    if len(items) == 1:
        return [("class:tool", f"⚙ {name}: {_faithful(items[0])}{tail}")]
    return [
        ("class:tool", f"⚙ {name}:{tail}"),
        *[("class:tool", f"    {_faithful(item)}") for item in items],
    ]


def _strings(value: object) -> list[str] | None:
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return value
    return None


def _readable(name: str, args: dict[str, Any]) -> tuple[list[str], set[str]] | None:
    """What `call_lines` shows of a known tool's call: its items and the keys they
    say; None when the arguments are not what the tool takes."""
    match name:
        case "background_command" if commands := _strings(args.get("commands")):
            return commands, {"commands", "objective", "next"}
        case "background_subagents" if objectives := _strings(args.get("objectives")):
            return objectives, {"objectives", "objective", "next"}
        case "subagents" if objectives := _strings(args.get("objectives")):
            return objectives, {"objectives"}
        case "store_secret" if isinstance(key := args.get("key"), str):
            return [key], {"key"}
        case "chat_history" if args.get("mode") == "search" and isinstance(
            keyword := args.get("keyword"), str
        ):
            return [f"search {_json(keyword)}"], {"mode", "keyword"}
        case "chat_history" if args.get("mode") == "read" and isinstance(
            task := args.get("task_hash"), str
        ):
            return [f"read task {task}"], {"mode", "task_hash"}
        case "chat_history" if args.get("mode", "list") == "list":
            return ["list"], {"mode"}
        case "ask_user" if isinstance(questions := args.get("questions"), list) and questions:
            items = [_question(q) for q in questions]
            shown = [item for item in items if item is not None]
            return (shown, {"questions"}) if len(shown) == len(items) else None
    return None


def _question(question: object) -> str | None:
    """``Which branch? (main / release)``; None for a question of unexpected shape."""
    if not isinstance(question, dict) or not isinstance(text := question.get("text"), str):
        return None
    if set(question) - {"text", "options", "multi"}:
        return None
    options = question.get("options") or []
    if not isinstance(options, list) or not all(isinstance(o, str) for o in options):
        return None
    several = " (several answers)" if question.get("multi") is True else ""
    choices = f" ({' / '.join(options)})" if options else ""
    return f"{text}{choices}{several}"


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
            return call_lines(name, args)
        case ToolOutput():
            return []  # shown live under the transcript while the command runs
        case ToolResult(ok=True, details=ToolDetails(legs=[_, *_])):
            return []  # each leg's start is its own notice (`LegStarted`)
        case ToolResult(ok=True, tool_name=name, details=ToolDetails(subagents=[_, *_] as ended)):
            return [("class:ok", f"  ✓ {name}"), *_subagents_ended(ended)]
        case ToolResult(ok=ok, output=output, tool_name=name):
            mark = ("class:ok", f"  ✓ {name}") if ok else ("class:error", f"  ✗ {name} failed")
            return [mark, *fold(output, style="class:result", indent="    ")]
        case ToolProgress(tool_name=name, progress=done, total=total, message=message):
            return [
                ("class:dim", f"  ⋯ {name}: {wording.progress_text(done, total, clip(message))}")
            ]
        case ToolSkipped(tool_name=name, reason=reason):
            return [("class:warn", f"  ⊘ {name} not run: {clip(reason)}")]
        case Confirm() | SecretAsk() | AskState():
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
        case LegFinished(leg_id=leg, status=status, result=result, subagent=ending):
            style = "class:leg" if status == "finished" else "class:warn"
            shown = fold(result, style="class:result") if ending is None else leg_ending(ending)
            return [(style, f"⧗ background {leg} {status}"), *shown]
        case JobSettled():
            # Each leg's end was shown; a follow-up task's answer comes as its own block
            # (`agentrio.repl.transcript`), whichever of the two events arrives first.
            return []
        case Canceled(cause=cause):
            return [("class:warn", wording.ended_line(cause))]
        case Failed(error=error, kept=kept):
            why = clip(error)
            return [
                ("class:error", wording.ended_line("failed_kept" if kept else "failed", reason=why))
            ]
        case Compacted(summarised=summarised, elided=elided, subagent=who):
            return [output_line("class:dim", wording.compacted_line(summarised, elided, clip(who)))]
        case Retrying(reason=reason, delay_s=delay, subagent=who):
            line = wording.retrying_line(clip(reason), delay, clip(who))
            return [output_line("class:warn", line)]
        case AgentsMd(paths=paths):
            return [("class:dim", clip(wording.agents_md_line(paths)))]
        case Workdir(path=path):
            return [("class:dim", clip(wording.workdir_line(path)))]
        case Done(text=text):
            return [("", clip(line)) for line in text.rstrip("\n").split("\n")] if text else []


def leg_ending(ending: SubagentLegEnd) -> list[Line]:
    """A background sub-agent's ending (``leg_finished.subagent``): its report's path
    with ``~`` for the home directory, its error and the calls still needing approval,
    and its answer's Markdown rendered like model text. The status is in the header."""
    lines: list[Line] = [("class:result", f"  report: {clip(_tilde(ending.report))}")]
    if ending.error:
        lines += fold(f"error: {ending.error}", style="class:result")
    if ending.needs:
        lines += fold("still needs approval:\n" + "\n".join(ending.needs), style="class:result")
    if ending.answer:
        lines.append(("class:result", "  final answer:"))
        lines += _markdown_fold(ending.answer)
    return lines


def _markdown_fold(text: str, indent: str = "    ") -> list[Line]:
    """`fold` for Markdown: the first lines rendered (`agentrio.repl.markdown`)."""
    rendered = render_markdown(text.rstrip("\n")) if text.strip() else []
    shown = [markdown_line((("", indent), *line)) for line in rendered[:FOLD_LINES]]
    if len(rendered) > FOLD_LINES:
        shown.append(("class:dim", f"{indent}… {len(rendered) - FOLD_LINES} more lines (folded)"))
    return shown


def _tilde(path: str) -> str:
    """``path`` with the person's home directory written ``~``."""
    home = os.path.expanduser("~").rstrip("/")
    return "~" + path[len(home) :] if home and path.startswith(home + "/") else path


def _subagents_ended(ended: list[SubagentEnd]) -> list[Line]:
    """A ``subagents`` result folded to one line per sub-agent (its typed details),
    ``sub-agent 1/2: <objective> — finished``; the model's reply quotes the answers."""
    return [("class:result", f"    {clip(end.label)} — {clip(end.status, 40)}") for end in ended]


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
