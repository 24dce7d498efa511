"""The one protocol every model plugs in behind (R61), and the messages it speaks.

Messages follow the chat-completions shape (system / user / assistant / tool) because
every provider we ship can map to it; tool arguments are already-parsed dicts.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, Literal, Protocol

import attrs
import trio

__all__ = [
    "Message",
    "Model",
    "ModelError",
    "ModelReply",
    "TextSink",
    "ToolCallRequest",
    "ToolSpec",
    "stream_pieces",
]

Role = Literal["system", "user", "assistant", "tool"]


@attrs.frozen(kw_only=True)
class ToolCallRequest:
    """One tool call a model asked for; ``id`` pairs it with its ``tool`` message."""

    id: str
    name: str
    args: dict[str, Any]


@attrs.frozen(kw_only=True)
class Message:
    role: Role
    content: str = ""
    tool_calls: list[ToolCallRequest] = attrs.field(factory=list)
    #: For ``tool`` messages: the call this is the result of, and the tool's name.
    tool_call_id: str = ""
    name: str = ""


@attrs.frozen(kw_only=True)
class ToolSpec:
    """A tool as models see it: a name, what it is for, and a JSON schema."""

    name: str
    description: str
    parameters: dict[str, Any]


@attrs.frozen(kw_only=True)
class ModelReply:
    text: str = ""
    tool_calls: list[ToolCallRequest] = attrs.field(factory=list)
    #: Optional reasoning summary, kept in task history.
    reasoning: str = ""


class ModelError(Exception):
    """A model failed: provider error, timeout, malformed tool call (R62).

    The message is the provider's own words where there are some; the task ends as
    ``failed`` with it.
    """


#: Receives streamed text deltas as they arrive (for ``text`` events).
TextSink = Callable[[str], Awaitable[None]]


class Model(Protocol):
    """Messages and tool schemas in; text and tool calls out.

    ``complete`` must be cancellable at any checkpoint and must raise only
    `ModelError` for provider problems. When ``on_text`` is given, text is also
    streamed through it (the final reply still carries the whole text).
    """

    @property
    def name(self) -> str: ...

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        *,
        on_text: TextSink | None = None,
    ) -> ModelReply: ...


async def stream_pieces(on_text: TextSink | None, pieces: Iterable[str]) -> None:
    """Send ``pieces`` to ``on_text`` in order, with a checkpoint between two pieces
    (so a cancel can land mid-stream, as with a real provider)."""
    if on_text is None:
        return
    for index, piece in enumerate(pieces):
        if index:
            await trio.lowlevel.checkpoint()
        await on_text(piece)
