"""Opening an engine: its store, models, sandbox and nursery, from the configuration.

`open_engine` is how an `agentrio.engine.core.Engine` comes to exist: it opens what the
configuration names (the SQLite store in the home, the model and the decision model,
the sudo verifier, the sandbox probe), builds the engine complete in a nursery of its
own, starts its loops, and on exit shuts it down (cause ``shutdown``, R53) and closes
what it opened. The engine itself never opens anything, so a test can hand it a store
or a model of its own.
"""

from __future__ import annotations

import gc
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from functools import partial

import trio

from agentrio.engine.asks import TASK_CANCELED, TASK_PAUSED, AskRequest
from agentrio.engine.config import Config
from agentrio.engine.core import Engine
from agentrio.engine.models.base import Model
from agentrio.engine.pending import PendingRegistry
from agentrio.engine.startup_gc import release_collector
from agentrio.engine.store.base import Store
from agentrio.engine.tools.base import Services
from agentrio.engine.tools.sudo import PasswordVerifier, SudoVerifier
from agentrio.protocol.causes import Cause

__all__ = ["freeze_startup_heap", "open_configured_store", "open_engine"]


def freeze_startup_heap() -> None:
    """Move what the process holds when its first engine is running -- the imported
    modules, their classes and functions, the configuration -- out of the cyclic
    garbage collector's sight (`gc.freeze`), once per process.

    Those objects live as long as the process, yet every full (generation 2)
    collection walks all of them: with the daemon's imports that is a 25-55 ms pause
    in the middle of whatever task is running, every few hundred park/resume cycles
    (bench B2's p99). Frozen, a full collection walks only what was made since.
    Freezing is a constant-time list move, so it costs the start nothing; what
    is frozen is never collected, which for startup state is what happens anyway
    (a later engine in the same process, as in the tests, freezes nothing more)."""
    if gc.get_freeze_count() == 0:
        gc.freeze()
    release_collector()  # a daemon's start held it until now (`agentrio.engine.startup_gc`)


def _cancel_reason(engine: Engine, request: AskRequest) -> str:
    """Why the ask of a cancelled task went away: paused (kept to resume) or cancelled."""
    run = engine.find_run(request.task_hash, request.session_id)
    return TASK_PAUSED if run is not None and run.handle.cause is Cause.PAUSED else TASK_CANCELED


@asynccontextmanager
async def open_configured_store(config: Config) -> AsyncIterator[Store]:
    """The store ``[store]`` names, closed on the way out: ``<home>/agentrio.db``, or
    the Redis server at ``[store] url`` under ``[store] prefix`` (docs/deployment.md).

    Opening Redis does not wait for it to answer: a daemon whose Redis is down starts,
    says so in ``/v1/health`` and answers 503 until it is back."""
    if config.store.backend == "redis":
        from agentrio.engine.store.redis_store import open_redis_store

        async with open_redis_store(config.store.url, prefix=config.store.prefix) as redis:
            yield redis
        return
    from agentrio.engine.store.sqlite import open_store

    async with open_store(config.home_path / "agentrio.db") as sqlite:
        yield sqlite


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
    from agentrio.engine.store.files import make_home

    home = config.home_path
    await trio.to_thread.run_sync(make_home, home)
    own_decision = decision_model is None and config.decision_model is not None
    async with AsyncExitStack() as stack:
        if store is None:
            store = await stack.enter_async_context(open_configured_store(config))
        async with _engine_with(
            config,
            store=store,
            model=model,
            verifier=verifier,
            clock=clock,
            decision_model=decision_model,
            own_decision=own_decision,
        ) as engine:
            yield engine


@asynccontextmanager
async def _engine_with(
    config: Config,
    *,
    store: Store,
    model: Model | None,
    verifier: PasswordVerifier | None,
    clock: Callable[[], float],
    decision_model: Model | None,
    own_decision: bool,
) -> AsyncIterator[Engine]:
    """`open_engine` once its store is open: the models, the services, the nursery."""
    from agentrio.engine.models.factory import close_model, make_model, make_models
    from agentrio.engine.processes.sandbox import Sandbox

    the_store = store

    async def get_secret(name: str) -> str | None:
        return await the_store.get_secret("", name)

    built: list[Model] = []
    try:
        if model is None:
            # The [models.NAME] tables too: built (and checked) now, so a mistake in
            # one stops the daemon at start; the default's fallback chain uses them.
            from agentrio.engine.models.catalog import ModelCatalog

            default, named, built = await make_models(config, get_secret=get_secret)
            model = ModelCatalog(default, named)
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
            services.registry.cancel_reason = partial(_cancel_reason, engine)
            await engine.start_upkeep()
            freeze_startup_heap()
            try:
                yield engine
            finally:
                with trio.CancelScope(shield=True):
                    await engine.shutdown()
    finally:
        with trio.CancelScope(shield=True):
            for owned in built:
                await close_model(owned)
            if own_decision and decision_model is not None:
                await close_model(decision_model)
