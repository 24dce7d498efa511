"""The ``anthropic`` provider: the Anthropic Messages API (R61, issue 31).

One ``POST {base_url}/v1/messages`` per try through the official ``anthropic`` SDK
(agentrio.engine.models.sdk). ``base_url`` is the server's root (``https://api.anthropic.com``,
Ollama's ``http://127.0.0.1:11434``); a trailing ``/v1`` is dropped, as the SDK adds it.

The conversation maps as: system messages joined into ``system``; user text as a user
turn; an assistant turn as its thinking blocks, a text block and one ``tool_use`` block
per call (parallel calls are several); tool results as ``tool_result`` blocks of the
next user turn (consecutive tool results and a following user text share one turn,
as the API requires turns to alternate). With ``thinking_tokens`` set, extended
thinking is on and the reply's ``thinking`` / ``redacted_thinking`` blocks, signatures
and all, ride on the assistant `Message` as `ProviderItem` values tagged ``anthropic``:
the API refuses a tool-loop continuation whose assistant turn does not start with them.

The raw event stream is read (not the SDK's accumulating helper, which parses partial
tool-input JSON as it goes and would raise on a malformed call): text deltas go to
``on_text``, ``input_json_delta`` pieces are joined per block and parsed once at the
end (`parse_tool_call`), usage comes from ``message_start`` and ``message_delta``.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import Any, Final

import attrs

from agentrio.engine.models.base import (
    Message,
    ModelReply,
    ProviderItem,
    TextSink,
    ToolCallRequest,
    ToolSpec,
    Usage,
)
from agentrio.engine.models.sdk import SdkModel, create_and_read, parse_tool_call

__all__ = ["DEFAULT_MAX_TOKENS", "DIALECT", "AnthropicModel", "to_wire"]

DIALECT: Final = "anthropic"
#: ``max_tokens`` when ``[model] max_output_tokens`` is 0 (the API requires one).
DEFAULT_MAX_TOKENS: Final = 8192
_THINKING: Final = frozenset({"thinking", "redacted_thinking"})


class AnthropicModel(SdkModel):
    """A Messages API client for one model at one endpoint (module docstring)."""

    sdk_module = "anthropic"

    def __init__(self, *, thinking_tokens: int = 0, **options: Any) -> None:
        super().__init__(**options)
        self._base_url = self._base_url.removesuffix("/v1")
        self._thinking_tokens = thinking_tokens

    def make_client(self, sdk: ModuleType) -> Any:
        # Without a key a placeholder (as for openai): the SDK must not read one itself.
        return sdk.AsyncAnthropic(
            api_key=self._api_key or "unused",
            base_url=self._base_url,
            timeout=self._timeout_s,
            max_retries=0,
        )

    async def attempt(
        self,
        client: Any,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        on_text: TextSink | None,
    ) -> ModelReply:
        system, turns = to_wire(messages)
        max_tokens = self._max_output_tokens or DEFAULT_MAX_TOKENS
        body: dict[str, Any] = {"model": self._name, "messages": turns, "max_tokens": max_tokens}
        if system:
            body["system"] = system
        if tools:
            body["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.parameters}
                for t in tools
            ]
        if self._thinking_tokens:
            body["thinking"] = {"type": "enabled", "budget_tokens": self._thinking_tokens}
            body["max_tokens"] = max(max_tokens, self._thinking_tokens + 1024)
        return await create_and_read(
            client.messages.create,
            body,
            stream=self._stream,
            parse=_reply_of_message,
            read=_read_stream,
            on_text=on_text,
        )


@attrs.define
class _Block:
    """One content block being assembled from stream events."""

    data: dict[str, Any]
    pieces: list[str] = attrs.field(factory=list)


async def _read_stream(stream: Any, on_text: TextSink | None) -> ModelReply:
    blocks: dict[int, _Block] = {}
    input_tokens = cached = output_tokens = 0
    reported = False
    stop_reason = ""
    async for event in stream:
        kind = event.type
        if kind == "message_start":
            usage = event.message.usage
            if usage is not None:
                reported = True
                input_tokens, cached = _input_tokens(usage)
                output_tokens = usage.output_tokens or 0
        elif kind == "content_block_start":
            data = event.content_block.model_dump(mode="json", exclude_none=True)
            blocks[event.index] = _Block(data=data)
        elif kind == "content_block_delta":
            block = blocks.setdefault(event.index, _Block(data={"type": "text", "text": ""}))
            delta = event.delta
            if delta.type == "text_delta":
                block.data["text"] = block.data.get("text", "") + delta.text
                if on_text is not None:
                    await on_text(delta.text)
            elif delta.type == "input_json_delta":
                block.pieces.append(delta.partial_json)
            elif delta.type == "thinking_delta":
                block.data["thinking"] = block.data.get("thinking", "") + delta.thinking
            elif delta.type == "signature_delta":
                block.data["signature"] = block.data.get("signature", "") + delta.signature
        elif kind == "message_delta":
            if event.delta.stop_reason:
                stop_reason = event.delta.stop_reason
            usage = event.usage
            if usage is not None:
                reported = True
                output_tokens = usage.output_tokens or output_tokens
                if getattr(usage, "input_tokens", None):
                    input_tokens, cached = _input_tokens(usage)
    ordered = [blocks[i] for i in sorted(blocks)]
    return _reply_of_blocks(
        [(b.data, "".join(b.pieces) if b.pieces else None) for b in ordered],
        usage=Usage(
            input_tokens=input_tokens, output_tokens=output_tokens, cached_input_tokens=cached
        )
        if reported
        else None,
        stop_reason=stop_reason,
    )


def _reply_of_message(message: Any) -> ModelReply:
    usage = message.usage
    input_tokens, cached = _input_tokens(usage)
    return _reply_of_blocks(
        [(b.model_dump(mode="json", exclude_none=True), None) for b in message.content],
        usage=Usage(
            input_tokens=input_tokens,
            output_tokens=usage.output_tokens or 0,
            cached_input_tokens=cached,
        ),
        stop_reason=message.stop_reason or "",
    )


def _reply_of_blocks(
    blocks: Sequence[tuple[dict[str, Any], str | None]],
    *,
    usage: Usage | None,
    stop_reason: str,
) -> ModelReply:
    """A reply from content blocks; each ``tool_use`` block's input is its streamed JSON
    text when there is some, else its ``input`` object."""
    text: list[str] = []
    reasoning: list[str] = []
    calls: list[ToolCallRequest] = []
    kept: list[ProviderItem] = []
    for data, json_text in blocks:
        kind = data.get("type")
        if kind == "text":
            text.append(str(data.get("text", "")))
        elif kind == "tool_use":
            arguments: object = json_text if json_text is not None else data.get("input", {})
            calls.append(
                parse_tool_call(
                    str(data.get("id", "")), str(data.get("name", "")), arguments, index=len(calls)
                )
            )
        elif kind in _THINKING:
            if data.get("thinking"):
                reasoning.append(str(data["thinking"]))
            kept.append(ProviderItem(dialect=DIALECT, data=_thinking_data(data)))
    return ModelReply(
        text="".join(text),
        tool_calls=calls,
        reasoning="\n".join(reasoning),
        usage=usage,
        stop_reason=stop_reason,
        provider_items=tuple(kept),
    )


def _thinking_data(data: dict[str, Any]) -> dict[str, Any]:
    if data.get("type") == "redacted_thinking":
        return {"type": "redacted_thinking", "data": data.get("data", "")}
    return {
        "type": "thinking",
        "thinking": data.get("thinking", ""),
        "signature": data.get("signature", ""),
    }


def _input_tokens(usage: Any) -> tuple[int, int]:
    """All input tokens (Anthropic counts cache reads and writes apart from
    ``input_tokens``) and the part read from the cache."""
    read = getattr(usage, "cache_read_input_tokens", None) or 0
    written = getattr(usage, "cache_creation_input_tokens", None) or 0
    return (usage.input_tokens or 0) + read + written, read


def to_wire(messages: Sequence[Message]) -> tuple[str, list[dict[str, Any]]]:
    """``(system, messages)`` in the Messages API format (module docstring)."""
    system: list[str] = []
    turns: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})

    for message in messages:
        if message.role == "system":
            if message.content:
                system.append(message.content)
        elif message.role == "user":
            add("user", [{"type": "text", "text": message.content or "(empty)"}])
        elif message.role == "tool":
            add(
                "user",
                [
                    {
                        "type": "tool_result",
                        "tool_use_id": message.tool_call_id,
                        "content": message.content or "(no output)",
                    }
                ],
            )
        else:
            blocks = [dict(p.data) for p in message.provider_items if p.dialect == DIALECT]
            if message.content:
                blocks.append({"type": "text", "text": message.content})
            blocks.extend(
                {"type": "tool_use", "id": call.id, "name": call.name, "input": call.args}
                for call in message.tool_calls
            )
            if blocks:
                add("assistant", blocks)
    return "\n\n".join(system), turns
