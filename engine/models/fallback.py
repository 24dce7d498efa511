"""A model with a fallback list: when it still fails after its own retries, the next
model of ``[model] fallback`` is tried, in order (issue 31).

A context-length refusal is not a reason to fall back (another model's window is no
promise, and the caller compacts instead); nor is a failure after part of the reply
was already streamed to the person (the next model would say it all again). Each
switch is reported through ``on_retry`` with no wait ("gpt-4o failed, trying
claude-sonnet"), and the reply names the model that answered (`ModelReply.model`).
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs
import trio

from agentrio.engine.models.base import (
    ContextLengthError,
    Message,
    Model,
    ModelError,
    ModelReply,
    Retrying,
    RetrySink,
    TextSink,
    ToolSpec,
)

__all__ = ["FallbackModel"]


class FallbackModel:
    """``models[0]``, then each next one when the one before fails (module docstring)."""

    def __init__(self, models: Sequence[Model]) -> None:
        assert models, "a fallback chain needs a model"
        self._models = list(models)

    @property
    def name(self) -> str:
        return self._models[0].name

    @property
    def models(self) -> list[Model]:
        return list(self._models)

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        *,
        on_text: TextSink | None = None,
        on_retry: RetrySink | None = None,
    ) -> ModelReply:
        shown = False

        async def sink(text: str) -> None:
            nonlocal shown
            shown = True
            assert on_text is not None
            await on_text(text)

        failures: list[str] = []
        for index, model in enumerate(self._models):
            try:
                reply = await model.complete(
                    messages, tools, on_text=sink if on_text else None, on_retry=on_retry
                )
            except ContextLengthError:
                raise
            except ModelError as exc:
                failures.append(f"{model.name}: {exc}")
                following = self._models[index + 1] if index + 1 < len(self._models) else None
                if shown or following is None:
                    if len(failures) == 1:
                        raise
                    raise ModelError("; ".join(failures)) from None
                if on_retry is not None:
                    await on_retry(
                        Retrying(
                            reason=f"{model.name} failed, trying {following.name}",
                            attempt=index + 1,
                            delay_s=0.0,
                        )
                    )
                await trio.lowlevel.checkpoint()
                continue
            return attrs.evolve(reply, model=model.name) if index else reply
        raise AssertionError("unreachable")  # pragma: no cover

    async def aclose(self) -> None:
        """The chain owns nothing: its models are closed by whoever built them."""
        await trio.lowlevel.checkpoint()
