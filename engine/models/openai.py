"""The openai provider: any OpenAI-compatible chat-completions endpoint (R61).

One ``POST {base_url}/chat/completions`` per call over an ``httpx.AsyncClient`` (httpx
runs natively on Trio, so every await is a cancellation point and cancelling a call
closes its connection). With ``stream`` on, the request asks for server-sent events and
text deltas go to ``on_text`` as they arrive; a server that answers a streaming request
with plain JSON is read as a non-streaming reply.

Failures end the task with the provider's words (R62), always as `ModelError`:

- HTTP status >= 400: ``model provider returned HTTP 500: <error.message or body>``
  (at most 500 characters of the provider's text);
- no data for ``timeout_s`` seconds (connecting, sending, or waiting for the next bytes;
  a steadily streaming reply may take longer in total):
  ``model timed out after N s``;
- connection and protocol errors: ``cannot reach the model at <base_url>: …`` /
  ``model request failed: …``;
- tool call arguments that are not a JSON object: ``malformed tool call <name>: …``.

All httpx errors are translated in one place, `_map_errors`. The API key is sent only in
the ``Authorization`` header and is scrubbed from every error message.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from types import TracebackType
from typing import Any, Final

import attrs
import httpx
import trio

from agentrio.engine.config import ModelConfig
from agentrio.engine.models.base import (
    Message,
    ModelError,
    ModelReply,
    RetrySink,
    TextSink,
    ToolCallRequest,
    ToolSpec,
)

__all__ = ["OpenAIModel", "resolve_api_key", "to_wire"]

#: Longest time spent closing an abandoned stream (see `_unwind`).
UNWIND_S: Final = 1.0
#: Longest piece of a provider's error text kept in a `ModelError`.
MAX_DETAIL: Final = 500


async def resolve_api_key(
    config: ModelConfig, get_secret: Callable[[str], Awaitable[str | None]] | None
) -> str | None:
    """The API key for ``config``: the environment variable ``api_key_env`` when it is
    set and non-empty, else the stored secret ``api_key_secret`` (when a secret store is
    given), else ``None`` (local servers usually need no key)."""
    if config.api_key_env:
        value = os.environ.get(config.api_key_env, "")
        if value:
            return value
    if config.api_key_secret and get_secret is not None:
        return (await get_secret(config.api_key_secret)) or None
    return None


class OpenAIModel:
    """A chat-completions client for one model at one endpoint.

    The client (and its connection pool) lives as long as the model; call `aclose`, or
    use the model as an async context manager. ``transport`` replaces the network
    (e.g. ``httpx.MockTransport``); by default httpx's own is used.
    """

    def __init__(
        self,
        *,
        name: str,
        base_url: str,
        api_key: str | None = None,
        timeout_s: float = 120.0,
        stream: bool = True,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._name = name
        self._base_url = base_url.rstrip("/")
        self._url = f"{self._base_url}/chat/completions"
        self._api_key = api_key or ""
        self._timeout_s = timeout_s
        self._stream = stream
        headers = {"Accept": "text/event-stream" if stream else "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        self._client = httpx.AsyncClient(
            headers=headers, timeout=httpx.Timeout(timeout_s), transport=transport
        )

    @property
    def name(self) -> str:
        return self._name

    def __repr__(self) -> str:
        return f"OpenAIModel(name={self._name!r}, base_url={self._base_url!r})"

    async def aclose(self) -> None:
        """Close the connection pool; the model cannot be used afterwards."""
        await self._client.aclose()

    async def __aenter__(self) -> OpenAIModel:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        *,
        on_text: TextSink | None = None,
        on_retry: RetrySink | None = None,
    ) -> ModelReply:
        body: dict[str, Any] = {
            "model": self._name,
            "messages": [to_wire(m) for m in messages],
            "stream": self._stream,
        }
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
        with self._map_errors():
            async with self._client.stream("POST", self._url, json=body) as response:
                if response.status_code >= 400:
                    await response.aread()
                    detail = self._quote(_status_detail(response))
                    status = f"model provider returned HTTP {response.status_code}"
                    raise ModelError(f"{status}: {detail}" if detail else status)
                content_type = response.headers.get("content-type", "")
                if self._stream and content_type.startswith("text/event-stream"):
                    lines = response.aiter_lines()
                    try:
                        reply = await self._read_stream(lines, on_text)
                        await _drain(lines)
                        return reply
                    finally:
                        await _unwind(response, lines)
                await response.aread()
                reply = self._parse_reply(response)
        if on_text is not None and reply.text:
            await on_text(reply.text)
        return reply

    @contextlib.contextmanager
    def _map_errors(self) -> Iterator[None]:
        """Translate every httpx error into `ModelError` (the one boundary, as httpcore's
        ``map_exceptions``); cancellation and our own errors pass through untouched."""
        try:
            yield
        except httpx.TimeoutException:
            raise ModelError(f"model timed out after {self._timeout_s:g} s") from None
        except httpx.ConnectError as exc:
            message = f"cannot reach the model at {self._base_url}: {_describe(exc)}"
            raise ModelError(self._redact(message)) from None
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            raise ModelError(self._redact(f"model request failed: {_describe(exc)}")) from None

    def _redact(self, text: str) -> str:
        return text.replace(self._api_key, "***") if self._api_key else text

    def _quote(self, text: str) -> str:
        """Provider text fit for a `ModelError`: the key scrubbed first (so a cut cannot
        leave part of it), then at most `MAX_DETAIL` characters."""
        text = self._redact(text.strip())
        return text[:MAX_DETAIL] + "…" if len(text) > MAX_DETAIL else text

    def _parse_reply(self, response: httpx.Response) -> ModelReply:
        data = self._json(response.text, "response")
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise ModelError("model response has no choices")
        message = choices[0].get("message")
        if not isinstance(message, dict):
            raise ModelError("model response has no message")
        raw_calls = message.get("tool_calls") or []
        if not isinstance(raw_calls, list):
            raise ModelError("model response has malformed tool_calls")
        calls = []
        for index, raw in enumerate(raw_calls):
            function = raw.get("function") if isinstance(raw, dict) else None
            if not isinstance(function, dict):
                raise ModelError(f"malformed tool call #{index}: no function")
            calls.append(
                _tool_call(index, raw.get("id"), function.get("name"), function.get("arguments"))
            )
        return ModelReply(
            text=_text(message.get("content")),
            tool_calls=calls,
            reasoning=_text(message.get("reasoning_content") or message.get("reasoning")),
        )

    async def _read_stream(self, lines: AsyncIterator[str], on_text: TextSink | None) -> ModelReply:
        """Read ``data:`` lines until ``[DONE]`` (or the end of the body), gathering
        content deltas and tool-call deltas by their ``index``."""
        text: list[str] = []
        reasoning: list[str] = []
        partials: dict[int, _PartialCall] = {}
        async for line in lines:
            if not line.startswith("data:"):
                continue  # blank separators, comments, "event:" lines
            payload = line.removeprefix("data:").strip()
            if payload == "[DONE]":
                break
            chunk = self._json(payload, "stream chunk")
            choices = chunk.get("choices")
            if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
                continue  # e.g. a final usage-only chunk
            delta = choices[0].get("delta")
            if not isinstance(delta, dict):
                continue
            thought = _text(delta.get("reasoning_content") or delta.get("reasoning"))
            if thought:
                reasoning.append(thought)
            content = _text(delta.get("content"))
            if content:
                text.append(content)
                if on_text is not None:
                    await on_text(content)
            raw_calls = delta.get("tool_calls") or []
            if not isinstance(raw_calls, list):
                raise ModelError("model stream has malformed tool_calls")
            for position, raw in enumerate(raw_calls):
                if not isinstance(raw, dict):
                    raise ModelError(f"malformed tool call #{position}: not an object")
                index = raw.get("index")
                if not isinstance(index, int) or isinstance(index, bool):
                    index = position  # servers that send one call per chunk may omit it
                partial = partials.setdefault(index, _PartialCall())
                partial.add(raw)
        calls = [
            _tool_call(index, p.id, p.name, p.arguments if p.pieces else p.object_args)
            for index, p in sorted(partials.items())
        ]
        return ModelReply(text="".join(text), tool_calls=calls, reasoning="".join(reasoning))

    def _json(self, text: str, what: str) -> dict[str, Any]:
        """``text`` as a JSON object; an ``error`` member (some providers send errors
        with status 200, or mid-stream) becomes a `ModelError` with its message."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            raise ModelError(f"model sent a {what} that is not JSON: {self._quote(text)}") from None
        if not isinstance(data, dict):
            raise ModelError(f"model sent a {what} that is not a JSON object")
        if data.get("error"):
            raise ModelError(f"model provider error: {self._quote(_error_detail(data))}")
        return data


@attrs.define
class _PartialCall:
    """A tool call being assembled from stream deltas: the id and name arrive once, the
    arguments as string pieces to concatenate (or, from some servers, as one object)."""

    id: str = ""
    name: str = ""
    pieces: list[str] = attrs.field(factory=list)
    object_args: dict[str, Any] | None = None

    @property
    def arguments(self) -> str:
        return "".join(self.pieces)

    def add(self, raw: dict[str, Any]) -> None:
        if isinstance(raw.get("id"), str) and raw["id"] and not self.id:
            self.id = raw["id"]
        function = raw.get("function")
        if not isinstance(function, dict):
            return
        if isinstance(function.get("name"), str) and function["name"] and not self.name:
            self.name = function["name"]
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            self.pieces.append(arguments)
        elif isinstance(arguments, dict):
            self.object_args = arguments


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
                    "function": {
                        "name": call.name,
                        "arguments": json.dumps(call.args, ensure_ascii=False),
                    },
                }
                for call in message.tool_calls
            ],
        }
    return {"role": message.role, "content": message.content}


def _tool_call(index: int, call_id: object, name: object, arguments: object) -> ToolCallRequest:
    """Check one tool call. Arguments must be a JSON object (or an already-decoded one);
    an empty string counts as ``{}``, as several servers send for argument-less tools.
    A missing id becomes ``call_<index>``."""
    if not isinstance(name, str) or not name:
        raise ModelError(f"malformed tool call #{index}: no function name")
    if isinstance(arguments, dict):
        args: object = arguments
    elif arguments is None or (isinstance(arguments, str) and not arguments.strip()):
        args = {}
    elif isinstance(arguments, str):
        try:
            args = json.loads(arguments)
        except json.JSONDecodeError as exc:
            raise ModelError(f"malformed tool call {name}: {exc}") from None
    else:
        raise ModelError(f"malformed tool call {name}: arguments must be a JSON string")
    if not isinstance(args, dict):
        raise ModelError(
            f"malformed tool call {name}: arguments must be a JSON object, "
            f"not {type(args).__name__}"
        )
    ident = call_id if isinstance(call_id, str) and call_id else f"call_{index}"
    return ToolCallRequest(id=ident, name=name, args=args)


async def _drain(lines: AsyncIterator[str]) -> None:
    """Read what follows ``[DONE]`` (normally just the end of the body), so the
    connection goes back to the pool for the next call. The reply is complete already:
    a failure here is ignored, and a server still talking after `UNWIND_S` is left to
    `_unwind`."""
    with trio.move_on_after(UNWIND_S), contextlib.suppress(httpx.HTTPError):
        async for _ in lines:
            pass


async def _unwind(response: httpx.Response, lines: AsyncIterator[str]) -> None:
    """Close a streamed response and leave none of httpx's iterators suspended.

    httpx reads a body through nested async generators. Leaving them part-way (at
    ``[DONE]``, on an error, or when cancelled inside ``on_text``) lets Trio finalise
    them later with a ResourceWarning (encode/httpx#3686). Once the response is closed,
    the next read fails at the bottom of that chain and the failure unwinds every
    generator. Shielded but bounded by `UNWIND_S`, so a cancel is delayed by a moment at
    most; errors here are dropped, as cleanup must not replace the error being raised.
    """
    with trio.move_on_after(UNWIND_S, shield=True):
        await response.aclose()
        with contextlib.suppress(Exception):
            async for _ in lines:
                pass


def _status_detail(response: httpx.Response) -> str:
    """What the provider said in an error response: its JSON error message, else the
    body text."""
    text = response.text.strip()
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return text
    return (_error_detail(data) or text) if isinstance(data, dict) else text


def _error_detail(data: dict[str, Any]) -> str:
    """The provider's message from ``{"error": {"message": …}}``, ``{"error": "…"}``,
    ``{"message": …}`` or ``{"detail": …}``."""
    error = data.get("error")
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return str(error["message"])
    for value in (error, data.get("message"), data.get("detail")):
        if isinstance(value, str) and value:
            return value
    return json.dumps(error) if error else ""


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""
