"""The one protocol every model plugs in behind (R61), and the messages it speaks.

Messages follow the chat-completions shape (system / user / assistant / tool) because
every provider we ship can map to it; tool arguments are already-parsed dicts.

Two additions carry what the chat shape has no room for (issue 31):

- **Malformed tool calls** are not errors. A call whose arguments are not a JSON
  object (or that names no tool) comes back as a `ToolCallRequest` with ``args = {}``,
  ``args_error`` saying what is wrong and ``raw_args`` holding the text the model sent;
  the loop answers it with a tool result carrying ``args_error`` so the model can try
  again. A dialect never raises for one.
- **Provider items** (`ProviderItem`) are parts of an assistant turn that must go back
  to the same provider verbatim on the next call: Anthropic ``thinking`` /
  ``redacted_thinking`` blocks with their signatures, OpenAI Responses ``reasoning``
  items with their ``encrypted_content``. A reply carries them in
  `ModelReply.provider_items`; `ModelReply.to_message` puts them on the assistant
  `Message`, and each dialect sends back only the items tagged with its own dialect
  (after a fallback to another provider they are dropped, which that provider accepts).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, Literal, Protocol

import attrs
import trio

__all__ = [
    "ContextLengthError",
    "Message",
    "Model",
    "ModelError",
    "ModelReply",
    "ProviderItem",
    "RetrySink",
    "Retrying",
    "TextSink",
    "ToolCallRequest",
    "ToolSpec",
    "Usage",
    "stream_pieces",
]

Role = Literal["system", "user", "assistant", "tool"]


@attrs.frozen(kw_only=True)
class ToolCallRequest:
    """One tool call a model asked for; ``id`` pairs it with its ``tool`` message."""

    id: str
    name: str
    args: dict[str, Any]
    #: Non-empty when the call is malformed (arguments not a JSON object, no tool
    #: name): what is wrong, in words the model can act on. ``args`` is then ``{}``.
    args_error: str = ""
    #: The arguments exactly as the model sent them, kept for a malformed call.
    raw_args: str = ""


@attrs.frozen(kw_only=True)
class ProviderItem:
    """One opaque piece of an assistant turn a provider needs back verbatim.

    ``dialect`` names the wire format it belongs to (``anthropic``,
    ``openai-responses``); ``data`` is the provider's own JSON for it (a thinking block
    with its signature, a reasoning item with its encrypted content). Never shown to
    people and never edited.
    """

    dialect: str
    data: dict[str, Any]


@attrs.frozen(kw_only=True)
class Message:
    role: Role
    content: str = ""
    tool_calls: list[ToolCallRequest] = attrs.field(factory=list)
    #: For ``tool`` messages: the call this is the result of, and the tool's name.
    tool_call_id: str = ""
    name: str = ""
    #: For ``assistant`` messages: items the provider must get back (module docstring).
    provider_items: tuple[ProviderItem, ...] = ()


@attrs.frozen(kw_only=True)
class ToolSpec:
    """A tool as models see it: a name, what it is for, and a JSON schema."""

    name: str
    description: str
    parameters: dict[str, Any]


@attrs.frozen(kw_only=True)
class Usage:
    """Tokens one model call consumed, as the provider reported them (0: not reported)."""

    input_tokens: int = 0
    output_tokens: int = 0
    #: The part of ``input_tokens`` the provider served from its prompt cache.
    cached_input_tokens: int = 0


@attrs.frozen(kw_only=True)
class ModelReply:
    text: str = ""
    tool_calls: list[ToolCallRequest] = attrs.field(factory=list)
    #: Optional reasoning summary, kept in task history.
    reasoning: str = ""
    #: What the call cost, when the provider says (the built-in model reports none).
    usage: Usage | None = None
    #: Why the model stopped, in the provider's words (``stop``, ``end_turn``,
    #: ``tool_use``, ``max_tokens``, ``length``, …); empty when not reported.
    stop_reason: str = ""
    #: Items to send back with this turn on the next call (module docstring).
    provider_items: tuple[ProviderItem, ...] = ()
    #: The model that answered, when a fallback list chose another than the first.
    model: str = ""

    def to_message(self) -> Message:
        """This reply as the assistant message of the conversation."""
        return Message(
            role="assistant",
            content=self.text,
            tool_calls=list(self.tool_calls),
            provider_items=self.provider_items,
        )


@attrs.frozen(kw_only=True)
class Retrying:
    """A model call failed in a way worth another try; the next try starts in ``delay_s``.

    ``reason`` is short and for people ("rate limited", "server error 503", "timed out").
    """

    reason: str
    attempt: int
    delay_s: float


class ModelError(Exception):
    """A model failed: provider error, timeout, malformed tool call (R62).

    The message is the provider's own words where there are some; the task ends as
    ``failed`` with it.
    """


class ContextLengthError(ModelError):
    """The provider refused the input as longer than the model's context window.

    The caller may compact the conversation and try once more.
    """


#: Receives streamed text deltas as they arrive (for ``text`` events).
TextSink = Callable[[str], Awaitable[None]]

#: Told before each back-off of a retried call (for ``retrying`` events).
RetrySink = Callable[[Retrying], Awaitable[None]]


class Model(Protocol):
    """Messages and tool schemas in; text and tool calls out.

    ``complete`` must be cancellable at any checkpoint (a back-off between retries
    included) and must raise only `ModelError` for provider problems. When ``on_text``
    is given, text is also streamed through it (the final reply still carries the whole
    text); when ``on_retry`` is given, it is told of each retry before its back-off.
    """

    @property
    def name(self) -> str: ...

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        *,
        on_text: TextSink | None = None,
        on_retry: RetrySink | None = None,
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
