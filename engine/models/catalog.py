"""The daemon's models and each session's choice among them (issue 31: ``/model NAME``).

`ModelCatalog` holds the default model (``[model]``) and the named ones
(``[models.NAME]``), each already wrapped in its fallback chain. It is itself a `Model`
speaking for the default, so code that only knows ``services.model`` keeps working;
the run loop asks `session_model` for the model of the run's session instead.

A session's choice is kept in memory for the daemon's life (not in the store): it
outlives the session being dropped from memory while idle, not a daemon restart, after
which the session uses the default again. Choosing ``default`` (or ``""``) goes back to
the default.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from agentrio.engine.models.base import Message, Model, ModelReply, RetrySink, TextSink, ToolSpec

__all__ = ["DEFAULT", "ModelCatalog", "session_model"]

#: The name that stands for ``[model]`` in ``/model`` and ``set_model``.
DEFAULT: Final = "default"


class ModelCatalog:
    """The default model, the named ones, and which one each session chose."""

    def __init__(self, default: Model, named: Mapping[str, Model] | None = None) -> None:
        self._default = default
        self._named = dict(named or {})
        self._choices: dict[str, str] = {}

    @property
    def name(self) -> str:
        return self._default.name

    @property
    def choices(self) -> dict[str, str]:
        """Every name a session may choose → the model it names (``default`` first)."""
        return {DEFAULT: self._default.name, **{n: m.name for n, m in self._named.items()}}

    def chosen(self, session_id: str) -> str:
        """The name ``session_id`` chose (``default`` when it chose none)."""
        return self._choices.get(session_id, DEFAULT)

    def choose(self, session_id: str, name: str) -> None:
        """Make ``name`` the model of ``session_id``'s next tasks; raises `KeyError`
        for a name that is no ``[models.NAME]`` table."""
        if name in ("", DEFAULT):
            self._choices.pop(session_id, None)
            return
        if name not in self._named:
            raise KeyError(name)
        self._choices[session_id] = name

    def for_session(self, session_id: str) -> Model:
        name = self._choices.get(session_id)
        return self._named[name] if name is not None else self._default

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        *,
        on_text: TextSink | None = None,
        on_retry: RetrySink | None = None,
    ) -> ModelReply:
        """The default model's answer (for callers that know no session)."""
        return await self._default.complete(messages, tools, on_text=on_text, on_retry=on_retry)


def session_model(model: Model, session_id: str) -> Model:
    """The model a task of ``session_id`` uses: its choice when ``model`` is a
    `ModelCatalog`, else ``model`` itself (engines built around one model, in tests)."""
    return model.for_session(session_id) if isinstance(model, ModelCatalog) else model
