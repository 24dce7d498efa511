"""`agentrio.protocol.groups.sole_exception`: one nursery error out of its group, sans-IO (the
cancellation type to look past is the caller's)."""

from __future__ import annotations

import trio

from agentrio.protocol.groups import sole_exception


def test_sole_exception_picks_the_one_error_beside_cancellations() -> None:
    """R43: a connection ending while an outer scope is being cancelled raises its own
    error (e.g. a closed connection), not an ExceptionGroup holding it and a Cancelled;
    several errors stay a group; only cancellations give the first."""
    closed = ConnectionResetError("closed")
    cancelled = _a_cancelled()
    assert sole_exception(ExceptionGroup("g", [closed]), trio.Cancelled) is closed
    assert sole_exception(BaseExceptionGroup("g", [cancelled, closed]), trio.Cancelled) is closed
    nested = BaseExceptionGroup("g", [BaseExceptionGroup("h", [cancelled]), closed])
    assert sole_exception(nested, trio.Cancelled) is closed
    assert sole_exception(BaseExceptionGroup("g", [cancelled]), trio.Cancelled) is cancelled
    assert sole_exception(ExceptionGroup("g", [closed, KeyError("k")]), trio.Cancelled) is None


def test_sole_exception_looks_past_only_the_type_it_is_given() -> None:
    """Sans-IO: what counts as a cancellation is the caller's choice."""
    first, second = KeyError("a"), ValueError("b")
    group = ExceptionGroup("g", [first, second])
    assert sole_exception(group, KeyError) is second
    assert sole_exception(group, LookupError) is second
    assert sole_exception(group, TypeError) is None


def _a_cancelled() -> trio.Cancelled:
    """A real `trio.Cancelled` (it cannot be constructed directly)."""
    caught: list[trio.Cancelled] = []

    async def main() -> None:
        with trio.CancelScope() as scope:
            scope.cancel()
            try:
                await trio.lowlevel.checkpoint()
            except trio.Cancelled as exc:
                caught.append(exc)
                raise

    trio.run(main)
    return caught[0]
