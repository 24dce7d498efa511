"""Handles for supervised work, and the one place that cancels a scope.

Every task, leg and watcher of agentrio runs through `Supervisor.start`, which creates
its `TaskHandle` *before* the work begins: whoever holds the handle can cancel it from
the first instant (R46), even while the work still waits for a slot (R50).

A handle's cancel stores the `Cause` first and then cancels the scope with the
cause's name as the reason. Trio keeps only a string reason and nothing reads it back
after the scope exits, so the cause on the handle is what the work's exit path reads to
decide what becomes of its pending record (R40, R41).
"""

from __future__ import annotations

import enum
import time
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import trio

from agentrio.protocol.causes import Cause

__all__ = [
    "HandleStatistics",
    "Status",
    "Supervisor",
    "SupervisorStatistics",
    "TaskHandle",
    "cancel_scope",
]


class Status(enum.Enum):
    NEW = "new"
    """Created; the work has not started yet."""
    RUNNING = "running"
    FINISHED = "finished"
    """The work returned normally."""
    CANCELLED = "cancelled"
    """The handle's scope was cancelled and caught the cancellation."""
    FAILED = "failed"
    """The work raised; the exception propagates to the nursery owner."""


def cancel_scope(scope: trio.CancelScope, cause: Cause) -> None:
    """Cancel ``scope`` because of ``cause``: the only caller of `CancelScope.cancel`."""
    scope.cancel(reason=str(cause))


@attrs.frozen
class HandleStatistics:
    name: str
    status: Status
    cause: Cause | None
    age_s: float


@attrs.define(eq=False)
class TaskHandle:
    """One piece of supervised work: its cancel scope, its cause and its end.

    ``cause`` is None until `cancel` is called; the first cause wins, like Trio's
    first reason. ``cancel`` on a handle whose work has not started yet is fine: the
    work starts cancelled and its exit path still runs.
    """

    name: str
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    finished: trio.Event = attrs.field(factory=trio.Event)
    status: Status = Status.NEW
    cause: Cause | None = None
    created_at: float = attrs.field(factory=time.monotonic)
    #: Called with the cause just before the scope is cancelled, while everything the
    #: work holds (its open asks, its legs) is still as it was: what a stop's receipt
    #: reads (`agentrio.engine.stops`).
    on_cancel: list[Callable[[Cause], None]] = attrs.field(factory=list)

    def cancel(self, cause: Cause) -> bool:
        """Cancel the work for ``cause``; False if it had already ended or been cancelled."""
        if self.finished.is_set() or self.cause is not None:
            return False
        self.cause = cause
        for hook in self.on_cancel:
            hook(cause)
        cancel_scope(self.scope, cause)
        return True

    async def wait_finished(self) -> None:
        await self.finished.wait()

    def statistics(self) -> HandleStatistics:
        return HandleStatistics(
            name=self.name,
            status=self.status,
            cause=self.cause,
            age_s=time.monotonic() - self.created_at,
        )


@attrs.frozen
class SupervisorStatistics:
    running: int
    started_total: int
    cancelled_total: int
    failed_total: int


class _OnceStatus:
    """A task status that remembers whether ``started`` was called."""

    def __init__(self, real: trio.TaskStatus[None]) -> None:
        self._real = real
        self.called = False

    def started(self, value: None = None) -> None:
        if not self.called:
            self.called = True
            self._real.started()


class Supervisor:
    """Starts supervised work in one nursery and keeps the live handles.

    The nursery is the owner of the work: when it is cancelled (daemon shutdown) all
    the work is cancelled with it. `cancel_all` exists for shutdown only; users cancel
    one handle at a time (R52). After `cancel_all`, work started later (a follow-up
    whose start was already under way, awaiting the store) starts cancelled with the
    same cause: otherwise it would run on, and the nursery's exit would wait for it.
    """

    def __init__(self, nursery: trio.Nursery) -> None:
        self._nursery = nursery
        self._live: set[TaskHandle] = set()
        self._started_total = 0
        self._cancelled_total = 0
        self._failed_total = 0
        self._closed_by: Cause | None = None

    @property
    def live(self) -> frozenset[TaskHandle]:
        return frozenset(self._live)

    async def start(
        self, fn: Callable[..., Awaitable[None]], *args: Any, handle: TaskHandle
    ) -> TaskHandle:
        """Run ``fn(*args, task_status=...)`` inside ``handle.scope``.

        Returns once ``fn`` has called ``task_status.started()`` (or has ended). The
        handle was made by the caller, so it could already be registered wherever a
        cancel must find it before the work runs.
        """
        self._live.add(handle)
        self._started_total += 1
        if self._closed_by is not None:
            handle.cancel(self._closed_by)
        await self._nursery.start(self._supervise, handle, fn, args)
        return handle

    async def _supervise(
        self,
        handle: TaskHandle,
        fn: Callable[..., Awaitable[None]],
        args: tuple[Any, ...],
        *,
        task_status: trio.TaskStatus[None],
    ) -> None:
        once = _OnceStatus(task_status)
        handle.status = Status.RUNNING
        try:
            with handle.scope:
                await fn(*args, task_status=once)
            if handle.scope.cancelled_caught:
                handle.status = Status.CANCELLED
                self._cancelled_total += 1
            else:
                handle.status = Status.FINISHED
        except BaseException:
            handle.status = Status.FAILED
            self._failed_total += 1
            raise
        finally:
            self._live.discard(handle)
            handle.finished.set()
        # Cancelled before it said "started": let `start` return rather than fail.
        once.started()

    def cancel_all(self, cause: Cause) -> int:
        """Cancel every live handle and every later one (shutdown only); returns how
        many live ones were cancelled."""
        self._closed_by = cause
        return sum(handle.cancel(cause) for handle in list(self._live))

    def statistics(self) -> SupervisorStatistics:
        return SupervisorStatistics(
            running=len(self._live),
            started_total=self._started_total,
            cancelled_total=self._cancelled_total,
            failed_total=self._failed_total,
        )
