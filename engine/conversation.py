"""A session's conversation: what a task's model is sent (issue 31, item 3).

Each ended task leaves one *exchange* in the store, with its history row and in the
same write: its messages as the model saw them -- the input, replies, tool calls and
their clamped results, steers, reports, and a ``[Canceled]`` or failure note. A task's
model input is then assembled (`fit`) as::

    system prompt (the run's ``system`` slot)
    summary of what came before            (system message, when there is one)
    earlier exchanges, oldest first        (only the tail: at most `WINDOW`)
    this run's own messages                (input, turns, ...)

kept within ``[model] context_tokens`` less a reserve for the reply. The newest
exchanges are kept whole; older ones lose their tool results first (`ELIDED_RESULT`);
the ones that still do not fit are *dropped*, and the run summarises them with the
model into the session's one stored summary (`agentrio.engine.compaction`), announced
by a ``compacted`` event. Only the tail after the summary is ever read, so the cost of
a task's input does not grow with the session's length (bench B14).

Token counts are estimates (characters / 4) scaled by the session's calibration: the
ratio of the input tokens the provider reported for its last call to the estimate of
what was sent (`Calibration`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any, Final

import attrs

from agentrio.engine.models.base import Message, ProviderItem, ToolCallRequest, ToolSpec

__all__ = [
    "ELIDED_RESULT",
    "WINDOW",
    "Calibration",
    "Exchange",
    "Fitted",
    "StoredConversation",
    "Summary",
    "close_open_calls",
    "estimate",
    "exchange_json",
    "exchange_of",
    "fit",
    "summary_message",
]

#: The most earlier exchanges a task's input is assembled from (the store's tail).
WINDOW: Final = 100
#: A tool result of an older exchange, when the budget needs its room.
ELIDED_RESULT: Final = "[result elided to fit the context; run the call again if it matters]"
#: What a tool call that never got a result reads, in a stored exchange.
NOT_RUN: Final = "not run: the task ended before this call ran"
_CHARS_PER_TOKEN: Final = 4.0
#: Per message: role and framing, in tokens.
_MESSAGE_OVERHEAD: Final = 4
_SUMMARY_HEAD: Final = "[Summary of this session's earlier conversation]"


@attrs.frozen(kw_only=True)
class Summary:
    """The session's one stored summary; it covers every exchange that ended at or
    before ``upto``."""

    text: str
    upto: float


@attrs.frozen(kw_only=True)
class Exchange:
    """One ended task's part of the conversation, and its estimated size whole and
    with its tool results elided."""

    task_hash: str
    end_at: float
    messages: tuple[Message, ...]
    tokens: int = 0
    elided_tokens: int = 0

    def elided(self) -> list[Message]:
        return [
            attrs.evolve(m, content=ELIDED_RESULT) if m.role == "tool" else m for m in self.messages
        ]


@attrs.frozen(kw_only=True)
class StoredConversation:
    """What a store returns for a session: its summary and the exchanges after it,
    oldest first, at most the ``limit`` asked for."""

    summary: Summary | None = None
    exchanges: list[Exchange] = attrs.field(factory=list)


@attrs.frozen(kw_only=True)
class Fitted:
    """The earlier conversation as one run sends it: ``messages`` (summary and kept
    exchanges), the exchanges ``dropped`` for want of room (oldest first), and how many
    tool results were elided."""

    messages: list[Message]
    dropped: list[Exchange]
    elided: int
    tokens: int


@attrs.define
class Calibration:
    """Estimated tokens times ``ratio``; the ratio follows the provider's reports."""

    ratio: float = 1.0

    def tokens(self, estimated: int) -> int:
        return int(estimated * self.ratio)

    def observe(self, estimated: int, reported: int) -> None:
        """The provider said a request we estimated at ``estimated`` took ``reported``
        input tokens (clamped to a sane range: a wild report cannot starve a session)."""
        if estimated > 0 and reported > 0:
            self.ratio = min(4.0, max(0.25, reported / estimated))


def _message_chars(message: Message) -> int:
    size = len(message.content)
    for call in message.tool_calls:
        size += (
            len(call.name) + len(call.raw_args) + 2 + sum(len(str(v)) for v in call.args.values())
        )
    return size


def estimate(messages: Iterable[Message], tools: Sequence[ToolSpec] = ()) -> int:
    """Estimated tokens of ``messages`` (and the tool schemas sent with them)."""
    chars = 0
    count = 0
    for message in messages:
        chars += _message_chars(message)
        count += 1
    for tool in tools:
        chars += len(tool.description) + len(json.dumps(tool.parameters))
    return int(chars / _CHARS_PER_TOKEN) + count * _MESSAGE_OVERHEAD


def summary_message(summary: Summary) -> Message:
    return Message(role="system", content=f"{_SUMMARY_HEAD}\n{summary.text}")


def fit(conversation: StoredConversation, *, budget: int, calibration: Calibration) -> Fitted:
    """The earlier conversation within ``budget`` tokens (module docstring): newest
    exchanges whole, older ones elided, the rest dropped."""
    head: list[Message] = []
    used = 0
    if conversation.summary is not None:
        head.append(summary_message(conversation.summary))
        used = calibration.tokens(estimate(head))
    kept: list[list[Message]] = []
    elided = 0
    eliding = False
    exchanges = conversation.exchanges
    cut = 0  # exchanges[:cut] are dropped
    for index in range(len(exchanges) - 1, -1, -1):
        exchange = exchanges[index]
        whole = calibration.tokens(exchange.tokens)
        if not eliding and used + whole <= budget:
            kept.append(list(exchange.messages))
            used += whole
            continue
        eliding = True
        short = calibration.tokens(exchange.elided_tokens)
        if used + short > budget:
            cut = index + 1
            break
        kept.append(exchange.elided())
        elided += sum(1 for m in exchange.messages if m.role == "tool")
        used += short
    messages = head
    for part in reversed(kept):
        messages.extend(part)
    return Fitted(messages=messages, dropped=exchanges[:cut], elided=elided, tokens=used)


def close_open_calls(messages: Sequence[Message]) -> list[Message]:
    """``messages`` with a `NOT_RUN` result after each tool call that has none (a task
    stopped mid-turn): every provider refuses a call without its result."""
    answered = {m.tool_call_id for m in messages if m.role == "tool"}
    closed: list[Message] = []
    for message in messages:
        closed.append(message)
        for call in message.tool_calls:
            if call.id not in answered:
                closed.append(
                    Message(role="tool", content=NOT_RUN, tool_call_id=call.id, name=call.name)
                )
    return closed


# -- stored form -------------------------------------------------------------------
# Hand-written, not the cattrs converter: a task reads up to `WINDOW` of these, and
# this is several times faster (bench B14).


def _message_dict(message: Message) -> dict[str, Any]:
    data: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        data["tool_calls"] = [
            {
                "id": c.id,
                "name": c.name,
                "args": c.args,
                "args_error": c.args_error,
                "raw_args": c.raw_args,
            }
            for c in message.tool_calls
        ]
    if message.tool_call_id:
        data["tool_call_id"] = message.tool_call_id
        data["name"] = message.name
    if message.provider_items:
        data["provider_items"] = [
            {"dialect": i.dialect, "data": i.data} for i in message.provider_items
        ]
    return data


def _message(data: dict[str, Any]) -> Message:
    return Message(
        role=data["role"],
        content=data.get("content", ""),
        tool_calls=[ToolCallRequest(**c) for c in data.get("tool_calls", ())],
        tool_call_id=data.get("tool_call_id", ""),
        name=data.get("name", ""),
        provider_items=tuple(ProviderItem(**i) for i in data.get("provider_items", ())),
    )


def exchange_json(messages: Sequence[Message]) -> str:
    """An exchange's messages as the text a store keeps."""
    return json.dumps([_message_dict(m) for m in messages], ensure_ascii=False)


def exchange_of(task_hash: str, end_at: float, text: str) -> Exchange:
    """An exchange from its stored text (`exchange_json`), sized."""
    messages = tuple(_message(d) for d in json.loads(text))
    tokens = estimate(messages)
    tool_chars = sum(len(m.content) for m in messages if m.role == "tool")
    tools = sum(1 for m in messages if m.role == "tool")
    elided = (
        tokens
        - int(tool_chars / _CHARS_PER_TOKEN)
        + int(tools * len(ELIDED_RESULT) / _CHARS_PER_TOKEN)
    )
    return Exchange(
        task_hash=task_hash,
        end_at=end_at,
        messages=messages,
        tokens=tokens,
        elided_tokens=max(0, elided),
    )
