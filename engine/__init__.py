"""agentrio's engine: the daemon's sessions, tasks, asks, background work and store.

This is the engine's public face. Code outside the engine -- the REPL, the client,
the benchmarks, the examples, a user's own scripts -- imports from here or from one
of `PUBLIC_MODULES`; everything else under ``engine/`` is internal and may change
shape without notice (``tests/test_layering.py`` holds the line). An in-process
engine::

    from agentrio.engine import Config, open_engine

    async with open_engine(Config(home="/tmp/agentrio-demo")) as engine:
        run = await engine.start_task("chat-demo", "run: echo hi")
        outcome = await run.wait_done()

`Engine` is the facade (start, send, steer, cancel, resume, answer, queries);
`TaskRun` and `TaskOutcome` are what a started task gives back; `Cause` says why a
task was cancelled; `AskRequest` and `AskReply` are what the pending registry
(``Engine.registry``) takes. docs/architecture.md maps the internal modules.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from agentrio.engine.assembly import open_engine as open_engine
    from agentrio.engine.config import Config as Config
    from agentrio.engine.config import load_config as load_config
    from agentrio.engine.core import Engine as Engine
    from agentrio.engine.core import SendResult as SendResult
    from agentrio.engine.pending import AskReply as AskReply
    from agentrio.engine.pending import AskRequest as AskRequest
    from agentrio.engine.runs import RunOrigin as RunOrigin
    from agentrio.engine.runs import TaskOutcome as TaskOutcome
    from agentrio.engine.runs import TaskRun as TaskRun
    from agentrio.protocol.causes import Cause as Cause

__all__ = [
    "PUBLIC_MODULES",
    "AskReply",
    "AskRequest",
    "Cause",
    "Config",
    "Engine",
    "RunOrigin",
    "SendResult",
    "TaskOutcome",
    "TaskRun",
    "load_config",
    "open_engine",
]

#: The modules code outside the engine may import: this face, and the few modules
#: that are interfaces in their own right. Their submodules are internal.
PUBLIC_MODULES: Final = frozenset(
    {
        "agentrio.engine",
        # ``agentrio daemon`` / ``python -m agentrio.engine``: the daemon's command line.
        "agentrio.engine.cli",
        # Config, its parts, load_config / save_config (docs/configuration.md).
        "agentrio.engine.config",
        # The errors the facade raises (NotFound, Conflict, …).
        "agentrio.engine.errors",
        # What session ids and task hashes look like, and how new ones are made.
        "agentrio.engine.ids",
        # The store's interface and the SQLite store, which the store benches measure
        # without a daemon (bench/b10_store_scale.py).
        "agentrio.engine.store",
        # The daemon's server: serve, open_server, run_daemon, create_app.
        "agentrio.engine.server",
        # Running commands in process groups, the sandbox, orphans (R48, R75).
        "agentrio.engine.processes",
        # The home's remembered rules and their kinds, which bench/b16_mcp.py keeps one
        # of to measure a rule-approved MCP call.
        "agentrio.engine.rules",
        # The model protocol and building a configured model (bench/b13_model_turn.py).
        "agentrio.engine.models",
        # How a task's input is fitted from the session's exchanges within the context
        # budget, which bench/b14_conversation.py measures without a daemon.
        "agentrio.engine.conversation",
        "agentrio.engine.compaction",
    }
)

#: Where each name of the face lives: they load on first use (PEP 562), so that the
#: daemon's command line (``python -m agentrio.engine``) starts with the collector held
#: before the engine's modules are imported (`agentrio.engine.startup_gc`, bench B7).
_HOMES: Final[dict[str, str]] = {
    "open_engine": "agentrio.engine.assembly",
    "Config": "agentrio.engine.config",
    "load_config": "agentrio.engine.config",
    "Engine": "agentrio.engine.core",
    "SendResult": "agentrio.engine.core",
    "AskReply": "agentrio.engine.pending",
    "AskRequest": "agentrio.engine.pending",
    "RunOrigin": "agentrio.engine.runs",
    "TaskOutcome": "agentrio.engine.runs",
    "TaskRun": "agentrio.engine.runs",
    "Cause": "agentrio.protocol.causes",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
