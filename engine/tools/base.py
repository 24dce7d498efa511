"""What a tool is, what it returns, and the services it may use."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from engine.models.base import ToolCallRequest, ToolSpec
from protocol.events import Question

if TYPE_CHECKING:
    from engine.config import Config
    from engine.models.base import Model
    from engine.pending import PendingRegistry
    from engine.processes.sandbox import Sandbox
    from engine.runs import TaskRun
    from engine.store.base import Store
    from engine.tools.sudo import PasswordVerifier

__all__ = ["ServiceTool", "Services", "Tool", "ToolOutcome", "string_arg"]


@attrs.frozen(kw_only=True)
class ToolOutcome:
    """The result of one tool call.

    ``skipped`` non-empty means the call was not run (denied, nobody to confirm, not
    available) and says why; the model sees it as the result. ``park`` asks the loop
    to park the task on these questions after the turn's other calls (R11).
    """

    output: str
    ok: bool = True
    skipped: str = ""
    park: list[Question] | None = None


@attrs.frozen(kw_only=True)
class Services:
    """The engine parts tools and runs use; one instance per engine."""

    config: Config
    store: Store
    registry: PendingRegistry
    model: Model
    verifier: PasswordVerifier
    #: Where commands nobody was asked about run (R75); inactive: every command asks.
    sandbox: Sandbox
    #: Wall clock (Unix seconds) for stored times and marker expiry; tests pass a
    #: function of `trio.current_time` so a mock clock drives TTLs.
    clock: Callable[[], float]


class Tool(Protocol):
    name: str

    def spec(self) -> ToolSpec: ...

    def available(self, run: TaskRun) -> bool: ...

    async def execute(self, run: TaskRun, call: ToolCallRequest) -> ToolOutcome: ...


class ServiceTool:
    """Base of the shipped tools: keeps the engine's `Services`; available everywhere
    unless a subclass says otherwise."""

    name: str

    def __init__(self, services: Services) -> None:
        self._services = services

    def available(self, run: TaskRun) -> bool:
        return True


def string_arg(call: ToolCallRequest, name: str, default: str | None = None) -> str:
    """A string argument of ``call``; raises `ValueError` naming it when absent or wrong."""
    value: Any = call.args.get(name, default)
    if not isinstance(value, str):
        raise ValueError(f"argument {name!r} must be a string")
    return value
