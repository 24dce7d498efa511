"""The builtin model's verbs (`agentrio.engine.models.builtin`): how the newest user
message, read as ``verb: rest``, becomes a reply -- its text and the tool calls it asks
for. Split from the model so each module owns one thing: the model reads the
conversation, these say what each verb asks for."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Final, TypeAlias

from agentrio.engine.models.base import ModelError, ModelReply, ToolCallRequest
from agentrio.protocol.wording import plural

__all__ = ["VERBS", "Verb"]

#: A verb: the text after its colon, the tools offered, the turn's number -> the reply.
Verb: TypeAlias = Callable[[str, set[str], int], ModelReply]
#: The options of an ``ask:`` question written without ``|``.
_OPTIONS_RE: Final = re.compile(r"\s+options:\s*(.*)$")


def _verb_run(rest: str, available: set[str], turn: int) -> ModelReply:
    if not rest:
        return ModelReply(text="run: needs a command, for example `run: ls`.")
    return _call("run_command", {"command": rest}, f"Running `{rest}`.", available, turn)


def _verb_runs(rest: str, available: set[str], turn: int) -> ModelReply:
    commands = _split(rest)
    if not commands:
        return ModelReply(text="runs: needs commands, for example `runs: ls ;; pwd`.")
    if "run_command" not in available:
        return ModelReply(text="The run_command tool is not available here, so I cannot do that.")
    calls = [
        ToolCallRequest(id=f"call_{turn}_{index}", name="run_command", args={"command": command})
        for index, command in enumerate(commands)
    ]
    return ModelReply(text=f"Running {plural(len(commands), 'command')}.", tool_calls=calls)


def _verb_bg(rest: str, available: set[str], turn: int) -> ModelReply:
    commands = _split(rest)
    if not commands:
        return ModelReply(
            text="bg: needs at least one command, for example `bg: make ;; make test`."
        )
    return _background("background_command", "commands", commands, available, turn)


def _verb_sub(rest: str, available: set[str], turn: int) -> ModelReply:
    objectives = _split(rest)
    if not objectives:
        return ModelReply(text="sub: needs an objective, for example `sub: count the files`.")
    return _background("background_subagents", "objectives", objectives, available, turn)


#: A background tool's list field, its next step and the noun of what it starts.
_BACKGROUND: Final = {
    "background_command": ("Summarise the results.", "background command"),
    "background_subagents": ("Summarise the sub-agent report.", "background sub-agent"),
}


def _background(
    tool: str, field: str, items: list[str], available: set[str], turn: int
) -> ModelReply:
    """A background tool's one call: its list, the objective they make up, and next."""
    next_step, noun = _BACKGROUND[tool]
    args = {field: items, "objective": "; ".join(items), "next": next_step}
    return _call(tool, args, f"Starting {plural(len(items), noun)}.", available, turn)


def _verb_subs(rest: str, available: set[str], turn: int) -> ModelReply:
    objectives = _split(rest)
    if not objectives:
        return ModelReply(
            text="subs: needs objectives, for example `subs: run: ls ;; run: echo hi`."
        )
    return _call(
        "subagents",
        {"objectives": objectives},
        f"Starting {plural(len(objectives), 'sub-agent')} and waiting for "
        f"{'it' if len(objectives) == 1 else 'them'}.",
        available,
        turn,
    )


def _verb_ask(rest: str, available: set[str], turn: int) -> ModelReply:
    questions: list[dict[str, Any]] = []
    for part in _split(rest):
        question, bar, options = part.partition("|")
        if not bar and (match := _OPTIONS_RE.search(part)):
            question, bar, options = part[: match.start()], "|", match.group(1)
        if not question.strip():
            continue
        choices = [o.strip() for o in options.split(",") if o.strip()] if bar else []
        questions.append({"text": question.strip(), "options": choices})
    if not questions:
        return ModelReply(text="ask: needs a question, for example `ask: Which one? | a, b`.")
    return _call(
        "ask_user",
        {"questions": questions},
        f"I have {'a question' if len(questions) == 1 else f'{len(questions)} questions'} for you.",
        available,
        turn,
    )


def _verb_secret(rest: str, available: set[str], turn: int) -> ModelReply:
    if not rest:
        return ModelReply(text="secret: needs a key name, for example `secret: API_TOKEN`.")
    return _call(
        "store_secret", {"key": rest}, f"Asking you for the secret {rest}.", available, turn
    )


def _verb_history(rest: str, available: set[str], turn: int) -> ModelReply:
    if rest:
        return _call(
            "chat_history",
            {"mode": "search", "keyword": rest},
            f'Searching the chat history for "{rest}".',
            available,
            turn,
        )
    return _call("chat_history", {"mode": "list"}, "Listing the chat history.", available, turn)


def _verb_fail(rest: str, available: set[str], turn: int) -> ModelReply:
    raise ModelError(rest or "the builtin model was asked to fail")


VERBS: Final[dict[str, Verb]] = {
    "run": _verb_run,
    "runs": _verb_runs,
    "bg": _verb_bg,
    "sub": _verb_sub,
    "subs": _verb_subs,
    "ask": _verb_ask,
    "secret": _verb_secret,
    "history": _verb_history,
    "fail": _verb_fail,
}


# --- helpers ------------------------------------------------------------------------


def _call(tool: str, args: dict[str, Any], text: str, available: set[str], turn: int) -> ModelReply:
    if tool not in available:
        return ModelReply(text=f"The {tool} tool is not available here, so I cannot do that.")
    return ModelReply(
        text=text, tool_calls=[ToolCallRequest(id=f"call_{turn}_0", name=tool, args=args)]
    )


def _split(text: str) -> list[str]:
    return [part.strip() for part in text.split(";;") if part.strip()]
