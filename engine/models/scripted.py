"""The scripted model: replays a fixed list of turns, for tests and demos (R61).

Each call to ``complete`` takes the next turn, whatever the messages say. A turn is

- a `ModelReply`, returned as is;
- a `ScriptedTurn` (what a TOML script holds): optional ``delay_s`` first (a cancellable
  ``trio.sleep``), then either ``error`` raised as `ModelError` or the reply, with its
  text streamed as ``chunks`` when given;
- an exception instance, raised (a `ModelError` is the R62 failure path; anything else
  tests the engine's handling of a model bug);
- a callable ``(messages, tools) -> ModelReply`` or one returning an awaitable of it, for
  tests that must look at what the model was given.

When the turns run out, ``complete`` raises ``ModelError("scripted model has no more
turns")``. Every call's messages are kept in `ScriptedModel.calls` (and the offered tool
names in `ScriptedModel.tool_names`), including calls that fail.

A TOML script::

    [[turns]]
    text = "Running it."
    [[turns.tool_calls]]
    name = "run_command"
    args = { command = "echo hi" }

    [[turns]]
    chunks = ["Do", "ne."]       # streamed piece by piece; text defaults to their join

    [[turns]]
    error = "provider exploded"  # raises ModelError
    delay_s = 0.5                # optional, before answering

Tool calls without an ``id`` get ``call_<n>``, numbered from 1 across the whole script.
"""

from __future__ import annotations

import inspect
import math
import tomllib
from collections.abc import Awaitable, Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Final, TypeAlias

import attrs
import trio

from agentrio.engine.errors import ConfigError
from agentrio.engine.models.base import (
    Message,
    ModelError,
    ModelReply,
    RetrySink,
    TextSink,
    ToolCallRequest,
    ToolSpec,
    stream_pieces,
)

__all__ = ["EXHAUSTED", "ScriptedModel", "ScriptedTurn", "Turn", "parse_script"]

EXHAUSTED: Final = "scripted model has no more turns"


@attrs.frozen(kw_only=True)
class ScriptedTurn:
    """One turn of a script; ``error`` set means the turn fails instead of replying."""

    text: str = ""
    tool_calls: list[ToolCallRequest] = attrs.field(factory=list)
    reasoning: str = ""
    #: Pieces the text is streamed in; empty means the whole text in one piece.
    chunks: list[str] = attrs.field(factory=list)
    error: str | None = None
    delay_s: float = 0.0

    def reply(self) -> ModelReply:
        return ModelReply(text=self.text, tool_calls=self.tool_calls, reasoning=self.reasoning)


TurnFunction: TypeAlias = Callable[
    [Sequence[Message], Sequence[ToolSpec]], ModelReply | Awaitable[ModelReply]
]
Turn: TypeAlias = ModelReply | ScriptedTurn | BaseException | TurnFunction


class ScriptedModel:
    """Replays ``turns`` in order, one per ``complete`` call (see the module docstring).

    Turns are taken in call order; concurrent callers each get their own turn because
    the index advances before the first checkpoint.
    """

    def __init__(self, turns: Iterable[Turn], *, name: str = "scripted") -> None:
        self._turns: list[Turn] = list(turns)
        self._next = 0
        self._name = name
        #: The messages of every call so far, in call order.
        self.calls: list[list[Message]] = []
        #: The names of the tools offered to every call so far, in call order.
        self.tool_names: list[list[str]] = []

    @classmethod
    def from_toml(cls, path: str | Path) -> ScriptedModel:
        """Load a script file (blocking: call it from a worker thread inside Trio).

        Raises `ConfigError` naming the file and the turn for anything unreadable or
        invalid.
        """
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read script ({exc.strerror})") from None
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: {exc}") from None
        return cls(parse_script(data, source=str(path)))

    @property
    def name(self) -> str:
        return self._name

    @property
    def remaining(self) -> int:
        """Turns not yet replayed."""
        return max(0, len(self._turns) - self._next)

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        *,
        on_text: TextSink | None = None,
        on_retry: RetrySink | None = None,
    ) -> ModelReply:
        self.calls.append(list(messages))
        self.tool_names.append([tool.name for tool in tools])
        index = self._next
        self._next += 1
        if index >= len(self._turns):
            await trio.lowlevel.checkpoint()
            raise ModelError(EXHAUSTED)
        turn = self._turns[index]
        chunks: list[str] = []
        if isinstance(turn, ScriptedTurn):
            await trio.sleep(turn.delay_s)
            if turn.error is not None:
                raise ModelError(turn.error)
            reply = turn.reply()
            chunks = turn.chunks
        elif isinstance(turn, ModelReply):
            await trio.lowlevel.checkpoint()
            reply = turn
        elif isinstance(turn, BaseException):
            await trio.lowlevel.checkpoint()
            raise turn
        else:
            result = turn(messages, tools)
            if inspect.isawaitable(result):
                reply = await result
            else:
                await trio.lowlevel.checkpoint()
                reply = result
        await stream_pieces(on_text, chunks or ([reply.text] if reply.text else []))
        return reply

    async def aclose(self) -> None:
        """Nothing to release; present so every shipped model can be closed alike."""
        await trio.lowlevel.checkpoint()


_TURN_KEYS: Final = frozenset({"text", "tool_calls", "reasoning", "chunks", "error", "delay_s"})
_CALL_KEYS: Final = frozenset({"id", "name", "args"})


def parse_script(data: dict[str, Any], *, source: str = "script") -> list[ScriptedTurn]:
    """Turn parsed TOML (``{"turns": [...]}``) into turns; raise `ConfigError` naming
    ``source`` and the offending turn (``turns[2].tool_calls[0].name: ...``)."""
    extra = sorted(set(data) - {"turns"})
    if extra:
        raise ConfigError(f"{source}: {extra[0]}: unknown key")
    raw_turns = data.get("turns", [])
    if not isinstance(raw_turns, list) or not all(isinstance(t, dict) for t in raw_turns):
        raise ConfigError(f"{source}: turns: expected an array of tables ([[turns]])")
    turns: list[ScriptedTurn] = []
    counter = 0
    for i, raw in enumerate(raw_turns):
        where = f"{source}: turns[{i}]"
        unknown = sorted(set(raw) - _TURN_KEYS)
        if unknown:
            raise ConfigError(f"{where}.{unknown[0]}: unknown key")
        text = _string(raw, "text", where)
        reasoning = _string(raw, "reasoning", where)
        chunks = raw.get("chunks", [])
        if not isinstance(chunks, list) or not all(isinstance(c, str) for c in chunks):
            raise ConfigError(f"{where}.chunks: expected an array of strings")
        if chunks and "text" in raw and text != "".join(chunks):
            raise ConfigError(f"{where}.chunks: they must join to text")
        error = raw.get("error")
        if error is not None and not isinstance(error, str):
            raise ConfigError(f"{where}.error: expected a string")
        delay = raw.get("delay_s", 0.0)
        if (
            isinstance(delay, bool)
            or not isinstance(delay, int | float)
            or not math.isfinite(delay)
            or delay < 0
        ):
            raise ConfigError(f"{where}.delay_s: expected a number of seconds >= 0")
        raw_calls = raw.get("tool_calls", [])
        if not isinstance(raw_calls, list) or not all(isinstance(c, dict) for c in raw_calls):
            raise ConfigError(f"{where}.tool_calls: expected an array of tables")
        calls: list[ToolCallRequest] = []
        for j, call in enumerate(raw_calls):
            call_where = f"{where}.tool_calls[{j}]"
            unknown = sorted(set(call) - _CALL_KEYS)
            if unknown:
                raise ConfigError(f"{call_where}.{unknown[0]}: unknown key")
            name = _string(call, "name", call_where)
            if not name:
                raise ConfigError(f"{call_where}.name: required")
            args = call.get("args", {})
            if not isinstance(args, dict):
                raise ConfigError(f"{call_where}.args: expected a table")
            counter += 1
            call_id = _string(call, "id", call_where) or f"call_{counter}"
            calls.append(ToolCallRequest(id=call_id, name=name, args=args))
        turns.append(
            ScriptedTurn(
                text=text or "".join(chunks),
                tool_calls=calls,
                reasoning=reasoning,
                chunks=chunks,
                error=error,
                delay_s=float(delay),
            )
        )
    return turns


def _string(table: dict[str, Any], key: str, where: str) -> str:
    value = table.get(key, "")
    if not isinstance(value, str):
        raise ConfigError(f"{where}.{key}: expected a string")
    return value
