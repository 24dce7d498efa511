"""Build the configured model (R61): ``[model] provider`` picks the class.

Configuration mistakes (no script for ``scripted``, no model name for ``openai``) are
`ConfigError` with one line naming the key, raised when the model is built, so the
daemon refuses to start instead of failing the first task.

Each provider's module is imported only when that provider is built: ``openai`` pulls
in httpx (some 25 modules, and its client then loads httpcore and a CA bundle), which a
daemon running the builtin or scripted model never needs, and every module counts in
its cold start (bench B7).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from agentrio.engine.config import ModelConfig, model_problem
from agentrio.engine.errors import ConfigError
from agentrio.engine.models.base import Model

if TYPE_CHECKING:
    from agentrio.engine.models.scripted import ScriptedModel

__all__ = ["close_model", "make_model"]

PROVIDERS = ("builtin", "openai", "scripted")


async def make_model(
    config: ModelConfig,
    *,
    get_secret: Callable[[str], Awaitable[str | None]] | None = None,
) -> Model:
    """The model ``config`` describes.

    ``get_secret`` reads a stored secret by name; it is used for the ``openai`` key when
    the ``api_key_env`` variable is unset. A relative ``script`` path is taken from the
    current directory. Close the result with `close_model`.
    """
    provider: str = config.provider
    problem = model_problem(config)
    if problem is not None:
        raise ConfigError(f"model.{problem[0]}: {problem[1]}")
    if provider == "builtin":
        from agentrio.engine.models.builtin import BuiltinModel  # only when configured (module doc)

        await trio.lowlevel.checkpoint()
        return BuiltinModel()
    if provider == "scripted":
        return await trio.to_thread.run_sync(_load_script, config.script)
    if provider == "openai":
        from agentrio.engine.models.openai import OpenAIModel, resolve_api_key  # httpx (module doc)

        return OpenAIModel(
            name=config.name,
            base_url=config.base_url,
            api_key=await resolve_api_key(config, get_secret),
            timeout_s=config.timeout_s,
            stream=config.stream,
        )
    raise ConfigError(
        f"model.provider: unknown provider {provider!r} (expected one of {', '.join(PROVIDERS)})"
    )


def _load_script(script: str) -> ScriptedModel:
    """Blocking: runs in a worker thread."""
    from agentrio.engine.models.scripted import ScriptedModel  # only when configured (module doc)

    path = Path(script).expanduser()
    if not path.is_file():
        raise ConfigError(f"model.script: {path}: no such file")
    return ScriptedModel.from_toml(path)


async def close_model(model: Model) -> None:
    """Release what ``model`` holds (the openai connection pool); models without an
    ``aclose`` method hold nothing."""
    aclose = getattr(model, "aclose", None)
    if aclose is None:
        await trio.lowlevel.checkpoint()
        return
    await aclose()
