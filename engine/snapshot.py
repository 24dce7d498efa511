"""Snapshots of a stopped task and the clamping that keeps them small (R11).

A snapshot is what a new turn needs to carry on after the run that wrote it ended:
the objective, the conversation so far, which tool calls completed (with results),
which were interrupted, the questions asked and the answers already given. Tool
results and arguments can be huge (a ``cat`` of a log), so they are clamped on the way
in: the resume message that hands a snapshot back to the model
(`agentrio.engine.messages.resume_message`, R12) tells it that an elided value must be fetched
again, never guessed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any, Final

import attrs

from agentrio.engine.models.base import Message, ToolCallRequest
from agentrio.protocol.codec import converter, structure
from agentrio.protocol.events import Question

__all__ = [
    "ARGS_LIMIT",
    "QA",
    "RESULT_LIMIT",
    "CompletedCall",
    "InterruptedCall",
    "Snapshot",
    "clamp",
    "clamp_args",
    "elision_marker",
    "has_elided",
    "make_snapshot",
    "snapshot_from_json",
    "snapshot_to_json",
]

#: Most bytes (UTF-8) of one tool result kept in a snapshot (R11).
RESULT_LIMIT: Final = 32 * 1024
#: Most bytes of one tool call's arguments, as compact JSON, kept in a snapshot (R11).
ARGS_LIMIT: Final = 4 * 1024

_ELIDED: Final = re.compile(r"\.\.\.\[\d+ bytes elided\]\.\.\.")
#: The whole marker `clamp` writes, as bytes, with the count it carries.
_MARKER: Final = re.compile(rb"\n\.\.\.\[(\d+) bytes elided\]\.\.\.\n")


def _is_continuation(byte: int) -> bool:
    return byte & 0xC0 == 0x80


def elision_marker(count: int) -> str:
    """The marker `clamp` puts where ``count`` bytes were left out; text holding one
    clamps as if those bytes were there (a file read as head and tail only)."""
    return f"\n...[{count} bytes elided]...\n"


def clamp(text: str, limit: int) -> str:
    """Keep ``text`` to about ``limit`` UTF-8 bytes, the R11 way.

    When the UTF-8 form of ``text`` is at most ``limit`` bytes it comes back
    unchanged. Otherwise the result is the first ``limit * 3 // 4`` bytes and the last
    ``limit // 4`` bytes, joined by ``"\\n...[N bytes elided]...\\n"`` where ``N`` is
    the exact number of bytes of ``text`` left out. A cut never splits a character:
    the head's end moves back and the tail's start moves forward to a character
    boundary, so the kept parts may be a few bytes short and ``N`` a few bytes larger.

    Clamping composes (issue 33): text clamped once is often clamped again -- a
    command's output is kept by the runner, then ``exit 0`` is put before it and the
    task clamps the result, a leg's result and a snapshot clamp once more. A cut never
    splits a marker an earlier clamp left (it widens to take the whole marker), and a
    marker it takes counts the bytes it stood for, so the one marker left says how many
    bytes of the original were left out in all. (A marker printed by a command itself
    counts the same way; it can only misstate that command's own output.)

    The marker's own bytes come on top of ``limit``: a clamped text is at most
    ``limit`` bytes plus the marker. Lone surrogates (from undecodable process output)
    pass through unchanged.
    """
    if limit < 0:
        raise ValueError(f"limit must be 0 or more, got {limit}")
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= limit:
        return text
    head_end = limit * 3 // 4
    while head_end > 0 and _is_continuation(data[head_end]):
        head_end -= 1
    tail_start = len(data) - limit // 4
    while tail_start < len(data) and _is_continuation(data[tail_start]):
        tail_start += 1
    markers = [m for m in _MARKER.finditer(data) if m.end() > head_end and m.start() < tail_start]
    if markers:
        head_end = min(head_end, markers[0].start())
        tail_start = max(tail_start, markers[-1].end())
    elided = tail_start - head_end
    elided += sum(int(m[1]) - len(m[0]) for m in markers)
    head = data[:head_end].decode("utf-8", "surrogatepass")
    tail = data[tail_start:].decode("utf-8", "surrogatepass")
    return f"{head}{elision_marker(elided)}{tail}"


def _args_size(args: Any) -> int:
    return len(json.dumps(args, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))


def _clamp_strings(value: Any, cap: int) -> Any:
    """``value`` with every string (in dicts and lists, at any depth) clamped to
    ``cap``; keys, numbers, booleans and nulls kept as they are."""
    if isinstance(value, str):
        return clamp(value, cap)
    if isinstance(value, dict):
        return {key: _clamp_strings(item, cap) for key, item in value.items()}
    if isinstance(value, list):
        return [_clamp_strings(item, cap) for item in value]
    return value


def _longest_string(value: Any) -> int:
    if isinstance(value, str):
        return len(value.encode("utf-8", "surrogatepass"))
    if isinstance(value, dict):
        return max((_longest_string(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return max((_longest_string(v) for v in value), default=0)
    return 0


def clamp_args(args: dict[str, Any]) -> dict[str, Any]:
    """Keep a tool call's arguments within `ARGS_LIMIT` bytes of compact JSON (R11).

    The rule: when the compact JSON (UTF-8, no ASCII escaping) of ``args`` fits, ``args``
    comes back as it is. Otherwise one common cap ``c`` is applied to every string
    value at any depth, each through `clamp` (so each clamped string shows its own
    elided marker), and ``c`` is the largest cap found by bisection for which the whole
    JSON, markers and escapes included, fits. Short strings are untouched; only the
    long ones lose their middles.

    Keys, numbers, booleans, nulls and the shape of lists and dicts are never changed,
    so the result keeps the same keys and is still JSON. Hence when those alone (or
    the markers of very many long strings) exceed the limit, the result is the best
    that can be done, every string clamped to nothing but its marker, and it is larger
    than `ARGS_LIMIT`.
    """
    if _args_size(args) <= ARGS_LIMIT:
        return args
    fits, too_big = 0, _longest_string(args)
    best: dict[str, Any] = _clamp_strings(args, 0)
    while too_big - fits > 1:
        cap = (fits + too_big) // 2
        candidate: dict[str, Any] = _clamp_strings(args, cap)
        if _args_size(candidate) <= ARGS_LIMIT:
            fits, best = cap, candidate
        else:
            too_big = cap
    return best


@attrs.frozen(kw_only=True)
class CompletedCall:
    """A tool call that ran to its end before the task stopped; its result stands."""

    call_id: str
    tool_name: str
    args: dict[str, Any]
    output: str


@attrs.frozen(kw_only=True)
class InterruptedCall:
    """A tool call that was started (or about to be) but did not complete: its
    effects are unknown, and the resumed model must repeat it if still needed."""

    call_id: str
    tool_name: str
    args: dict[str, Any]
    #: False when the call was waiting on a person (a confirmation) as it stopped, so
    #: it never ran; True when it may have partly run -- and for snapshots of earlier
    #: releases, which did not say (issue 34 item 5, `agentrio.engine.tools.in_flight`).
    ran: bool = True


@attrs.frozen(kw_only=True)
class QA:
    """One question that was answered in an earlier resume."""

    question: str
    answer: str


@attrs.frozen(kw_only=True)
class Snapshot:
    """What a resume needs, already clamped (see `make_snapshot`).

    ``reports`` are background reports that arrived while the task was paused or
    parked (R26); they are carried into the resume message. ``failure`` says why a
    task whose model kept failing was kept (empty for every other stop); ``/pending``
    shows it.
    """

    objective: str
    messages: list[Message]
    completed: list[CompletedCall] = attrs.field(factory=list)
    interrupted: list[InterruptedCall] = attrs.field(factory=list)
    questions: list[Question] = attrs.field(factory=list)
    previous_answers: list[QA] = attrs.field(factory=list)
    remaining_steps: str = ""
    reports: list[str] = attrs.field(factory=list)
    failure: str = ""


def snapshot_to_json(snapshot: Snapshot) -> dict[str, Any]:
    """The JSON-ready form stored in ``TaskRow.snapshot``."""
    data: dict[str, Any] = converter.unstructure(snapshot)
    return data


def snapshot_from_json(data: dict[str, Any]) -> Snapshot:
    """Rebuild a `Snapshot`; raises `protocol.FrameDecodeError` naming the bad field."""
    snapshot: Snapshot = structure(data, Snapshot)
    return snapshot


def _clamp_message(message: Message) -> Message:
    content = message.content
    if message.role == "tool":
        content = clamp(content, RESULT_LIMIT)
    calls = [
        ToolCallRequest(id=call.id, name=call.name, args=clamp_args(call.args))
        for call in message.tool_calls
    ]
    return attrs.evolve(message, content=content, tool_calls=calls)


def make_snapshot(
    objective: str,
    messages: Sequence[Message],
    *,
    completed: Sequence[CompletedCall] = (),
    interrupted: Sequence[InterruptedCall] = (),
    questions: Sequence[Question] = (),
    previous_answers: Sequence[QA] = (),
    remaining_steps: str = "",
    reports: Sequence[str] = (),
) -> Snapshot:
    """Build a `Snapshot`, clamping as R11 says.

    Clamped: every tool result (``tool`` messages' content, completed calls' output) to
    `RESULT_LIMIT`, every tool call's arguments (assistant messages' tool calls,
    completed and interrupted calls) with `clamp_args`. The objective, other messages,
    questions, answers and reports are kept whole (reports are already bounded, R24).
    """
    return Snapshot(
        objective=objective,
        messages=[_clamp_message(m) for m in messages],
        completed=[
            CompletedCall(
                call_id=c.call_id,
                tool_name=c.tool_name,
                args=clamp_args(c.args),
                output=clamp(c.output, RESULT_LIMIT),
            )
            for c in completed
        ],
        interrupted=[attrs.evolve(c, args=clamp_args(c.args)) for c in interrupted],
        questions=list(questions),
        previous_answers=list(previous_answers),
        remaining_steps=remaining_steps,
        reports=list(reports),
    )


def has_elided(snapshot: Snapshot) -> bool:
    """True when any value of the snapshot carries a ``...[N bytes elided]...`` marker."""
    text = json.dumps(snapshot_to_json(snapshot), ensure_ascii=False)
    return _ELIDED.search(text) is not None
