"""The ``openai-responses`` provider: the OpenAI Responses API (R61, issue 31).

One ``POST {base_url}/responses`` per try through the official ``openai`` SDK
(agentrio.engine.models.sdk). Requests are stateless (``store: false``): the whole conversation
is sent each time, as with the other dialects, so a daemon restart or a fallback loses
nothing a provider kept. Reasoning models think in ``reasoning`` items that must go
back, with their ``encrypted_content`` (asked for through ``include``), on the next
call of the same turn; they ride on the assistant `Message` as `ProviderItem` values
tagged ``openai-responses`` and are put back in front of the turn's text and calls.

The conversation maps as: the first message, when it is a system message (the run's
system prompt), as ``instructions``; other system and user messages as input
messages, an assistant turn as its reasoning items, an output message and one
``function_call`` item per call (parallel calls are several), a tool result as a
``function_call_output`` item.
Streaming sends ``response.output_text.delta`` text to ``on_text``; the reply is
assembled from the ``response.output_item.done`` items, and usage and stop reason
from ``response.completed`` (or ``response.incomplete``). A ``response.failed`` or
``error`` event is a `ModelError` (a context-length one a `ContextLengthError`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from agentrio.engine.models.base import (
    ContextLengthError,
    Message,
    ModelError,
    ModelReply,
    ProviderItem,
    TextSink,
    ToolCallRequest,
    ToolSpec,
    Usage,
)
from agentrio.engine.models.openai import OpenAIModel
from agentrio.engine.models.sdk import (
    call_arguments,
    create_and_read,
    is_context_length,
    parse_tool_call,
)

__all__ = ["DIALECT", "ResponsesModel", "to_input"]

DIALECT: Final = "openai-responses"


class ResponsesModel(OpenAIModel):
    """A Responses API client for one model at one endpoint (module docstring); the
    client is Chat Completions' (`OpenAIModel`), the call is not."""

    async def attempt(
        self,
        client: Any,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        on_text: TextSink | None,
    ) -> ModelReply:
        body: dict[str, Any] = {"model": self._name}
        if messages and messages[0].role == "system":  # the run's system prompt
            body["instructions"] = messages[0].content
            messages = messages[1:]
        body.update(input=to_input(messages), store=False, include=["reasoning.encrypted_content"])
        if tools:
            body["tools"] = [
                {
                    "type": "function",
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.parameters,
                }
                for t in tools
            ]
        if self._max_output_tokens:
            body["max_output_tokens"] = self._max_output_tokens
        if self._reasoning:
            body["reasoning"] = {"effort": self._reasoning, "summary": "auto"}
        return await create_and_read(
            client.responses.create,
            body,
            stream=self._stream,
            parse=lambda response: _reply_of(response, list(response.output or [])),
            read=_read_stream,
            on_text=on_text,
        )


async def _read_stream(stream: Any, on_text: TextSink | None) -> ModelReply:
    items: dict[int, Any] = {}
    streamed: list[str] = []
    final: Any = None
    async for event in stream:
        kind = event.type
        if kind == "response.output_text.delta":
            streamed.append(event.delta)
            if on_text is not None:
                await on_text(event.delta)
        elif kind == "response.output_item.done":
            items[event.output_index] = event.item
        elif kind in ("response.completed", "response.incomplete"):
            final = event.response
        elif kind == "response.failed":
            error = event.response.error
            _fail(getattr(error, "code", "") or "", getattr(error, "message", "") or "failed")
        elif kind == "error":
            _fail(getattr(event, "code", "") or "", getattr(event, "message", "") or "error")
    if final is None:
        raise ModelError("model stream ended before the response was complete")
    output = [items[i] for i in sorted(items)] or list(final.output or [])
    reply = _reply_of(final, output)
    if not reply.text and streamed:
        reply = ModelReply(
            text="".join(streamed),
            tool_calls=reply.tool_calls,
            reasoning=reply.reasoning,
            usage=reply.usage,
            stop_reason=reply.stop_reason,
            provider_items=reply.provider_items,
        )
    return reply


def _fail(code: str, message: str) -> None:
    body = {"error": {"code": code, "message": message}}
    if is_context_length(400, message, body):
        raise ContextLengthError(f"the input is too long for the model: {message}")
    raise ModelError(f"model provider failed: {message}")


def _reply_of(response: Any, output: Sequence[Any]) -> ModelReply:
    text: list[str] = []
    reasoning: list[str] = []
    calls: list[ToolCallRequest] = []
    kept: list[ProviderItem] = []
    for item in output:
        kind = getattr(item, "type", "")
        if kind == "message":
            for part in item.content or []:
                if getattr(part, "type", "") == "output_text":
                    text.append(part.text)
        elif kind == "function_call":
            call_id, name = item.call_id or "", item.name or ""
            calls.append(parse_tool_call(call_id, name, item.arguments, index=len(calls)))
        elif kind == "reasoning":
            reasoning.extend(s.text for s in item.summary or [] if getattr(s, "text", ""))
            kept.append(ProviderItem(dialect=DIALECT, data=_item_data(item)))
    details = getattr(response, "incomplete_details", None)
    stop = getattr(details, "reason", None) or getattr(response, "status", None) or ""
    return ModelReply(
        text="".join(text),
        tool_calls=calls,
        reasoning="\n".join(reasoning),
        usage=_usage(getattr(response, "usage", None)),
        stop_reason=str(stop),
        provider_items=tuple(kept),
    )


def _item_data(item: Any) -> dict[str, Any]:
    """A reasoning item as it goes back in ``input``: its id, summary and encrypted
    content (the fields the API accepts on input; ``status`` is output-only)."""
    data: dict[str, Any] = item.model_dump(mode="json", exclude_none=True)
    data.pop("status", None)
    return data


def to_input(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """The conversation as Responses ``input`` items (module docstring)."""
    items: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "tool":
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": message.tool_call_id,
                    "output": message.content,
                }
            )
        elif message.role == "assistant":
            items.extend(dict(p.data) for p in message.provider_items if p.dialect == DIALECT)
            if message.content:
                items.append({"role": "assistant", "content": message.content})
            items.extend(
                {
                    "type": "function_call",
                    "call_id": call.id,
                    "name": call.name,
                    "arguments": call_arguments(call),
                }
                for call in message.tool_calls
            )
        else:
            items.append({"role": message.role, "content": message.content})
    return items


def _usage(raw: Any) -> Usage | None:
    if raw is None:
        return None
    details = getattr(raw, "input_tokens_details", None)
    cached = getattr(details, "cached_tokens", None) if details is not None else None
    return Usage(
        input_tokens=raw.input_tokens or 0,
        output_tokens=raw.output_tokens or 0,
        cached_input_tokens=cached or 0,
    )
