"""What the three dialects share: the official SDK client made lazily, one call retried,
and every SDK failure turned into `ModelError` (R61, R62, issue 31).

The ``openai`` and ``anthropic`` SDKs run on Trio through anyio (their HTTP client,
httpx2, speaks Trio natively), so every await is a cancellation point and a cancelled
call closes its connection. Both are imported the first time a call is made, in a
worker thread: together they cost about 1.5 s of imports (and the client's TLS
context some more), which neither the daemon's cold start (bench B7) nor the Trio
thread should pay. Both SDKs' own retries are off (``max_retries=0``): retries are
ours (`agentrio.engine.models.retry`), so each one is reported and a cancel during the wait
lands at once.

Both SDKs are generated from one template and raise the same family of exceptions;
`classify` maps them once for both:

==========================================  ===========================================
timeout (no data for ``timeout_s``)         `Transient` "model timed out after N s"
connection refused / reset / protocol       `Transient` "cannot reach the model at URL"
HTTP 429                                    `Transient` "rate limited", ``Retry-After``
HTTP 408, 409, 5xx, 529; stream ``error``   `Transient` "server error N" / "overloaded"
  events of type overloaded / api_error
a refusal for context length (400 / 413)    `ContextLengthError` with the provider's text
any other HTTP status                       `ModelError` "model provider returned HTTP N"
an unreadable reply (bad JSON, bad events)  `ModelError` "model sent an unreadable reply"
anything else the SDK raises                `ModelError` "model request failed: …"
==========================================  ===========================================

A failure after text has already been streamed to the person is not retried (the
retry would repeat it): it ends the call as a `ModelError` saying so. The API key is
scrubbed from every message.
"""

from __future__ import annotations

import abc
import contextlib
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from types import ModuleType
from typing import Any, Final

import trio

from agentrio.engine.models.base import (
    ContextLengthError,
    Message,
    ModelError,
    ModelReply,
    RetrySink,
    TextSink,
    ToolCallRequest,
    ToolSpec,
)
from agentrio.engine.models.retry import (
    RetryPolicy,
    Transient,
    call_with_retries,
    parse_retry_after,
)

__all__ = [
    "MAX_DETAIL",
    "SdkModel",
    "classify",
    "create_and_read",
    "is_context_length",
    "parse_tool_call",
]

#: Longest piece of a provider's error text kept in a `ModelError`.
MAX_DETAIL: Final = 500
#: Longest time spent closing an abandoned stream.
CLOSE_S: Final = 1.0

#: How providers word "your input is longer than my context window": OpenAI's
#: ``context_length_exceeded`` code and message, Anthropic's "prompt is too long",
#: llama.cpp's / Ollama's "exceeds the available context size" and vLLM's "maximum
#: context length".
_CONTEXT_RE: Final = re.compile(
    r"context[_ ]length|context window|maximum context|context size|prompt is too long"
    r"|too many tokens|input is too long|reduce the length",
    re.IGNORECASE,
)


class SdkModel(abc.ABC):
    """One model at one endpoint, spoken to through an official SDK client.

    Subclasses name the SDK (`sdk_module`), build its client (`make_client`, run in a
    worker thread) and make one call (`attempt`); this class owns retries, error
    mapping, the lazily built client and closing it.
    """

    #: The SDK's import name (``openai`` / ``anthropic``).
    sdk_module: str = ""

    def __init__(
        self,
        *,
        name: str,
        base_url: str,
        api_key: str | None = None,
        timeout_s: float = 120.0,
        stream: bool = True,
        retry: RetryPolicy | None = None,
        max_output_tokens: int = 0,
        reasoning: str = "",
    ) -> None:
        self._name = name
        self._base_url = base_url.rstrip("/")
        self._api_key = api_key or ""
        self._timeout_s = timeout_s
        self._stream = stream
        self._retry = retry or RetryPolicy()
        self._max_output_tokens = max_output_tokens
        self._reasoning = reasoning
        self._client: Any = None
        self._sdk: ModuleType | None = None
        self._lock = trio.Lock()
        self._closed = False

    @property
    def name(self) -> str:
        return self._name

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self._name!r}, base_url={self._base_url!r})"

    @abc.abstractmethod
    def make_client(self, sdk: ModuleType) -> Any:
        """The SDK's async client for this endpoint (blocking: in a worker thread)."""

    @abc.abstractmethod
    async def attempt(
        self,
        client: Any,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        on_text: TextSink | None,
    ) -> ModelReply:
        """One try of the call; SDK exceptions propagate (`classify` maps them)."""

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        *,
        on_text: TextSink | None = None,
        on_retry: RetrySink | None = None,
    ) -> ModelReply:
        client = await self._ensure_client()
        assert self._sdk is not None
        sdk = self._sdk

        async def one_try() -> ModelReply:
            sink = _Sink(on_text)
            try:
                return await self.attempt(client, messages, tools, sink if on_text else None)
            except ModelError:
                raise
            except Exception as exc:
                mapped = classify(exc, sdk, base_url=self._base_url, timeout_s=self._timeout_s)
                mapped = _redacted(mapped, self._api_key)
                if isinstance(mapped, Transient) and sink.sent:
                    raise ModelError(
                        f"{mapped} (after part of the reply was shown; not retried)"
                    ) from None
                raise mapped from None

        return await call_with_retries(one_try, policy=self._retry, on_retry=on_retry)

    async def _ensure_client(self) -> Any:
        if self._closed:
            raise ModelError("the model was closed")
        async with self._lock:
            if self._client is None:
                self._client, self._sdk = await trio.to_thread.run_sync(self._build)
        return self._client

    def _build(self) -> tuple[Any, ModuleType]:
        """Blocking: import the SDK and build its client (module docstring)."""
        import importlib

        sdk = importlib.import_module(self.sdk_module)
        return self.make_client(sdk), sdk

    async def aclose(self) -> None:
        """Close the client's connection pool; the model cannot be used afterwards."""
        self._closed = True
        client, self._client = self._client, None
        if client is None:
            await trio.lowlevel.checkpoint()
            return
        with trio.move_on_after(CLOSE_S, shield=True):
            await client.close()


class _Sink:
    """Passes text on and remembers whether any went out (see `SdkModel.complete`)."""

    def __init__(self, on_text: TextSink | None) -> None:
        self._on_text = on_text
        self.sent = False

    async def __call__(self, text: str) -> None:
        if self._on_text is None or not text:
            return
        self.sent = True
        await self._on_text(text)
        # A reply already buffered is read without I/O, so without this a cancel made
        # while handling the text would land only after the whole reply.
        await trio.lowlevel.checkpoint_if_cancelled()


async def close_quietly(stream: Any) -> None:
    """Close an SDK stream, shielded but bounded, dropping errors (cleanup must not
    replace the error being raised)."""
    with trio.move_on_after(CLOSE_S, shield=True), contextlib.suppress(Exception):
        await stream.close()


@contextlib.asynccontextmanager
async def closing(stream: Any) -> AsyncIterator[Any]:
    """``async with closing(stream)``: the stream is closed however the block ends."""
    try:
        yield stream
    finally:
        await close_quietly(stream)


async def create_and_read(
    create: Callable[..., Awaitable[Any]],
    body: dict[str, Any],
    *,
    stream: bool,
    parse: Callable[[Any], ModelReply],
    read: Callable[[Any, TextSink | None], Awaitable[ModelReply]],
    on_text: TextSink | None,
    **stream_options: Any,
) -> ModelReply:
    """One SDK call, the way every dialect makes it: without ``stream``, ``create`` and
    ``parse`` the whole reply (its text then goes to ``on_text`` in one piece); with
    it, ``create(stream=True)`` and ``read`` the events, the stream closed however
    that ends."""
    if not stream:
        reply = parse(await create(**body))
        if on_text is not None and reply.text:
            await on_text(reply.text)
        return reply
    events = await create(**body, stream=True, **stream_options)
    async with closing(events):
        return await read(events, on_text)


def classify(exc: BaseException, sdk: ModuleType, *, base_url: str, timeout_s: float) -> ModelError:
    """The `ModelError` (maybe `Transient`) for an exception from an SDK call (module doc)."""
    import httpx2  # loaded with the SDK

    if isinstance(exc, sdk.APITimeoutError | httpx2.TimeoutException):
        return Transient(f"model timed out after {timeout_s:g} s", reason="timed out")
    if isinstance(exc, sdk.APIConnectionError | httpx2.TransportError):
        cause = exc.__cause__ or exc
        return Transient(
            f"cannot reach the model at {base_url}: {_describe(cause)}", reason="cannot connect"
        )
    if isinstance(exc, sdk.APIStatusError):
        status: int = exc.status_code
        body = exc.body if isinstance(exc.body, dict) else {}
        detail = _quote(_error_detail(body) or str(getattr(exc, "message", "") or exc))
        error_type = _error_type(body)
        if is_context_length(status, detail, body):
            return ContextLengthError(f"the input is too long for the model: {detail}")
        if status < 400:  # an ``error`` event inside a 200 stream (Anthropic)
            if error_type in ("overloaded_error", "api_error", "rate_limit_error"):
                reason = "rate limited" if error_type == "rate_limit_error" else "overloaded"
                return Transient(f"model provider failed: {detail}", reason=reason)
            return ModelError(f"model provider failed: {detail}")
        headline = f"model provider returned HTTP {status}"
        message = f"{headline}: {detail}" if detail else headline
        if status == 429:
            retry_after = parse_retry_after(dict(exc.response.headers))
            return Transient(message, reason="rate limited", retry_after_s=retry_after)
        if status in (408, 409) or status >= 500:
            reason = "overloaded" if status == 529 else f"server error {status}"
            retry_after = parse_retry_after(dict(exc.response.headers))
            return Transient(message, reason=reason, retry_after_s=retry_after)
        return ModelError(message)
    if isinstance(exc, ValueError | sdk.APIError):
        # The SSE decoder's json.loads, pydantic's validation, an error event: the
        # server sent something that is not the dialect.
        return ModelError(f"model sent an unreadable reply: {_describe(exc)}")
    # httpx2's other errors, and an event of a shape the SDK did not expect.
    return ModelError(f"model request failed: {_describe(exc)}")


def is_context_length(status: int, detail: str, body: dict[str, Any]) -> bool:
    """Whether an error is the provider refusing the input as too long."""
    error = body.get("error")
    code = error.get("code") if isinstance(error, dict) else body.get("code")
    if code == "context_length_exceeded":
        return True
    return status in (400, 413, 200) and bool(_CONTEXT_RE.search(detail))


def parse_tool_call(call_id: str, name: str, arguments: object, *, index: int) -> ToolCallRequest:
    """One tool call from the wire, never raising: arguments that are not a JSON object
    (or a call without a name) give a call with ``args_error`` set (agentrio.engine.models.base).
    An empty string counts as ``{}``, as several servers send for argument-less tools;
    a missing id becomes ``call_<index>``."""
    ident = call_id or f"call_{index}"
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    if not name:
        return ToolCallRequest(
            id=ident, name="", args={}, args_error="the call names no tool", raw_args=raw
        )
    if isinstance(arguments, dict):
        return ToolCallRequest(id=ident, name=name, args=arguments)
    if arguments is None or (isinstance(arguments, str) and not arguments.strip()):
        return ToolCallRequest(id=ident, name=name, args={})
    if not isinstance(arguments, str):
        problem = f"arguments must be a JSON object, not {type(arguments).__name__}"
        return ToolCallRequest(id=ident, name=name, args={}, args_error=problem, raw_args=raw)
    try:
        args = json.loads(arguments)
    except json.JSONDecodeError as exc:
        problem = f"arguments are not valid JSON ({exc})"
        return ToolCallRequest(id=ident, name=name, args={}, args_error=problem, raw_args=raw)
    if not isinstance(args, dict):
        problem = f"arguments must be a JSON object, not {type(args).__name__}"
        return ToolCallRequest(id=ident, name=name, args={}, args_error=problem, raw_args=raw)
    return ToolCallRequest(id=ident, name=name, args=args)


def call_arguments(call: ToolCallRequest) -> str:
    """A call's arguments as JSON text for the wire (a malformed call's own text)."""
    if call.args_error:
        return call.raw_args or "{}"
    return json.dumps(call.args, ensure_ascii=False)


def _error_detail(body: dict[str, Any]) -> str:
    """The provider's message from ``{"error": {"message": …}}``, ``{"error": "…"}``,
    ``{"message": …}`` or ``{"detail": …}``."""
    error = body.get("error")
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return str(error["message"])
    for value in (error, body.get("message"), body.get("detail")):
        if isinstance(value, str) and value:
            return value
    return ""


def _error_type(body: dict[str, Any]) -> str:
    error = body.get("error")
    kind = error.get("type") if isinstance(error, dict) else body.get("type")
    return kind if isinstance(kind, str) else ""


def _quote(text: str) -> str:
    text = text.strip()
    return text[:MAX_DETAIL] + "…" if len(text) > MAX_DETAIL else text


def _redacted(error: ModelError, key: str) -> ModelError:
    """``error`` with ``key`` scrubbed from its message (same class, same fields)."""
    if not key or key not in str(error):
        return error
    error.args = (str(error).replace(key, "***"),)
    return error


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


@contextlib.contextmanager
def unreadable(what: str) -> Iterator[None]:
    """Turn a malformed piece of a reply into a `ModelError` naming ``what``."""
    try:
        yield
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ModelError(f"model sent an unreadable {what}: {_describe(exc)}") from None


Attempt = Callable[[], Awaitable[ModelReply]]
