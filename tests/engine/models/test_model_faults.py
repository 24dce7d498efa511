"""Failures of the three dialects against a fake provider of the tests' own: the faults
aimock cannot produce on demand (issue 31 item 6; R61, R62).

A Starlette app served by hypercorn's Trio worker on 127.0.0.1 (port 0) answers
``/v1/chat/completions``, ``/v1/responses`` and ``/v1/messages`` with whatever each
test queued: a 429 with ``Retry-After``, a 5xx, a hang, garbage, a context-length
refusal, a malformed tool call. Real time is used where sockets wait (MockClock would
fire the client's timeouts); waits are kept to tens of milliseconds.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import attrs
import pytest
import trio
from hypercorn.config import Config as HypercornConfig
from hypercorn.trio import serve
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from agentrio.engine.config import ModelConfig
from agentrio.engine.errors import ConfigError
from agentrio.engine.models.base import ContextLengthError, Message, ModelError, Retrying
from agentrio.engine.models.factory import close_model, make_model
from agentrio.engine.models.openai import resolve_api_key
from agentrio.engine.models.sdk import SdkModel

PROVIDERS = ["openai", "openai-responses", "anthropic"]
Answer = Callable[[dict[str, Any]], Response]


@attrs.define
class FakeProvider:
    base_url: str = ""
    answers: list[Answer | None] = attrs.field(factory=list)
    received: list[dict[str, Any]] = attrs.field(factory=list)
    headers: list[dict[str, str]] = attrs.field(factory=list)

    async def handle(self, request: Request) -> Response:
        body = await request.json()
        self.received.append(body)
        self.headers.append(dict(request.headers))
        answer = self.answers.pop(0) if self.answers else None
        if answer is None:  # a hang
            await trio.sleep_forever()
        return answer(body)


@pytest.fixture
async def provider(nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch) -> FakeProvider:
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(var, raising=False)
    fake = FakeProvider()
    paths = ["/v1/chat/completions", "/v1/responses", "/v1/messages"]
    app = Starlette(routes=[Route(p, fake.handle, methods=["POST"]) for p in paths])
    config = HypercornConfig()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = None
    config.loglevel = "WARNING"
    binds: list[str] = await nursery.start(serve, app, config)
    fake.base_url = binds[0]
    return fake


async def model_for(provider: FakeProvider, dialect: str, **options: Any) -> SdkModel:
    settings: dict[str, Any] = {
        "provider": dialect,
        "name": "test-model",
        "base_url": f"{provider.base_url}/v1",
        "timeout_s": 5.0,
        "retry_base_s": 0.0,
        "api_key_env": "AGENTRIO_TEST_KEY",
    }
    settings.update(options)
    model = await make_model(ModelConfig(**settings))
    assert isinstance(model, SdkModel)
    return model


def success(dialect: str, text: str = "ok") -> Answer:
    """A non-streaming success in ``dialect``'s shape."""

    def answer(body: dict[str, Any]) -> Response:
        if dialect == "openai":
            message = {"role": "assistant", "content": text}
            data: dict[str, Any] = {
                "id": "c",
                "object": "chat.completion",
                "created": 0,
                "model": "m",
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
            }
        elif dialect == "openai-responses":
            data = {
                "id": "r",
                "object": "response",
                "created_at": 0,
                "model": "m",
                "status": "completed",
                "output": [
                    {
                        "type": "message",
                        "id": "m1",
                        "role": "assistant",
                        "status": "completed",
                        "content": [{"type": "output_text", "text": text, "annotations": []}],
                    }
                ],
                "usage": {"input_tokens": 3, "output_tokens": 1, "total_tokens": 4},
                "parallel_tool_calls": True,
                "tool_choice": "auto",
                "tools": [],
            }
        else:
            data = {
                "id": "msg",
                "type": "message",
                "role": "assistant",
                "model": "m",
                "content": [{"type": "text", "text": text}],
                "stop_reason": "end_turn",
                "usage": {"input_tokens": 3, "output_tokens": 1},
            }
        return JSONResponse(data)

    return answer


def status(code: int, message: str, headers: dict[str, str] | None = None, **extra: Any) -> Answer:
    def answer(body: dict[str, Any]) -> Response:
        error = {"message": message, "type": "error", **extra}
        return JSONResponse({"type": "error", "error": error}, status_code=code, headers=headers)

    return answer


def garbage(body: dict[str, Any]) -> Response:
    async def chunks() -> AsyncIterator[str]:
        yield "event: message_start\ndata: {not json at all\n\n"
        yield "data: {not json at all\n\n"

    return StreamingResponse(chunks(), media_type="text/event-stream")


async def failure(
    provider: FakeProvider, dialect: str, kind: type[ModelError] = ModelError, **options: Any
) -> ModelError:
    """The error one call of a ``dialect`` model to ``provider`` fails with."""
    model = await model_for(provider, dialect, **options)
    try:
        with pytest.raises(kind) as info:
            await model.complete(USER, [])
    finally:
        await close_model(model)
    return info.value


USER = [Message(role="user", content="go")]


@pytest.mark.parametrize("dialect", PROVIDERS)
async def test_429_with_retry_after_then_success_gives_one_retrying(
    provider: FakeProvider, dialect: str
) -> None:
    """Issue 31 (6): a 429 with ``Retry-After`` is retried after the wait it names,
    reported once through ``on_retry``; the second try answers."""
    provider.answers = [status(429, "slow down", {"Retry-After": "0.05"}), success(dialect)]
    retries: list[Retrying] = []

    async def on_retry(notice: Retrying) -> None:
        retries.append(notice)

    model = await model_for(provider, dialect, stream=False)
    try:
        start = trio.current_time()
        reply = await model.complete(USER, [], on_retry=on_retry)
        elapsed = trio.current_time() - start
    finally:
        await close_model(model)
    assert reply.text == "ok"
    assert retries == [Retrying(reason="rate limited", attempt=1, delay_s=0.05)]
    assert elapsed >= 0.05
    assert len(provider.received) == 2


@pytest.mark.parametrize("dialect", PROVIDERS)
async def test_cancel_during_back_off_lands_at_once(provider: FakeProvider, dialect: str) -> None:
    """Issue 31 (6): a cancel during a 30 s back-off ends the call within 100 ms."""
    provider.answers = [status(503, "busy", {"Retry-After": "30"})]
    model = await model_for(provider, dialect, stream=False)
    canceled_at: list[float] = []
    try:
        with trio.CancelScope() as scope:

            async def on_retry(notice: Retrying) -> None:
                assert notice.delay_s == 30
                canceled_at.append(trio.current_time())
                scope.cancel()

            await model.complete(USER, [], on_retry=on_retry)
        ended = trio.current_time()
    finally:
        await close_model(model)
    assert scope.cancelled_caught
    assert ended - canceled_at[0] < 0.1


@pytest.mark.parametrize("dialect", PROVIDERS)
async def test_server_errors_are_retried_and_then_give_up(
    provider: FakeProvider, dialect: str
) -> None:
    """Issue 31 (6): 5xx is retried with bounded back-off, at most ``retries`` tries in
    all; then the call fails with the provider's words."""
    provider.answers = [status(500, "boom"), status(502, "bad gateway"), status(503, "down")]
    retries: list[Retrying] = []

    async def on_retry(notice: Retrying) -> None:
        retries.append(notice)

    model = await model_for(provider, dialect, stream=False, retries=3)
    try:
        with pytest.raises(ModelError) as info:
            await model.complete(USER, [], on_retry=on_retry)
    finally:
        await close_model(model)
    assert [(r.reason, r.attempt) for r in retries] == [
        ("server error 500", 1),
        ("server error 502", 2),
    ]
    assert str(info.value) == "model provider returned HTTP 503: down (gave up after 3 tries)"


@pytest.mark.parametrize("dialect", PROVIDERS)
async def test_hang_times_out_and_is_retried(provider: FakeProvider, dialect: str) -> None:
    """Issue 31 (6): a provider that never answers times out after ``timeout_s``, is
    retried, and the retry's answer is used."""
    provider.answers = [None, success(dialect, "late")]
    retries: list[Retrying] = []

    async def on_retry(notice: Retrying) -> None:
        retries.append(notice)

    model = await model_for(provider, dialect, stream=False, timeout_s=0.3)
    try:
        reply = await model.complete(USER, [], on_retry=on_retry)
    finally:
        await close_model(model)
    assert reply.text == "late"
    assert [r.reason for r in retries] == ["timed out"]


@pytest.mark.parametrize("dialect", PROVIDERS)
async def test_garbage_stream_is_a_model_error(provider: FakeProvider, dialect: str) -> None:
    """Issue 31 (6), R62: an event stream that is not JSON fails the call clearly,
    without retrying a server that does not speak the dialect."""
    provider.answers = [garbage]
    error = await failure(provider, dialect)
    assert str(error).startswith("model sent an unreadable reply")
    assert len(provider.received) == 1


@pytest.mark.parametrize("dialect", PROVIDERS)
async def test_context_length_refusal_is_context_length_error(
    provider: FakeProvider, dialect: str
) -> None:
    """Issue 31 (6): a refusal for length is `ContextLengthError` (the loop compacts),
    never retried."""
    provider.answers = [status(400, "prompt is too long: 210000 tokens > 200000 maximum")]
    error = await failure(provider, dialect, ContextLengthError)
    assert "prompt is too long" in str(error)
    assert len(provider.received) == 1


@pytest.mark.parametrize("dialect", PROVIDERS)
async def test_other_4xx_fail_at_once_and_scrub_the_key(
    provider: FakeProvider, dialect: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R62: a 401 is not retried; the key never appears in the error."""
    monkeypatch.setenv("AGENTRIO_TEST_KEY", "sk-secret-123")
    provider.answers = [status(401, "bad key sk-secret-123")]
    error = await failure(provider, dialect)
    assert str(error) == "model provider returned HTTP 401: bad key ***"
    assert len(provider.received) == 1
    sent = provider.headers[0]
    assert "sk-secret-123" in (sent.get("authorization", "") + sent.get("x-api-key", ""))


@pytest.mark.parametrize("dialect", PROVIDERS)
async def test_connection_refused_is_retried_then_names_the_address(dialect: str) -> None:
    """R62: an endpoint that is not listening fails after its retries, naming it."""
    sock = trio.socket.socket()
    await sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    base_url = f"http://127.0.0.1:{port}/v1"
    model = await make_model(
        ModelConfig(provider=dialect, name="m", base_url=base_url, retries=2, retry_base_s=0)
    )
    try:
        with pytest.raises(ModelError) as info:
            await model.complete(USER, [])
    finally:
        await close_model(model)
    assert str(info.value).startswith("cannot reach the model at http://127.0.0.1:")
    assert str(info.value).endswith("(gave up after 2 tries)")


async def test_anthropic_malformed_tool_input_is_handed_up(provider: FakeProvider) -> None:
    """Issue 31 (6): streamed tool input that is not JSON becomes a call with
    ``args_error`` and the raw text, never an exception."""

    def answer(body: dict[str, Any]) -> Response:
        events = [
            (
                "message_start",
                {
                    "type": "message_start",
                    "message": {
                        "id": "m",
                        "type": "message",
                        "role": "assistant",
                        "model": "m",
                        "content": [],
                        "stop_reason": None,
                        "usage": {"input_tokens": 5, "output_tokens": 0},
                    },
                },
            ),
            (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {
                        "type": "tool_use",
                        "id": "t1",
                        "name": "run_command",
                        "input": {},
                    },
                },
            ),
            (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "input_json_delta", "partial_json": '{"command": '},
                },
            ),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": "tool_use"},
                    "usage": {"output_tokens": 4},
                },
            ),
            ("message_stop", {"type": "message_stop"}),
        ]

        async def chunks() -> AsyncIterator[str]:
            for name, data in events:
                yield f"event: {name}\ndata: {json.dumps(data)}\n\n"

        return StreamingResponse(chunks(), media_type="text/event-stream")

    provider.answers = [answer]
    model = await model_for(provider, "anthropic")
    try:
        reply = await model.complete(USER, [])
    finally:
        await close_model(model)
    (call,) = reply.tool_calls
    assert (call.id, call.name, call.args, call.raw_args) == (
        "t1",
        "run_command",
        {},
        '{"command": ',
    )
    assert call.args_error.startswith("arguments are not valid JSON")
    assert reply.stop_reason == "tool_use"
    assert reply.usage is not None
    assert reply.usage.output_tokens == 4


async def test_resolve_api_key_prefers_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """R61: the key comes from the configured variable first, then the secret store;
    an empty ``api_key_env`` reads the provider's usual variable."""
    asked: list[str] = []

    async def get_secret(name: str) -> str | None:
        asked.append(name)
        await trio.lowlevel.checkpoint()
        return {"openai": "sk-stored"}.get(name)

    config = ModelConfig(
        provider="openai", api_key_env="AGENTRIO_TEST_KEY", api_key_secret="openai"
    )
    monkeypatch.setenv("AGENTRIO_TEST_KEY", "sk-env")
    assert await resolve_api_key(config, get_secret) == "sk-env"
    monkeypatch.setenv("AGENTRIO_TEST_KEY", "")
    assert await resolve_api_key(config, get_secret) == "sk-stored"
    assert await resolve_api_key(config, None) is None
    assert asked == ["openai"]
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-oai")
    assert await resolve_api_key(ModelConfig(provider="anthropic"), None) == "sk-ant"
    assert await resolve_api_key(ModelConfig(provider="openai-responses"), None) == "sk-oai"


@pytest.mark.parametrize("dialect", PROVIDERS)
@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, 'model.name: required with provider = "{p}" (the model to call)'),
        (
            {"name": "m", "base_url": "localhost:1/v1"},
            "model.base_url: expected an http(s) URL, got 'localhost:1/v1'",
        ),
        ({"name": "m", "timeout_s": 0}, "model.timeout_s: expected a number of seconds > 0"),
    ],
)
async def test_factory_rejects_bad_config(
    dialect: str, options: dict[str, Any], message: str
) -> None:
    """R61: configuration mistakes are one-line ConfigErrors naming the key."""
    with pytest.raises(ConfigError) as info:
        await make_model(ModelConfig(provider=dialect, **options))
    assert str(info.value) == message.format(p=dialect)
