"""engine/models/openai.py against a real local chat-completions server (R61, R62).

Every test talks HTTP to a Starlette app served by hypercorn's Trio worker on
127.0.0.1 (port 0), started in the test's own nursery. The fake provider records each
request (body and Authorization header) and answers with whatever the test set. Real
time is used (MockClock would fire httpx's timeouts while sockets wait); the one
timeout test waits 0.5 s.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import attrs
import pytest
import trio
from hypercorn.config import Config as HypercornConfig
from hypercorn.trio import serve
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from agentrio.engine.config import ModelConfig
from agentrio.engine.errors import ConfigError
from agentrio.engine.models.base import Message, ModelError, ModelReply, ToolCallRequest, ToolSpec
from agentrio.engine.models.factory import close_model, make_model
from agentrio.engine.models.openai import OpenAIModel, resolve_api_key

Answer = Callable[[dict[str, Any]], Awaitable[Response]]


@attrs.define
class Received:
    body: dict[str, Any]
    authorization: str | None
    #: The client's port: the same port on two requests means a reused connection.
    port: int = attrs.field(default=0, eq=False)


@attrs.define
class FakeProvider:
    """A chat-completions endpoint whose answer each test sets."""

    base_url: str = ""
    answer: Answer | None = None
    received: list[Received] = attrs.field(factory=list)

    async def handle(self, request: Request) -> Response:
        body = await request.json()
        port = request.client.port if request.client else 0
        self.received.append(Received(body, request.headers.get("authorization"), port))
        assert self.answer is not None, "the test set no answer"
        return await self.answer(body)


@pytest.fixture
async def provider(nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch) -> FakeProvider:
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(var, raising=False)
    fake = FakeProvider()
    app = Starlette(routes=[Route("/v1/chat/completions", fake.handle, methods=["POST"])])
    config = HypercornConfig()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = None
    config.loglevel = "WARNING"
    binds: list[str] = await nursery.start(serve, app, config)
    fake.base_url = f"{binds[0]}/v1"
    return fake


def model_for(provider: FakeProvider, **options: Any) -> OpenAIModel:
    settings: dict[str, Any] = {"name": "test-model", "api_key": "sk-test", "timeout_s": 5.0}
    settings.update(options)
    return OpenAIModel(base_url=provider.base_url, **settings)


def sse(*events: object) -> StreamingResponse:
    """A streaming answer; str events are sent raw (to split lines across writes),
    others as one ``data:`` event each."""

    async def body() -> AsyncIterator[str]:
        for event in events:
            yield event if isinstance(event, str) else f"data: {json.dumps(event)}\n\n"
            await trio.lowlevel.checkpoint()

    return StreamingResponse(body(), media_type="text/event-stream")


def answer_with(response: Response) -> Answer:
    async def answer(body: dict[str, Any]) -> Response:
        await trio.lowlevel.checkpoint()
        return response

    return answer


def completion(message: dict[str, Any]) -> JSONResponse:
    return JSONResponse(
        {"id": "x", "object": "chat.completion", "choices": [{"index": 0, "message": message}]}
    )


RUN_SPEC = ToolSpec(
    name="run_command",
    description="Run a command.",
    parameters={"type": "object", "properties": {"command": {"type": "string"}}},
)
CONVERSATION = [
    Message(role="system", content="You are helpful."),
    Message(role="user", content="run: echo hi"),
    Message(
        role="assistant",
        content="Running it.",
        tool_calls=[
            ToolCallRequest(id="call_1_0", name="run_command", args={"command": "echo hé"})
        ],
    ),
    Message(role="tool", tool_call_id="call_1_0", name="run_command", content="exit code 0\nhé"),
    Message(role="assistant", tool_calls=[ToolCallRequest(id="c2", name="ask_user", args={})]),
    Message(role="tool", tool_call_id="c2", name="ask_user", content="yes"),
    Message(role="user", content="thanks"),
]
WIRE_MESSAGES = [
    {"role": "system", "content": "You are helpful."},
    {"role": "user", "content": "run: echo hi"},
    {
        "role": "assistant",
        "content": "Running it.",
        "tool_calls": [
            {
                "id": "call_1_0",
                "type": "function",
                "function": {"name": "run_command", "arguments": '{"command": "echo hé"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1_0", "content": "exit code 0\nhé"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c2", "type": "function", "function": {"name": "ask_user", "arguments": "{}"}}
        ],
    },
    {"role": "tool", "tool_call_id": "c2", "content": "yes"},
    {"role": "user", "content": "thanks"},
]


async def test_non_streaming_text_and_request_shape(provider: FakeProvider) -> None:
    """R61: the request carries model, mapped messages (incl. tool calls and tool
    messages), the tools schema and the bearer key; the reply text comes back."""
    provider.answer = answer_with(
        completion({"role": "assistant", "content": "Hello there.", "reasoning_content": "hm"})
    )
    async with model_for(provider, stream=False) as model:
        assert model.name == "test-model"
        reply = await model.complete(CONVERSATION, [RUN_SPEC])
    assert reply == ModelReply(text="Hello there.", reasoning="hm")
    assert provider.received == [
        Received(
            {
                "model": "test-model",
                "messages": WIRE_MESSAGES,
                "stream": False,
                "tools": [
                    {
                        "type": "function",
                        "function": {
                            "name": "run_command",
                            "description": "Run a command.",
                            "parameters": {
                                "type": "object",
                                "properties": {"command": {"type": "string"}},
                            },
                        },
                    }
                ],
            },
            "Bearer sk-test",
        )
    ]


async def test_non_streaming_tool_calls(provider: FakeProvider) -> None:
    """R61: tool calls are parsed with their JSON arguments; a missing id is made up."""
    provider.answer = answer_with(
        completion(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_abc",
                        "type": "function",
                        "function": {"name": "run_command", "arguments": '{"command": "ls -l"}'},
                    },
                    {"type": "function", "function": {"name": "chat_history", "arguments": ""}},
                ],
            }
        )
    )
    streamed: list[str] = []

    async def sink(piece: str) -> None:
        streamed.append(piece)

    async with model_for(provider, stream=False, api_key=None) as model:
        reply = await model.complete([Message(role="user", content="go")], [], on_text=sink)
    assert reply == ModelReply(
        tool_calls=[
            ToolCallRequest(id="call_abc", name="run_command", args={"command": "ls -l"}),
            ToolCallRequest(id="call_1", name="chat_history", args={}),
        ]
    )
    assert streamed == []
    assert provider.received[0].authorization is None
    assert "tools" not in provider.received[0].body


async def test_streaming_text_and_tool_call_deltas(provider: FakeProvider) -> None:
    """R61: SSE deltas stream to on_text as they come; tool calls are assembled by index
    from id, name and argument pieces spread over chunks (and over TCP writes)."""
    provider.answer = answer_with(
        sse(
            ": keep-alive\n\n",
            {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]},
            {"choices": [{"index": 0, "delta": {"content": "Let me "}}]},
            'data: {"choices": [{"index": 0, "delta": {"content": "check',
            ' that."}}]}\n\n',
            {
                "choices": [
                    {
                        "index": 0,
                        "delta": {
                            "tool_calls": [
                                {
                                    "index": 0,
                                    "id": "call_a",
                                    "type": "function",
                                    "function": {"name": "run_command", "arguments": '{"comm'},
                                }
                            ]
                        },
                    }
                ]
            },
            {
                "choices": [
                    {
                        "index": 0,
                        "delta": {
                            "tool_calls": [
                                {
                                    "index": 1,
                                    "id": "call_b",
                                    "function": {"name": "store_secret", "arguments": ""},
                                },
                                {"index": 0, "function": {"arguments": 'and": "ec'}},
                            ]
                        },
                    }
                ]
            },
            {
                "choices": [
                    {
                        "index": 0,
                        "delta": {
                            "tool_calls": [
                                {"index": 1, "function": {"arguments": '{"key": "TOKEN"}'}},
                                {"index": 0, "function": {"arguments": 'ho hi"}'}},
                            ]
                        },
                    }
                ]
            },
            {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
            {"choices": [], "usage": {"total_tokens": 12}},
            "data: [DONE]\n\n",
        )
    )
    streamed: list[str] = []

    async def sink(piece: str) -> None:
        streamed.append(piece)

    async with model_for(provider) as model:
        reply = await model.complete([Message(role="user", content="go")], [RUN_SPEC], on_text=sink)
    assert streamed == ["Let me ", "check that."]
    assert reply == ModelReply(
        text="Let me check that.",
        tool_calls=[
            ToolCallRequest(id="call_a", name="run_command", args={"command": "echo hi"}),
            ToolCallRequest(id="call_b", name="store_secret", args={"key": "TOKEN"}),
        ],
    )
    assert provider.received[0].body["stream"] is True


async def test_streamed_calls_reuse_the_connection(provider: FakeProvider) -> None:
    """R61: a stream read to [DONE] leaves its connection reusable for the next call."""
    provider.answer = answer_with(
        sse({"choices": [{"index": 0, "delta": {"content": "one"}}]}, "data: [DONE]\n\n")
    )
    async with model_for(provider) as model:
        first = await model.complete([Message(role="user", content="a")], [])
        provider.answer = answer_with(
            sse({"choices": [{"index": 0, "delta": {"content": "two"}}]}, "data: [DONE]\n\n")
        )
        second = await model.complete([Message(role="user", content="b")], [])
    assert (first.text, second.text) == ("one", "two")
    assert provider.received[0].port == provider.received[1].port != 0


async def test_streaming_request_answered_with_json(provider: FakeProvider) -> None:
    """R61: a server that ignores stream=true and sends JSON is still understood."""
    provider.answer = answer_with(completion({"role": "assistant", "content": "plain"}))
    streamed: list[str] = []

    async def sink(piece: str) -> None:
        streamed.append(piece)

    async with model_for(provider) as model:
        reply = await model.complete([Message(role="user", content="go")], [], on_text=sink)
    assert reply == ModelReply(text="plain")
    assert streamed == ["plain"]


@pytest.mark.parametrize("stream", [False, True])
async def test_http_500_is_a_model_error_with_the_provider_message(
    provider: FakeProvider, stream: bool
) -> None:
    """R62: status >= 400 fails with the status and the provider's error.message."""
    provider.answer = answer_with(JSONResponse({"error": {"message": "boom"}}, status_code=500))
    async with model_for(provider, stream=stream) as model:
        with pytest.raises(ModelError) as info:
            await model.complete([Message(role="user", content="go")], [])
    assert str(info.value) == "model provider returned HTTP 500: boom"


async def test_http_error_text_is_truncated_and_key_is_scrubbed(provider: FakeProvider) -> None:
    """R62: a plain-text error body is kept to 500 characters, and the API key never
    appears in an error even when the provider echoes it."""
    provider.answer = answer_with(
        PlainTextResponse("bad key sk-test " + "x" * 2000, status_code=401)
    )
    async with model_for(provider) as model:
        with pytest.raises(ModelError) as info:
            await model.complete([Message(role="user", content="go")], [])
    message = str(info.value)
    assert message == "model provider returned HTTP 401: bad key *** " + "x" * 488 + "…"
    assert "sk-test" not in message


async def test_mid_stream_error_event(provider: FakeProvider) -> None:
    """R62: an error sent inside the stream ends the call with the provider's words."""
    provider.answer = answer_with(
        sse(
            {"choices": [{"index": 0, "delta": {"content": "Hi"}}]},
            {"error": {"message": "overloaded"}},
        )
    )
    async with model_for(provider) as model:
        with pytest.raises(ModelError) as info:
            await model.complete([Message(role="user", content="go")], [])
    assert str(info.value) == "model provider error: overloaded"


async def test_timeout_is_a_model_error(provider: FakeProvider) -> None:
    """R62: a provider that does not answer within timeout_s fails the call; no hang."""

    async def slow(body: dict[str, Any]) -> Response:
        await trio.sleep(5)
        return completion({"role": "assistant", "content": "too late"})

    provider.answer = slow
    start = trio.current_time()
    async with model_for(provider, timeout_s=0.5, stream=False) as model:
        with pytest.raises(ModelError) as info:
            await model.complete([Message(role="user", content="go")], [])
    assert str(info.value) == "model timed out after 0.5 s"
    assert 0.5 <= trio.current_time() - start < 2.0


@pytest.mark.parametrize(
    ("arguments", "detail"),
    [
        ('{"command": ', "Expecting value: line 1 column 13 (char 12)"),
        ('["ls"]', "arguments must be a JSON object, not list"),
        ("42", "arguments must be a JSON object, not int"),
    ],
)
async def test_malformed_tool_call_non_streaming(
    provider: FakeProvider, arguments: str, detail: str
) -> None:
    """R62: tool call arguments that are not a JSON object fail the call."""
    provider.answer = answer_with(
        completion(
            {
                "role": "assistant",
                "tool_calls": [
                    {"id": "c", "function": {"name": "run_command", "arguments": arguments}}
                ],
            }
        )
    )
    async with model_for(provider, stream=False) as model:
        with pytest.raises(ModelError) as info:
            await model.complete([Message(role="user", content="go")], [RUN_SPEC])
    assert str(info.value) == f"malformed tool call run_command: {detail}"


async def test_malformed_tool_call_streaming(provider: FakeProvider) -> None:
    """R62: streamed argument pieces that do not join into JSON fail the call."""
    provider.answer = answer_with(
        sse(
            {
                "choices": [
                    {
                        "index": 0,
                        "delta": {
                            "tool_calls": [
                                {
                                    "index": 0,
                                    "id": "c",
                                    "function": {"name": "run_command", "arguments": '{"a": '},
                                }
                            ]
                        },
                    }
                ]
            },
            {
                "choices": [
                    {
                        "index": 0,
                        "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "}"}}]},
                    }
                ]
            },
            "data: [DONE]\n\n",
        )
    )
    async with model_for(provider) as model:
        with pytest.raises(ModelError, match=r"^malformed tool call run_command: Expecting value"):
            await model.complete([Message(role="user", content="go")], [RUN_SPEC])


async def test_tool_call_without_name_is_malformed(provider: FakeProvider) -> None:
    """R62: a tool call with no function name cannot be run; it fails the call."""
    provider.answer = answer_with(
        completion(
            {"role": "assistant", "tool_calls": [{"id": "c", "function": {"arguments": "{}"}}]}
        )
    )
    async with model_for(provider, stream=False) as model:
        with pytest.raises(ModelError) as info:
            await model.complete([Message(role="user", content="go")], [])
    assert str(info.value) == "malformed tool call #0: no function name"


@pytest.mark.parametrize(
    ("response", "message"),
    [
        (PlainTextResponse("<html>"), "model sent a response that is not JSON: <html>"),
        (JSONResponse({"choices": []}), "model response has no choices"),
        (JSONResponse([1]), "model sent a response that is not a JSON object"),
    ],
)
async def test_unreadable_responses_are_model_errors(
    provider: FakeProvider, response: Response, message: str
) -> None:
    """R62: a 200 whose body is not a completion fails the call with what was wrong."""
    provider.answer = answer_with(response)
    async with model_for(provider, stream=False) as model:
        with pytest.raises(ModelError) as info:
            await model.complete([Message(role="user", content="go")], [])
    assert str(info.value) == message


async def test_cancel_mid_stream_returns_promptly_and_closes(provider: FakeProvider) -> None:
    """R61, R62: cancelling a streaming call mid-stream returns at once, closes the
    connection (the server sees the disconnect) and leaves the model usable."""
    server_closed = trio.Event()

    async def hanging(body: dict[str, Any]) -> Response:
        async def events() -> AsyncIterator[str]:
            try:
                yield 'data: {"choices": [{"index": 0, "delta": {"content": "Hel"}}]}\n\n'
                await trio.sleep_forever()
            finally:
                server_closed.set()

        await trio.lowlevel.checkpoint()
        return StreamingResponse(events(), media_type="text/event-stream")

    provider.answer = hanging
    async with model_for(provider) as model:
        streamed: list[str] = []
        with trio.fail_after(2):
            with trio.CancelScope() as scope:

                async def sink(piece: str) -> None:
                    streamed.append(piece)
                    scope.cancel()

                await model.complete([Message(role="user", content="go")], [], on_text=sink)
            assert scope.cancelled_caught
            assert streamed == ["Hel"]
            await server_closed.wait()

        provider.answer = answer_with(completion({"role": "assistant", "content": "again"}))
        reply = await model.complete([Message(role="user", content="go")], [])
    assert reply == ModelReply(text="again")
    assert len(provider.received) == 2


async def test_cancel_inside_on_text_closes_the_stream(provider: FakeProvider) -> None:
    """R61: a cancel that lands while on_text is awaiting (the caller is slow to take
    text) also ends the call at once and closes the connection, leaving nothing behind."""
    server_closed = trio.Event()
    delivering = trio.Event()

    async def endless(body: dict[str, Any]) -> Response:
        async def events() -> AsyncIterator[str]:
            try:
                while True:
                    yield 'data: {"choices": [{"index": 0, "delta": {"content": "x"}}]}\n\n'
                    await trio.sleep(0.01)
            finally:
                server_closed.set()

        await trio.lowlevel.checkpoint()
        return StreamingResponse(events(), media_type="text/event-stream")

    async def slow_sink(piece: str) -> None:
        delivering.set()
        await trio.sleep_forever()

    provider.answer = endless
    async with model_for(provider) as model:
        with trio.fail_after(2):
            async with trio.open_nursery() as nursery:
                scope = trio.CancelScope()

                async def call() -> None:
                    with scope:
                        await model.complete(
                            [Message(role="user", content="go")], [], on_text=slow_sink
                        )

                nursery.start_soon(call)
                await delivering.wait()
                scope.cancel()
            assert scope.cancelled_caught
            await server_closed.wait()


async def test_connection_refused_is_a_model_error() -> None:
    """R62: an endpoint that is not listening fails the call naming the address."""
    sock = trio.socket.socket()
    await sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # bound but never listening, then closed: connecting is refused
    base_url = f"http://127.0.0.1:{port}/v1"
    async with OpenAIModel(name="m", base_url=base_url, api_key="sk-secret") as model:
        with pytest.raises(ModelError) as info:
            await model.complete([Message(role="user", content="go")], [])
    message = str(info.value)
    assert message.startswith(f"cannot reach the model at {base_url}: ConnectError")
    assert "sk-secret" not in message


async def test_resolve_api_key_prefers_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """R61: the key comes from the configured variable first, then the secret store."""
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
    assert asked == []
    monkeypatch.setenv("AGENTRIO_TEST_KEY", "")
    assert await resolve_api_key(config, get_secret) == "sk-stored"
    assert await resolve_api_key(config, None) is None
    missing = attrs.evolve(config, api_key_secret="other")
    assert await resolve_api_key(missing, get_secret) is None
    assert asked == ["openai", "other"]


async def test_factory_builds_openai_with_stored_key(
    provider: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R61: provider "openai" uses config name, base URL and a key from the secret store."""
    monkeypatch.delenv("AGENTRIO_TEST_KEY", raising=False)

    async def get_secret(name: str) -> str | None:
        await trio.lowlevel.checkpoint()
        return "sk-stored" if name == "openai" else None

    config = ModelConfig(
        provider="openai",
        name="llama",
        base_url=provider.base_url,
        api_key_env="AGENTRIO_TEST_KEY",
        api_key_secret="openai",
        stream=False,
        timeout_s=5.0,
    )
    provider.answer = answer_with(completion({"role": "assistant", "content": "ok"}))
    model = await make_model(config, get_secret=get_secret)
    try:
        assert model.name == "llama"
        assert await model.complete([Message(role="user", content="go")], []) == ModelReply(
            text="ok"
        )
    finally:
        await close_model(model)
    assert provider.received[0].authorization == "Bearer sk-stored"
    assert provider.received[0].body["model"] == "llama"


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (
            ModelConfig(provider="openai"),
            'model.name: required with provider = "openai" (the model to call)',
        ),
        (
            ModelConfig(provider="openai", name="m", base_url="localhost:1/v1"),
            "model.base_url: expected an http(s) URL, got 'localhost:1/v1'",
        ),
        (
            ModelConfig(provider="openai", name="m", timeout_s=0),
            "model.timeout_s: expected a number of seconds > 0",
        ),
    ],
)
async def test_factory_rejects_bad_openai_config(config: ModelConfig, message: str) -> None:
    """R61: openai configuration mistakes are one-line ConfigErrors naming the key."""
    with pytest.raises(ConfigError) as info:
        await make_model(config)
    assert str(info.value) == message
