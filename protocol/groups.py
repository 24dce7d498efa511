"""Unwrapping a Trio nursery's exception group into the one exception it stands for.

A nursery used as an implementation detail (a connection's reader task, a command's
output reader) wraps whatever leaves it in an `ExceptionGroup`; its callers catch
plain exceptions (`trio_websocket.ConnectionClosed`, a tool's own error). Shared by
`protocol.transport` and `engine.tools.process`.
"""

from __future__ import annotations

import trio

__all__ = ["sole_exception"]


def sole_exception(group: BaseExceptionGroup[BaseException]) -> BaseException | None:
    """The one exception ``group`` stands for, or None when it holds several errors.

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
