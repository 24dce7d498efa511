"""The three dialects against aimock, a mock LLM server no one here wrote (issue 31
item 5): streamed text, parallel tool calls, stop reasons, usage, reasoning kept across
a tool loop, malformed calls handed up, context-length refusals, cancel mid-stream.

aimock runs with ``--strict`` (tests/aimock.py): an unmatched request is a 503, and an
Anthropic tool-loop continuation that does not start with the thinking block it sent
(signature and all) is refused with a 400, so the round trip below is checked by the
server itself.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio

from agentrio.engine.config import ModelConfig
from agentrio.engine.models.base import ContextLengthError, Message, ProviderItem, ToolSpec
from agentrio.engine.models.factory import close_model, make_model
from agentrio.engine.models.openai_responses import to_input
from agentrio.engine.models.sdk import SdkModel
from tests.aimock import Aimock, start_aimock

SPEC = ToolSpec(
    name="run_command",
    description="Run a command.",
    parameters={"type": "object", "properties": {"command": {"type": "string"}}},
)
#: provider → (model name, extra config, stop reason of a text reply, of a tool reply)
DIALECTS: dict[str, tuple[str, dict[str, Any], str, str]] = {
    "openai": ("gpt-5", {}, "stop", "tool_calls"),
    "openai-responses": ("gpt-5", {}, "completed", "completed"),
    "anthropic": ("claude-sonnet-4-5", {"thinking_tokens": 1024}, "end_turn", "tool_use"),
}


@pytest.fixture
async def aimock(nursery: trio.Nursery) -> Aimock:
    return await start_aimock(nursery, "dialects.json")


async def model_for(aimock: Aimock, dialect: str, **options: Any) -> SdkModel:
    name, extra, _, _ = DIALECTS[dialect]
    base_url = aimock.url if dialect == "anthropic" else f"{aimock.url}/v1"
    config = ModelConfig(provider=dialect, name=name, base_url=base_url, **extra, **options)  # type: ignore[arg-type]
    model = await make_model(config)
    assert isinstance(model, SdkModel)
    return model


@pytest.mark.parametrize("dialect", list(DIALECTS))
async def test_streamed_text_usage_and_stop_reason(aimock: Aimock, dialect: str) -> None:
    """Issue 31 (5, 7): text arrives in several deltas that join to the reply; usage
    and the stop reason are the provider's."""
    pieces: list[str] = []

    async def on_text(text: str) -> None:
        pieces.append(text)

    model = await model_for(aimock, dialect)
    try:
        reply = await model.complete(
            [Message(role="user", content="say hello")], [SPEC], on_text=on_text
        )
    finally:
        await close_model(model)
    assert reply.text == "Hello from aimock, streamed in several pieces."
    assert len(pieces) > 1
    assert "".join(pieces) == reply.text
    assert reply.usage is not None
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (21, 9)
    assert reply.stop_reason == DIALECTS[dialect][2]
    assert reply.tool_calls == []


@pytest.mark.parametrize("dialect", list(DIALECTS))
async def test_parallel_calls_and_reasoning_across_the_tool_loop(
    aimock: Aimock, dialect: str
) -> None:
    """Issue 31 (5): one reply asks for two calls; the reasoning is kept; the next call
    carries the assistant turn (its thinking block or reasoning item first) and both
    results, and gets the final answer. aimock refuses an Anthropic continuation that
    drops the signed thinking block."""
    model = await model_for(aimock, dialect)
    try:
        messages = [Message(role="user", content="two tools")]
        first = await model.complete(messages, [SPEC])
        assert [(c.id, c.args) for c in first.tool_calls] == [
            ("call_a", {"command": "echo a"}),
            ("call_b", {"command": "echo b"}),
        ]
        assert first.text == "Running both."
        assert first.reasoning == "Two independent commands: run them together."
        assert first.stop_reason == DIALECTS[dialect][3]
        if dialect == "openai":
            assert first.provider_items == ()  # Chat Completions keeps nothing
        else:
            (item,) = first.provider_items
            assert item.dialect == dialect
            secret = "signature" if dialect == "anthropic" else "encrypted_content"
            assert item.data[secret]
        messages += [first.to_message()] + [
            Message(role="tool", tool_call_id=c.id, name=c.name, content=f"ran {c.args['command']}")
            for c in first.tool_calls
        ]
        second = await model.complete(messages, [SPEC])
    finally:
        await close_model(model)
    assert second.text == "Both ran."
    (request,) = [e for e in await aimock.journal() if e["response"]["status"] == 200][-1:]
    tool_messages = [m for m in request["body"]["messages"] if m["role"] == "tool"]
    assert [(m["tool_call_id"], m["content"]) for m in tool_messages] == [
        ("call_a", "ran echo a"),
        ("call_b", "ran echo b"),
    ]


def test_responses_sends_reasoning_items_back_first() -> None:
    """Issue 31 (5): a Responses assistant turn goes back as its reasoning item (with the
    encrypted content), then its text, then one function_call per call; another
    dialect's items are left out."""
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "E"}
    turn = Message(
        role="assistant",
        content="Running.",
        provider_items=(
            ProviderItem(dialect="openai-responses", data=reasoning),
            ProviderItem(dialect="anthropic", data={"type": "thinking"}),
        ),
    )
    assert to_input([turn])[0] == reasoning
    assert [i.get("type", i.get("role")) for i in to_input([turn])] == ["reasoning", "assistant"]


@pytest.mark.parametrize("dialect", ["openai", "openai-responses"])
async def test_malformed_arguments_are_handed_up(aimock: Aimock, dialect: str) -> None:
    """Issue 31 (6): arguments that are not JSON give a call with ``args_error`` and the
    raw text, not an exception (the Anthropic case is in test_model_faults)."""
    model = await model_for(aimock, dialect)
    try:
        reply = await model.complete([Message(role="user", content="bad args")], [SPEC])
    finally:
        await close_model(model)
    (call,) = reply.tool_calls
    assert (call.id, call.name, call.args, call.raw_args) == (
        "call_bad",
        "run_command",
        {},
        '{"command": ',
    )
    assert call.args_error.startswith("arguments are not valid JSON")


@pytest.mark.parametrize("dialect", list(DIALECTS))
async def test_context_length_refusal(aimock: Aimock, dialect: str) -> None:
    """Issue 31 (6): aimock's context-length refusal is a `ContextLengthError`."""
    model = await model_for(aimock, dialect)
    try:
        with pytest.raises(ContextLengthError):
            await model.complete([Message(role="user", content="too long")], [SPEC])
    finally:
        await close_model(model)
    assert len(await aimock.journal()) == 1


@pytest.mark.parametrize("dialect", list(DIALECTS))
async def test_cancel_mid_stream(aimock: Aimock, dialect: str) -> None:
    """Issue 31 (5): a cancel after the first delta of a slow stream ends the call at
    once, and the model still works afterwards (its connection pool is sound)."""
    model = await model_for(aimock, dialect)
    try:
        with trio.CancelScope() as scope:

            async def on_text(text: str) -> None:
                scope.cancel()

            await model.complete([Message(role="user", content="slow story")], [], on_text=on_text)
        assert scope.cancelled_caught
        with trio.fail_after(10):
            reply = await model.complete([Message(role="user", content="say hello")], [])
    finally:
        await close_model(model)
    assert reply.text.startswith("Hello from aimock")
