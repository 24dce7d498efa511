"""How each dialect sends a run's system prompt, read from the raw request body (R87;
issue 31 item 2): Chat Completions as the ``system`` message, Responses as
``instructions`` (a later system message -- the summary -- stays an input message),
Anthropic Messages as the ``system`` parameter (the system messages joined).

aimock normalises every body to the chat shape before its journal shows it, so the
three wire forms are read here from the tests' own fake provider
(tests/engine/models/test_model_faults.py); tests/e2e/test_system_prompt_e2e.py sends
the same prompt to aimock in each dialect.
"""

from __future__ import annotations

import pytest

from agentrio.engine.models.base import Message
from agentrio.engine.models.factory import close_model
from tests.engine.models.test_model_faults import PROVIDERS, FakeProvider, model_for, success
from tests.engine.models.test_model_faults import provider as provider  # the fixture

PROMPT = "You are the agent of agentrio.\n\n## Where you are\n- Working directory: /w"
SUMMARY = "[Summary of this session's earlier conversation]\nAda asked for a poem."
MESSAGES = [
    Message(role="system", content=PROMPT),
    Message(role="system", content=SUMMARY),
    Message(role="user", content="hello"),
]


@pytest.mark.parametrize("dialect", PROVIDERS)
async def test_each_dialect_sends_the_system_prompt_its_own_way(
    provider: FakeProvider, dialect: str
) -> None:
    """R87: the prompt reaches the provider whole, where the dialect expects it, and
    only once."""
    provider.answers = [success(dialect)]
    model = await model_for(provider, dialect, stream=False)
    try:
        await model.complete(MESSAGES, [])
    finally:
        await close_model(model)
    [body] = provider.received
    if dialect == "openai":
        assert body["messages"] == [
            {"role": "system", "content": PROMPT},
            {"role": "system", "content": SUMMARY},
            {"role": "user", "content": "hello"},
        ]
    elif dialect == "openai-responses":
        assert body["instructions"] == PROMPT
        assert body["input"] == [
            {"role": "system", "content": SUMMARY},
            {"role": "user", "content": "hello"},
        ]
    else:
        assert body["system"] == f"{PROMPT}\n\n{SUMMARY}"
        assert body["messages"] == [
            {"role": "user", "content": [{"type": "text", "text": "hello"}]}
        ]
