"""The ``openai`` provider: any OpenAI-compatible Chat Completions endpoint (R61).

One ``POST {base_url}/chat/completions`` per try through the official ``openai`` SDK
(agentrio.engine.models.sdk: lazily imported, its retries replaced by ours, its errors mapped to
`ModelError`). With ``stream`` on, text deltas go to ``on_text`` as they arrive, tool
calls are gathered from their deltas by ``index`` (several in one reply: parallel
calls), and the final usage chunk is asked for (``stream_options.include_usage``).
Reasoning deltas that OpenAI-compatible servers add (``reasoning_content`` from vLLM
and DeepSeek, ``reasoning`` from Ollama and OpenRouter) are kept as the reply's
reasoning; Chat Completions has nothing that must go back to the provider.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Sequence
from types import ModuleType
from typing import Any

import attrs

from agentrio.engine.config import ModelConfig
from agentrio.engine.models.base import (
    Message,
    ModelError,
    ModelReply,
    TextSink,
    ToolSpec,
    Usage,
)
from agentrio.engine.models.sdk import SdkModel, call_arguments, create_and_read, parse_tool_call

__all__ = ["OpenAIModel", "resolve_api_key", "to_wire"]

#: The variable each provider's key is read from when ``api_key_env`` is empty.
DEFAULT_KEY_ENV = {"openai": "OPENAI_API_KEY", "openai-responses": "OPENAI_API_KEY"}


async def resolve_api_key(
    config: ModelConfig, get_secret: Callable[[str], Awaitable[str | None]] | None
) -> str | None:
    """The API key for ``config``: the environment variable ``api_key_env`` (by default
    ``OPENAI_API_KEY``, or ``ANTHROPIC_API_KEY`` for ``anthropic``) when it is set and
    non-empty, else the stored secret ``api_key_secret`` (when a secret store is given),
    else ``None`` (local servers usually need no key)."""
    default = "ANTHROPIC_API_KEY" if config.provider == "anthropic" else "OPENAI_API_KEY"
    variable = config.api_key_env or default
    value = os.environ.get(variable, "")
    if value:
        return value
    if config.api_key_secret and get_secret is not None:
        return (await get_secret(config.api_key_secret)) or None
    return None


def openai_client(sdk: ModuleType, *, base_url: str, api_key: str, timeout_s: float) -> Any:
    """An ``AsyncOpenAI`` client for one endpoint, its own retries off. Without a key
    a placeholder is sent (local servers ignore it; the SDK insists on one, and must
    not fall back to reading ``OPENAI_API_KEY`` itself)."""
    return sdk.AsyncOpenAI(
        api_key=api_key or "unused", base_url=base_url, timeout=timeout_s, max_retries=0
    )


class OpenAIModel(SdkModel):
    """A Chat Completions client for one model at one endpoint (module docstring)."""

    sdk_module = "openai"

    def make_client(self, sdk: ModuleType) -> Any:
        return openai_client(
            sdk, base_url=self._base_url, api_key=self._api_key, timeout_s=self._timeout_s
        )

    async def attempt(
        self,
        client: Any,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        on_text: TextSink | None,
    ) -> ModelReply:
        body: dict[str, Any] = {"model": self._name, "messages": [to_wire(m) for m in messages]}
        if tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.parameters,
                    },
                }
                for t in tools
            ]
        if self._max_output_tokens:
            body["max_completion_tokens"] = self._max_output_tokens
        if self._reasoning:
            body["reasoning_effort"] = self._reasoning
        return await create_and_read(
            client.chat.completions.create,
            body,
            stream=self._stream,
            parse=_parse_reply,
            read=_read_stream,
            on_text=on_text,
            stream_options={"include_usage": True},
        )


def _parse_reply(response: Any) -> ModelReply:
    choices = getattr(response, "choices", None)
    if not choices:
        raise ModelError("model response has no choices")
    choice = choices[0]
    message = choice.message
    calls = [
        parse_tool_call(
            raw.id or "",
            raw.function.name if raw.function else "",
            raw.function.arguments if raw.function else None,
            index=index,
        )
        for index, raw in enumerate(message.tool_calls or [])
    ]
    return ModelReply(
        text=message.content or "",
        tool_calls=calls,
        reasoning=_reasoning_of(message),
        usage=_usage(getattr(response, "usage", None)),
        stop_reason=choice.finish_reason or "",
    )


@attrs.define
class _PartialCall:
    """A tool call assembled from stream deltas: the id and name arrive once, the
    arguments as string pieces to concatenate (or, from some servers, as one object)."""

    id: str = ""
    name: str = ""
    pieces: list[str] = attrs.field(factory=list)
    object_args: dict[str, Any] | None = None

    def add(self, raw: Any) -> None:
        if raw.id and not self.id:
            self.id = raw.id
        function = raw.function
        if function is None:
            return
        if function.name and not self.name:
            self.name = function.name
        if isinstance(function.arguments, str):
            self.pieces.append(function.arguments)
        elif isinstance(function.arguments, dict):
            self.object_args = function.arguments


async def _read_stream(stream: Any, on_text: TextSink | None) -> ModelReply:
    text: list[str] = []
    reasoning: list[str] = []
    partials: dict[int, _PartialCall] = {}
    usage: Usage | None = None
    stop_reason = ""
    async for chunk in stream:
        if chunk.usage is not None:
            usage = _usage(chunk.usage)
        if not chunk.choices:
            continue  # the final usage-only chunk
        choice = chunk.choices[0]
        if choice.finish_reason:
            stop_reason = choice.finish_reason
        delta = choice.delta
        if delta is None:
            continue
        thought = _reasoning_of(delta)
        if thought:
            reasoning.append(thought)
        if delta.content:
            text.append(delta.content)
            if on_text is not None:
                await on_text(delta.content)
        for position, raw in enumerate(delta.tool_calls or []):
            index = raw.index if isinstance(raw.index, int) else position
            partials.setdefault(index, _PartialCall()).add(raw)
    calls = [
        parse_tool_call(p.id, p.name, "".join(p.pieces) if p.pieces else p.object_args, index=index)
        for index, p in sorted(partials.items())
    ]
    return ModelReply(
        text="".join(text),
        tool_calls=calls,
        reasoning="".join(reasoning),
        usage=usage,
        stop_reason=stop_reason,
    )


def to_wire(message: Message) -> dict[str, Any]:
    """``message`` in the chat-completions request format."""
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
    if message.role == "assistant" and message.tool_calls:
        return {
            "role": "assistant",
            "content": message.content or None,
            "tool_calls": [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call_arguments(call)},
                }
                for call in message.tool_calls
            ],
        }
    return {"role": message.role, "content": message.content}


def _reasoning_of(part: Any) -> str:
    value = getattr(part, "reasoning_content", None) or getattr(part, "reasoning", None)
    return value if isinstance(value, str) else ""


def _usage(raw: Any) -> Usage | None:
    """Chat Completions usage: ``prompt_tokens`` (of which
    ``prompt_tokens_details.cached_tokens`` came from the cache), ``completion_tokens``."""
    if raw is None:
        return None
    details = getattr(raw, "prompt_tokens_details", None)
    cached = getattr(details, "cached_tokens", None) if details is not None else None
    return Usage(
        input_tokens=raw.prompt_tokens or 0,
        output_tokens=raw.completion_tokens or 0,
        cached_input_tokens=cached or 0,
    )
