"""Build the configured model (R61): ``[model] provider`` picks the class.

Configuration mistakes (no script for ``scripted``, no model name for ``openai``) are
`ConfigError` with one line naming the key, raised when the model is built, so the
daemon refuses to start instead of failing the first task.

Each provider's module is imported only when that provider is built, and the SDK it
speaks through (``openai``, ``anthropic``: about 1.5 s of imports together) only at its
first call (agentrio.engine.models.sdk): a daemon's cold start (bench B7) pays for neither.

`make_models` builds the default model and every ``[models.NAME]`` table once, and
wraps each one that has a ``fallback`` list in a `FallbackModel` over the named
models.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from agentrio.engine.config import Config, ModelConfig, model_problem
from agentrio.engine.errors import ConfigError
from agentrio.engine.models.base import Model

if TYPE_CHECKING:
    from agentrio.engine.models.scripted import ScriptedModel

__all__ = ["close_model", "make_model", "make_models"]

PROVIDERS = ("builtin", "openai", "openai-responses", "anthropic", "scripted")
#: The providers spoken through an official SDK, by module and class.
_SDK_PROVIDERS = {
    "openai": ("agentrio.engine.models.openai", "OpenAIModel"),
    "openai-responses": ("agentrio.engine.models.openai_responses", "ResponsesModel"),
    "anthropic": ("agentrio.engine.models.anthropic_messages", "AnthropicModel"),
}


async def make_model(
    config: ModelConfig,
    *,
    get_secret: Callable[[str], Awaitable[str | None]] | None = None,
    where: str = "model",
) -> Model:
    """The model ``config`` describes.

    ``get_secret`` reads a stored secret by name; it is used for the ``openai`` key when
    the ``api_key_env`` variable is unset. A relative ``script`` path is taken from the
    current directory. ``where`` names the table in errors (``models.fast``). Close
    the result with `close_model`.
    """
    provider: str = config.provider
    problem = model_problem(config)
    if problem is not None:
        raise ConfigError(f"{where}.{problem[0]}: {problem[1]}")
    if provider == "builtin":
        from agentrio.engine.models.builtin import BuiltinModel  # only when configured (module doc)

        await trio.lowlevel.checkpoint()
        return BuiltinModel()
    if provider == "scripted":
        return await trio.to_thread.run_sync(_load_script, config.script, where)
    if provider in _SDK_PROVIDERS:
        return await _make_sdk_model(config, get_secret, where=where)
    raise ConfigError(
        f"{where}.provider: unknown provider {provider!r} (expected one of {', '.join(PROVIDERS)})"
    )


async def _make_sdk_model(
    config: ModelConfig,
    get_secret: Callable[[str], Awaitable[str | None]] | None,
    *,
    where: str,
) -> Model:
    import importlib

    from agentrio.engine.models.openai import resolve_api_key
    from agentrio.engine.models.retry import RetryPolicy

    module_name, class_name = _SDK_PROVIDERS[config.provider]
    cls = getattr(importlib.import_module(module_name), class_name)  # only when configured
    options: dict[str, Any] = {
        "name": config.name,
        "base_url": config.base_url,
        "api_key": await resolve_api_key(config, get_secret),
        "timeout_s": config.timeout_s,
        "stream": config.stream,
        "max_output_tokens": config.max_output_tokens,
        "retry": RetryPolicy(
            attempts=config.retries,
            base_delay_s=config.retry_base_s,
            max_delay_s=config.retry_max_s,
            max_retry_after_s=config.max_retry_after_s,
        ),
    }
    if config.provider == "anthropic":
        options["thinking_tokens"] = config.thinking_tokens
    else:
        options["reasoning"] = config.reasoning_effort
    model: Model = cls(**options)
    return model


async def make_models(
    config: Config,
    *,
    get_secret: Callable[[str], Awaitable[str | None]] | None = None,
) -> tuple[Model, dict[str, Model], list[Model]]:
    """``(default, named, owned)``: the ``[model]`` model (a `FallbackModel` when it has
    a fallback list), each ``[models.NAME]`` model the same way, and every model built,
    to close with `close_model` (the chains own nothing)."""
    from agentrio.engine.models.fallback import FallbackModel

    owned: list[Model] = []
    try:
        bare: dict[str, Model] = {}
        for name, table in config.models.items():
            bare[name] = await make_model(table, get_secret=get_secret, where=f"models.{name}")
            owned.append(bare[name])
        default = await make_model(config.model, get_secret=get_secret)
        owned.append(default)
    except BaseException:
        with trio.CancelScope(shield=True):
            for model in owned:
                await close_model(model)
        raise

    def chained(model: Model, table: ModelConfig) -> Model:
        if not table.fallback:
            return model
        return FallbackModel([model, *(bare[n] for n in table.fallback)])

    named = {name: chained(bare[name], table) for name, table in config.models.items()}
    return chained(default, config.model), named, owned


def _load_script(script: str, where: str) -> ScriptedModel:
    """Blocking: runs in a worker thread."""
    from agentrio.engine.models.scripted import ScriptedModel  # only when configured (module doc)

    path = Path(script).expanduser()
    if not path.is_file():
        raise ConfigError(f"{where}.script: {path}: no such file")
    return ScriptedModel.from_toml(path)


async def close_model(model: Model) -> None:
    """Release what ``model`` holds (the openai connection pool); models without an
    ``aclose`` method hold nothing."""
    aclose = getattr(model, "aclose", None)
    if aclose is None:
        await trio.lowlevel.checkpoint()
        return
    await aclose()
