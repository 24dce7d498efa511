"""The builtin model: offline and deterministic, so every flow works with no network (R61).

It does not understand language; it reads the conversation the way a test would:

1. **Tool results.** When the newest messages (after the last assistant message) are
   ``tool`` messages, it summarises them from their real content and asks for nothing
   more, so the task ends. A result whose content starts with ``denied`` or ``not run``
   is reported as not run, with the content quoted.
2. **Resume and report messages.** When the newest user message starts with a header the
   engine writes (R12, R26), it summarises that message instead of acting on it:
   ``[Resumed Task — ask_user response received]`` quotes the "Current answers" lines;
   ``[Resumed Task — interrupted execution recovered]`` re-issues every interrupted
   ``run_command`` (``subagents``, ``store_secret``) it can read from "Interrupted calls",
   so a paused command runs again — but never one whose arguments were cut short (R11
   elision), which it would only be guessing; ``[Background Report — …]`` quotes the
   report, while ``[Resumed Task — background group finished]`` names each leg and how
   it ended (their output was reported as each leg ended). Sections are read both as
   engine/messages.py writes them (``## Interrupted calls`` headings, calls as
   ``1. run_command (call id)`` + ``args: {…}``) and in the short form
   ``Interrupted calls:`` / ``- run_command {"command": "sleep 30"}``. Anything that does
   not parse is summarised, not guessed.
3. **Verbs.** Otherwise the newest user message is read as one verb (case-sensitive
   prefix; the text after the colon is stripped):

   ========================  ===============================================================
   ``run: CMD``              ``run_command`` ``{"command": CMD}``
   ``runs: CMD ;; CMD``      one ``run_command`` call per command, all in one reply (one
                             model turn: what "Allow this turn" covers)
   ``bg: CMD ;; CMD``        ``background_command`` ``{"commands": [...], "objective",
                             "next"}``
   ``sub: OBJ ;; OBJ``       ``background_subagents`` ``{"objectives": [...], "objective",
                             "next"}``
   ``subs: OBJ ;; OBJ``      ``subagents`` ``{"objectives": [...]}``: in-process sub-agents,
                             each reading its objective as a verb (R80)
   ``ask: Q | a, b ;; Q2``   ``ask_user`` ``{"questions": [{"text", "options"}, ...]}``
                             (no ``|`` means a free-text question); ``Q options: a, b``
                             is the same as ``Q | a, b`` and needs no escape inside a
                             Markdown table (the README's tour uses it)
   ``secret: KEY``           ``store_secret`` ``{"key": KEY}``
   ``history: WORD``         ``chat_history`` ``{"mode": "search", "keyword": WORD}``;
                             ``history:`` alone lists (``{"mode": "list"}``); the summary
                             counts the entries rather than list them again
   ``fail: MESSAGE``         raises `ModelError` (MESSAGE), the deterministic failure
                             path for R62 tests
   anything else             a help reply listing the verbs
   ========================  ===============================================================

   A verb whose tool is not among the offered tools (e.g. background tools outside
   ``cli-`` sessions, R20) gets a text reply saying so instead of a call.

Tool call ids are ``call_<turn>_<index>``: the turn is the number of assistant messages
so far plus one, the index counts from 0 within the reply. When a steer or report
arrives after tool results, the reply both summarises the results and handles the new
user message. With nothing new since the last assistant message it says so, rather
than repeat an older verb.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterable, Sequence
from typing import Any, Final

import attrs
import trio

from agentrio.engine.messages import (
    ASK_RESUME_HEADER,
    ELIDED_SENTENCE,
    FOLLOWUP_HEADER,
    INTERRUPTED_RESUME_HEADER,
    REPORT_FINISHED_HEADER,
    REPORT_UPDATE_HEADER,
    SUBAGENTS_RESULT_HEADER,
)
from agentrio.engine.models.base import (
    Message,
    ModelReply,
    RetrySink,
    TextSink,
    ToolCallRequest,
    ToolSpec,
    stream_pieces,
)
from agentrio.engine.models.builtin_verbs import VERBS
from agentrio.protocol.wording import plural

__all__ = [
    "HELP_TEXT",
    "NOTHING_NEW",
    "BuiltinModel",
    "decide",
]

NOTHING_NEW: Final = "There is nothing new to answer."
HELP_TEXT: Final = (
    "I am the builtin offline model; I understand these verbs:\n"
    "- run: CMD — run a command\n"
    "- runs: CMD ;; CMD — run several commands, all asked for in one reply\n"
    "- bg: CMD ;; CMD — run commands in the background\n"
    "- sub: OBJECTIVE ;; OBJECTIVE — start background sub-agents\n"
    "- subs: OBJECTIVE ;; OBJECTIVE — run sub-agents now and wait for their answers\n"
    "- ask: QUESTION | opt1, opt2 ;; QUESTION — ask you questions "
    "(or QUESTION options: opt1, opt2)\n"
    "- secret: KEY — ask you for a secret and store it\n"
    "- history: WORD — search the chat history (history: alone lists it)\n"
    "- fail: MESSAGE — fail with MESSAGE (for testing)"
)

#: Section titles the resume messages use (engine/messages.py writes them as ``## Title``
#: headings; ``Title:`` lines are read too). A heading or ``Title:`` line with one of these
#: titles ends the section before it, and so does the closing sentence about elided
#: values; nothing else does, so report bodies and command output (which may well
#: contain ``Error:`` lines) are quoted whole.
_SECTION_TITLES: Final = (
    "Objective",
    "Next",
    "Completed tool results",
    "Interrupted calls",
    "Previous answers",
    "Current answers",
    "Background reports",
    "Remaining steps",
    "Starting task",
)
_TITLES: Final = "|".join(re.escape(title) for title in _SECTION_TITLES)
#: After a title: an optional parenthetical, such as ``Current answers (2):``, then a colon.
_TITLE_TAIL: Final = r"(?: ?\([^)\n]*\))?:"
#: The start of the closing sentence about elided values (R11).
_ELIDED_START: Final = re.escape(ELIDED_SENTENCE.partition(";")[0])
_SECTION_RE: Final = re.compile(
    rf"^(?:#+ *(?:{_TITLES})\s*$|(?:{_TITLES}){_TITLE_TAIL}|{_ELIDED_START})"
)
_EXIT_RE: Final = re.compile(
    r"^\W*(?:exit|exited with|return)(?:[ _-]?(?:code|status))?\s*[:=]?\s*(-?\d+)\W*$",
    re.IGNORECASE,
)
_ELIDED_RE: Final = re.compile(r"\.\.\.\[\d+ bytes elided\]\.\.\.")
#: Lines of each sub-agent's final answer a ``subagents`` summary quotes.
_ANSWER_LINES: Final = 6
_LEG_RE: Final = re.compile(r"\b(?:cmd|sub)_[0-9a-f]{8}\b")
#: A leg's first line in a group's reports: ``Leg cmd_… (command: make): finished``, or
#: the short ``- cmd_… (make) finished with exit code 0:``.
_LEG_LINE_RE: Final = re.compile(
    r"^\s*(?:Leg\s+|[-*]\s+)((?:cmd|sub)_[0-9a-f]{8})\s+\((.*)\):?\s*(.*?):?\s*$"
)
#: An interrupted call: ``- run_command {"command": …}`` or ``1. run_command (call id)``
#: followed by an ``args: {…}`` line.
_CALL_LINE_RE: Final = re.compile(r"^\s*(?:[-*]|\d+\.)\s*([A-Za-z_][A-Za-z0-9_]*)\b(.*)$")
_ARGS_LINE_RE: Final = re.compile(r"^\s*args:\s*(.*)$")
_HISTORY_LINES: Final = 20
#: The argument an interrupted call must carry to be re-issued on resume, by tool.
_RECOVERABLE: Final = {"run_command": "command", "subagents": "objectives", "store_secret": "key"}


class BuiltinModel:
    """The offline model of R61 (the module docstring says what it answers). ``complete``
    is a pure function of its inputs, apart from streaming: with
    ``on_text`` it sends the text in at most three word-aligned pieces with a
    checkpoint between them, so streaming paths are exercised without a network.
    """

    @property
    def name(self) -> str:
        return "builtin"

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        *,
        on_text: TextSink | None = None,
        on_retry: RetrySink | None = None,
    ) -> ModelReply:
        await trio.lowlevel.checkpoint()
        reply = decide(messages, tools)
        if reply.text:
            await stream_pieces(on_text, _pieces(reply.text, 3))
        return reply

    async def aclose(self) -> None:  # every shipped model can be closed alike
        await trio.lowlevel.checkpoint()


def decide(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelReply:
    """The builtin model's answer to ``messages`` with ``tools`` offered.

    Raises `ModelError` for ``fail: MESSAGE``.
    """
    available = {tool.name for tool in tools}
    turn = sum(1 for m in messages if m.role == "assistant") + 1
    last_assistant = max((i for i, m in enumerate(messages) if m.role == "assistant"), default=-1)
    tail = list(messages[last_assistant + 1 :])
    calls = {c.id: c for c in messages[last_assistant].tool_calls} if last_assistant >= 0 else {}
    summaries = [_summarise_result(m, calls.get(m.tool_call_id)) for m in tail if m.role == "tool"]
    user_index = max((i for i, m in enumerate(tail) if m.role == "user"), default=-1)
    last_tool = max((i for i, m in enumerate(tail) if m.role == "tool"), default=-1)
    if summaries and last_tool > user_index:
        return ModelReply(text="\n\n".join(summaries))
    if user_index < 0 and not summaries:
        # Nothing arrived since the model last spoke; repeating an older verb would loop.
        return ModelReply(text=NOTHING_NEW)
    text = tail[user_index].content.strip() if user_index >= 0 else ""
    reply = _answer_user(text, available, turn)
    if summaries:
        return ModelReply(text="\n\n".join([*summaries, reply.text]), tool_calls=reply.tool_calls)
    return reply


# --- tool results -------------------------------------------------------------------


def _summarise_result(message: Message, call: ToolCallRequest | None) -> str:
    name = message.name or (call.name if call else "") or "the tool"
    args = call.args if call else {}
    content = message.content.strip()
    lowered = content.lower()
    if lowered.startswith(("denied", "not run")):
        # The engine words a skipped call as "not run: <why>"; say it once.
        return f"{name} was not run: {_strip_prefix(content, 'not run:')}"
    if name == "run_command":
        return _summarise_command(args, content)
    if name == "ask_user":
        # engine/tools/ask_user.py writes "Q: …" / "A: …" pairs; the answers are the A lines.
        answers = [line[2:].strip() for line in content.splitlines() if line.startswith("A:")]
        said = "; ".join(answers) if answers else content
        return f"You answered: {said}." if said else "You gave no answer."
    if name == "store_secret":
        key = str(args.get("key", "")) or "requested"
        if "stored" in lowered or "saved" in lowered:
            return f"Stored the secret {key}."
        return f"store_secret for {key} returned: {content}"
    if name == "chat_history":
        return _summarise_history(args, content)
    if name == "subagents":
        return _summarise_subagents(content)
    if name in ("background_command", "background_subagents"):
        # The front-ends announce each leg as it starts: say only what comes next.
        legs = list(dict.fromkeys(_LEG_RE.findall(content)))
        if legs:
            return f"I will report here when {'it finishes' if len(legs) == 1 else 'they finish'}."
    return f"{name} returned:\n{_fence(content)}"


def _summarise_command(args: dict[str, Any], content: str) -> str:
    """Read the result as engine/tools/run_command.py writes it: a first line saying how
    the command ended (``exit 0``, ``exit code: 1``, ``timed out after 5.0 s …``,
    ``killed by signal 9``), then the output. Anything else is quoted as it is."""
    label = f"`{_command_text(args)}`" if args.get("command") else "The command"
    head, _, output = content.partition("\n")
    output = output.strip("\n")
    if match := _EXIT_RE.match(head):
        ended = f"finished with exit code {int(match.group(1))}"
    elif head.startswith(("timed out", "killed by signal")):
        ended = head.strip()
    else:
        return f"{label} finished:\n{_fence(content)}"
    if not output.strip():
        return f"{label} {ended} and printed nothing."
    return f"{label} {ended}:\n{_fence(output)}"


def _summarise_subagents(content: str) -> str:
    """Each sub-agent of a ``subagents`` result (engine/tools/subagents.py: a
    ``## sub-agent i/n: objective`` section with ``status:``, ``calls:`` and ``final
    answer:``) as its objective, how it ended and its answer's first lines."""
    sections = re.split(r"^## sub-agent \d+/\d+: ", content, flags=re.MULTILINE)[1:]
    if not content.startswith(SUBAGENTS_RESULT_HEADER) or not sections:
        return f"The sub-agents ended:\n{_fence(content)}"
    items = [f"The {plural(len(sections), 'sub-agent')} ended:"]
    for number, section in enumerate(sections, 1):
        objective, _, body = section.partition("\n")
        status = re.search(r"^status: *(.*)$", body, flags=re.MULTILINE)
        how = status.group(1).strip() if status else "ended"
        items.append(f"{number}. {objective.strip()} → {how}")
        answer = body.partition("\nfinal answer:\n")[2].strip("\n")
        lines = answer.split("\n") if answer else []
        shown = lines[:_ANSWER_LINES] + (["…"] if len(lines) > _ANSWER_LINES else [])
        fences = [m.group(1) for line in shown if (m := re.match(r" *(`{3,}|~{3,})", line))]
        if len(fences) % 2:
            shown.append(fences[-1])  # a code block cut open by the short view is closed
        items += [f"   {line}" if line else "" for line in shown]
    return "\n".join(items)


def _summarise_history(args: dict[str, Any], content: str) -> str:
    mode = str(args.get("mode", "list"))
    keyword = str(args.get("keyword", ""))
    title = (
        f'Chat history matching "{keyword}"'
        if mode == "search" and keyword
        else ("Chat history" if mode != "read" else "The saved task")
    )
    lines = [line for line in content.splitlines() if line.strip()]
    if not lines:
        return f"{title}: nothing found."
    if mode != "read":  # the tool result, shown with the call, lists them
        return f"{title}: {len(lines)} entr{'y' if len(lines) == 1 else 'ies'} found."
    shown = "\n".join(lines[:_HISTORY_LINES])
    more = len(lines) - _HISTORY_LINES
    suffix = f"\n…and {plural(more, 'more line')}." if more > 0 else ""
    return f"{title}:\n{shown}{suffix}"


# --- user messages ------------------------------------------------------------------


def _answer_user(text: str, available: set[str], turn: int) -> ModelReply:
    if text.startswith(ASK_RESUME_HEADER):
        answers = _section(text, "Current answers")
        said = (
            "Resumed with your answers:\n" + "\n".join(answers)
            if answers
            else "Resumed with your answers, but none were given."
        )
        return ModelReply(text=said + _carried_reports(text))
    if text.startswith(INTERRUPTED_RESUME_HEADER):
        reply = _recover(text, available, turn)
        return attrs.evolve(reply, text=reply.text + _carried_reports(text))
    if text.startswith(FOLLOWUP_HEADER):
        return ModelReply(text=_summarise_group(text))
    for header, what in (
        (REPORT_FINISHED_HEADER, "A background task finished"),
        (REPORT_UPDATE_HEADER, "A background task sent an update"),
    ):
        if text.startswith(header):
            body = text[len(header) :].strip()
            return ModelReply(text=f"{what}:\n{body}" if body else f"{what}.")
    verb, sep, rest = text.partition(":")
    if not sep or verb not in VERBS:
        return ModelReply(text=HELP_TEXT)
    return VERBS[verb](rest.strip(), available, turn)


def _recover(text: str, available: set[str], turn: int) -> ModelReply:
    commands: list[tuple[str, dict[str, Any]]] = []
    elided = 0
    tool = ""
    for line in _section(text, "Interrupted calls"):
        if match := _CALL_LINE_RE.match(line):
            tool, rest = match.group(1), match.group(2)
        elif match := _ARGS_LINE_RE.match(line):
            rest = match.group(1)
        else:
            continue
        args = _leading_object(rest) if tool in _RECOVERABLE else None
        if args is None or not args.get(_RECOVERABLE[tool]):
            continue
        if _ELIDED_RE.search(json.dumps(args, ensure_ascii=False)):
            elided += 1  # part of it was cut out (R11): never run a guess
        else:
            commands.append((tool, args))
        tool = ""
    if not commands:
        if elided:
            return ModelReply(
                text="Recovered the interrupted task, but its command was cut short in the "
                "snapshot, so I will not run a guess of it."
            )
        return ModelReply(text="Recovered the interrupted task; there is no command to run again.")
    missing = sorted({name for name, _ in commands} - available)
    if missing:
        return ModelReply(
            text=f"Recovered the interrupted task, but the {missing[0]} tool is not available "
            "here, so I cannot run it again."
        )
    labels = ", ".join(
        f"`{_command_text(args)}`" if name == "run_command" else f"the {name} call"
        for name, args in commands
    )
    return ModelReply(
        text=f"Recovered the interrupted task; running {labels} again.",
        tool_calls=[
            ToolCallRequest(id=f"call_{turn}_{i}", name=name, args=args)
            for i, (name, args) in enumerate(commands)
        ],
    )


def _carried_reports(text: str) -> str:
    """Background reports a paused or parked task received (R26), quoted after the
    resume summary; empty when there are none."""
    reports = _section(text, "Background reports")
    return "\n\nBackground reports while it waited:\n" + "\n".join(reports) if reports else ""


def _summarise_group(text: str) -> str:
    objective = " ".join(_section(text, "Objective")).strip()
    reports = _section(text, "Background reports")
    if not reports:
        body = text[len(FOLLOWUP_HEADER) :].strip()
        reports = body.splitlines()
    head = (
        f'The background work for "{objective}" finished.'
        if objective
        else "The background work finished."
    )
    if not any(line.strip() for line in reports):
        return f"{head} It sent no reports."
    legs = [match.groups() for line in reports if (match := _LEG_LINE_RE.match(line))]
    if legs:  # each leg's output was reported when it ended: say how each ended
        return f"{head}\n" + "\n".join(f"- {leg} ({label}): {how}" for leg, label, how in legs)
    return f"{head} The reports say:\n" + "\n".join(reports)


def _section(text: str, title: str) -> list[str]:
    """The lines of section ``title`` (the first line starting with it): any text after
    its colon on the same line, then the following lines up to the next section title;
    blank lines around them dropped."""
    start = re.compile(rf"^(?:#+ *)?{re.escape(title)}\b(?:{_TITLE_TAIL}(.*))?")
    out: list[str] = []
    inside = False
    for line in text.splitlines():
        if inside:
            if _SECTION_RE.match(line):
                break
            out.append(line)
        elif match := start.match(line):
            inside = True
            if (match.group(1) or "").strip():
                out.append(match.group(1).strip())
    while out and not out[-1].strip():
        out.pop()
    while out and not out[0].strip():
        out.pop(0)
    return out


def _command_text(args: dict[str, Any]) -> str:
    command = args.get("command", "")
    if isinstance(command, list):
        return shlex.join(str(part) for part in command)
    return str(command)


def _leading_object(text: str) -> dict[str, Any] | None:
    """The JSON object starting at the first ``{`` of ``text``, if it parses (a clamped,
    elided value does not, and is then not guessed)."""
    start = text.find("{")
    if start < 0:
        return None
    try:
        value, _ = json.JSONDecoder().raw_decode(text[start:])
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def _strip_prefix(text: str, prefix: str) -> str:
    if text.lower().startswith(prefix):
        return text[len(prefix) :].strip() or text
    return text


def _fence(text: str) -> str:
    """``text`` in a Markdown code block whose fence is longer than any run inside it."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}\n{text}\n{fence}"


def _pieces(text: str, count: int) -> Iterable[str]:
    """Split ``text`` into at most ``count`` word-aligned pieces that join back to it."""
    tokens = re.findall(r"\s*\S+\s*|\s+", text)
    size = -(-len(tokens) // count)
    for start in range(0, len(tokens), size):
        yield "".join(tokens[start : start + size])
