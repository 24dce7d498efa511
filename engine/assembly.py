"""Opening an engine: its store, models, sandbox and nursery, from the configuration.

`open_engine` is how an `engine.core.Engine` comes to exist: it opens what the
configuration names (the SQLite store in the home, the model and the decision model,
the sudo verifier, the sandbox probe), builds the engine complete in a nursery of its
own, starts its loops, and on exit shuts it down (cause ``shutdown``, R53) and closes
what it opened. The engine itself never opens anything, so a test can hand it a store
or a model of its own.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import trio

from engine.config import Config
from engine.core import Engine
from engine.models.base import Model
from engine.pending import PendingRegistry
from engine.store.base import Store
from engine.tools.base import Services
from engine.tools.sudo import PasswordVerifier, SudoVerifier

__all__ = ["open_engine"]


@asynccontextmanager
async def open_engine(
    config: Config,
    *,
    store: Store | None = None,
    model: Model | None = None,
    verifier: PasswordVerifier | None = None,
    clock: Callable[[], float] = time.time,
    decision_model: Model | None = None,
) -> AsyncIterator[Engine]:
    """An engine with its own nursery; on exit every run and leg is cancelled
    (``shutdown``) and, if this function opened the store, the store is closed.

    ``decision_model`` checks watcher hits (R29); without one, ``[decision_model]`` of
    the config is built when it is set."""
    from engine.models.factory import close_model, make_model
    from engine.processes.sandbox import Sandbox
    from engine.store.files import make_home
    from engine.store.sqlite import SqliteStore

    home = config.home_path
    await trio.to_thread.run_sync(make_home, home)
    own_store, own_model = store is None, model is None
    own_decision = decision_model is None and config.decision_model is not None
    if store is None:
        store = await SqliteStore.open(home / "agentrio.db")
    the_store = store

    async def get_secret(name: str) -> str | None:
        return await the_store.get_secret("", name)

    try:
        if model is None:
            model = await make_model(config.model, get_secret=get_secret)
        if own_decision and config.decision_model is not None:
            decision_model = await make_model(config.decision_model, get_secret=get_secret)
        services = Services(
            config=config,
            store=store,
            registry=PendingRegistry(listener_grace_s=config.server.listener_grace_s),
            model=model,
            verifier=verifier or SudoVerifier(),
            sandbox=await Sandbox.probe(config),
            clock=clock,
        )
        async with trio.open_nursery() as nursery:
            engine = Engine(services, nursery, decision_model=decision_model)
            await engine.start_upkeep()
            try:
                yield engine
            finally:
                with trio.CancelScope(shield=True):
                    await engine.shutdown()
    finally:
        with trio.CancelScope(shield=True):
            if own_model and model is not None:
                await close_model(model)
            if own_decision and decision_model is not None:
                await close_model(decision_model)
            if own_store:
                await store.aclose()
