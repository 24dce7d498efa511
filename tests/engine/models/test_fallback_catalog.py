"""Fallback chains, ``[models.NAME]`` tables and a session's choice (issue 31 item 5),
with scripted models standing in for providers."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentrio.engine.config import Config, ModelConfig, load_config
from agentrio.engine.errors import ConfigError
from agentrio.engine.models.base import (
    ContextLengthError,
    Message,
    ModelError,
    ModelReply,
    Retrying,
)
from agentrio.engine.models.catalog import ModelCatalog, session_model
from agentrio.engine.models.factory import close_model, make_models
from agentrio.engine.models.fallback import FallbackModel
from agentrio.engine.models.scripted import ScriptedModel

USER = [Message(role="user", content="go")]


async def test_fallback_tries_the_next_model_and_says_so() -> None:
    """A model that still fails hands over to the next; the switch is a `Retrying`
    with no wait, and the reply names the model that answered."""
    first = ScriptedModel([ModelError("HTTP 503 (gave up after 4 tries)")], name="big")
    second = ScriptedModel([ModelReply(text="from small")], name="small")
    notices: list[Retrying] = []

    async def on_retry(notice: Retrying) -> None:
        notices.append(notice)

    reply = await FallbackModel([first, second]).complete(USER, [], on_retry=on_retry)
    assert (reply.text, reply.model) == ("from small", "small")
    assert notices == [Retrying(reason="big failed, trying small", attempt=1, delay_s=0.0)]
    assert second.calls == [USER]


async def test_fallback_never_for_context_length_nor_after_text_was_shown() -> None:
    """A context-length refusal goes up at once (the loop compacts); so does a failure
    after text reached the person; when every model fails, all are named."""
    backup = ScriptedModel([ModelReply(text="unused")], name="backup")
    too_long = ScriptedModel([ContextLengthError("too long")], name="a")
    with pytest.raises(ContextLengthError):
        await FallbackModel([too_long, backup]).complete(USER, [])
    shown: list[str] = []

    async def on_text(text: str) -> None:
        shown.append(text)

    chain = FallbackModel([_Streaming("p"), backup])
    with pytest.raises(ModelError):
        await chain.complete(USER, [], on_text=on_text)
    assert shown == ["Hal"]
    assert backup.calls == []
    both = FallbackModel(
        [ScriptedModel([ModelError("one")], name="x"), ScriptedModel([ModelError("two")], name="y")]
    )
    with pytest.raises(ModelError) as info:
        await both.complete(USER, [])
    assert str(info.value) == "x: one; y: two"


class _Streaming:
    """Streams one piece, then fails."""

    def __init__(self, name: str) -> None:
        self.name = name

    async def complete(
        self, messages: object, tools: object, *, on_text: object = None, on_retry: object = None
    ) -> ModelReply:
        assert callable(on_text)
        await on_text("Hal")
        raise ModelError("stream broke")


async def test_catalog_keeps_each_sessions_choice() -> None:
    """`/model NAME`: a session's choice, the others on the default; unknown names
    refused; ``default`` goes back."""
    default = ScriptedModel([], name="gpt-5")
    fast = ScriptedModel([], name="haiku")
    catalog = ModelCatalog(default, {"fast": fast})
    assert catalog.choices == {"default": "gpt-5", "fast": "haiku"}
    catalog.choose("cli-a", "fast")
    assert session_model(catalog, "cli-a") is fast
    assert session_model(catalog, "cli-b") is default
    assert (catalog.chosen("cli-a"), catalog.chosen("cli-b")) == ("fast", "default")
    with pytest.raises(KeyError):
        catalog.choose("cli-a", "nope")
    catalog.choose("cli-a", "default")
    assert session_model(catalog, "cli-a") is default
    assert session_model(default, "cli-a") is default


async def test_make_models_builds_tables_and_chains(tmp_path: Path) -> None:
    """``[models.NAME]`` tables are built with the default; a ``fallback`` list wraps
    its model in a chain over the named ones."""
    script = tmp_path / "s.toml"
    script.write_text('[[turns]]\nerror = "down"\n')
    config = Config(
        model=ModelConfig(provider="scripted", script=str(script), fallback=["local"]),
        models={"local": ModelConfig(provider="builtin")},
    )
    default, named, owned = await make_models(config)
    try:
        assert isinstance(default, FallbackModel)
        assert [m.name for m in default.models] == ["scripted", "builtin"]
        assert list(named) == ["local"]
        assert len(owned) == 2
        reply = await default.complete([Message(role="user", content="run: ls")], [])
        assert reply.model == "builtin"
    finally:
        for model in owned:
            await close_model(model)


def test_config_refuses_unknown_or_self_fallbacks(tmp_path: Path) -> None:
    """A fallback naming no table, or its own, stops the daemon at start, naming the line."""
    unknown = "model.fallback: 'b' is not a [models.NAME] table (none are defined)"
    itself = "models.a.fallback: 'a' cannot fall back to itself"
    cases = {
        '[model]\nfallback = ["b"]\n': f"config.toml:2: {unknown}",
        '[models.a]\nfallback = ["a"]\n': f"config.toml:2: {itself}",
    }
    for text, message in cases.items():
        (tmp_path / "config.toml").write_text(text)
        with pytest.raises(ConfigError) as info:
            load_config(tmp_path)
        assert str(info.value).endswith(message)


async def test_a_bad_named_table_names_itself() -> None:
    """R61: a mistake in ``[models.NAME]`` is reported with that table's key."""
    config = Config(models={"fast": ModelConfig(provider="anthropic")})
    with pytest.raises(ConfigError) as info:
        await make_models(config)
    assert str(info.value) == (
        'models.fast.name: required with provider = "anthropic" (the model to call)'
    )
