"""Unwrapping a nursery's exception group into the one exception it stands for.

Sans-IO like the rest of `protocol`: the caller names the cancellation type to look
past (``trio.Cancelled``), so this module imports no trio. Shared by the client
transport (`agentrio.transport`, a connection's reader nursery) and the engine
(`agentrio.engine.processes.runner`, a command's output reader); it lives here because the
engine must not import the client package (and trio-websocket with it: ~0.14 s of a
daemon's cold start).
"""

from __future__ import annotations

__all__ = ["sole_exception"]


def sole_exception(
    group: BaseExceptionGroup[BaseException], cancelled: type[BaseException]
) -> BaseException | None:
    """The one exception ``group`` stands for, or None when it holds several errors.

    A nursery used as an implementation detail wraps whatever leaves it in a group;
    callers catch plain exceptions.

    Nested groups are flattened. ``cancelled`` instances (``trio.Cancelled``) beside
    exactly one error: that error (an outer scope being cancelled re-delivers its own
    cancellation at the next checkpoint anyway). Only cancellations: the first one,
    which the cancelled scope recognises as its own.
    """
    leaves: list[BaseException] = []
    pending: list[BaseException] = [group]
    while pending:
        exc = pending.pop()
        if isinstance(exc, BaseExceptionGroup):
            pending.extend(reversed(exc.exceptions))
        else:
            leaves.append(exc)
    errors = [exc for exc in leaves if not isinstance(exc, cancelled)]
    if not errors:
        return leaves[0] if leaves else None
    return errors[0] if len(errors) == 1 else None
