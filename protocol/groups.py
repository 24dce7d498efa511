"""Unwrapping a Trio nursery's exception group into the one exception it stands for.

Shared by `protocol.transport` (a connection's reader nursery) and
`engine.processes.runner` (a command's output reader). A module of its own so that the
engine does not import the transport (and trio-websocket with it: ~0.14 s of a
daemon's cold start).
"""

from __future__ import annotations

import trio

__all__ = ["sole_exception"]


def sole_exception(group: BaseExceptionGroup[BaseException]) -> BaseException | None:
    """The one exception ``group`` stands for, or None when it holds several errors.

    A nursery used as an implementation detail wraps whatever leaves it in a group;
    callers catch plain exceptions.

    Nested groups are flattened. Cancellations beside exactly one error: that error
    (an outer scope being cancelled re-delivers its own cancellation at the next
    checkpoint anyway). Only cancellations: the first one, which the cancelled scope
    recognises as its own.
    """
    leaves: list[BaseException] = []
    pending: list[BaseException] = [group]
    while pending:
        exc = pending.pop()
        if isinstance(exc, BaseExceptionGroup):
            pending.extend(reversed(exc.exceptions))
        else:
            leaves.append(exc)
    errors = [exc for exc in leaves if not isinstance(exc, trio.Cancelled)]
    if not errors:
        return leaves[0] if leaves else None
    return errors[0] if len(errors) == 1 else None
