"""Trio as a guest of an asyncio loop: the pattern of every front-end whose library runs
on asyncio (prompt_toolkit for the REPL, python-telegram-bot and discord.py for the bots).

asyncio hosts the library; agentrio's Trio client runs as a Trio *guest* on the same
thread (``trio.lowlevel.start_guest_run``). Three crossings, all here:

- `run_with_guest`: start ``trio_main`` as a guest and run ``host_main`` on asyncio;
  whichever ends first ends the other (a crashed client must not leave a bot that
  talks to nobody, a stopped bot cancels the client and waits for it), and the first
  error is raised.
- asyncio → Trio: `GuestPortal.to_trio` hands a call to the Trio side
  (``TrioToken.run_sync_soon``); a call made before the Trio run started, or after it
  ended, is dropped and reported ``False``.
- Trio → asyncio: `GuestPortal.to_asyncio` runs a coroutine function as an asyncio task
  and waits for its result from Trio; cancelling the Trio caller cancels the task.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

import outcome
import trio

__all__ = ["GuestPortal", "HostGone", "run_with_guest"]

T = TypeVar("T")


class HostGone(Exception):
    """A `GuestPortal.to_asyncio` call whose asyncio task was cancelled (the host is
    stopping)."""


class GuestPortal:
    """The two ways across, given to both sides of `run_with_guest`."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.token: trio.lowlevel.TrioToken | None = None

    def to_trio(self, fn: Callable[..., object], *args: Any) -> bool:
        """From asyncio: call ``fn(*args)`` soon on the Trio side (it must not block).
        False when the Trio side is not running (the call is dropped)."""
        if self.token is None:
            return False
        try:
            self.token.run_sync_soon(fn, *args)
        except trio.RunFinishedError:
            return False
        return True

    async def to_asyncio(self, fn: Callable[..., Coroutine[Any, Any, T]], *args: Any) -> T:
        """From Trio: run ``fn(*args)`` as an asyncio task and return its result (or
        raise its exception)."""
        token = trio.lowlevel.current_trio_token()
        finished = trio.Event()
        box: list[outcome.Outcome[T]] = []
        task = self.loop.create_task(fn(*args))

        def on_done(done: asyncio.Task[T]) -> None:
            if done.cancelled():
                box.append(outcome.Error(HostGone("the asyncio side cancelled the call")))
            else:
                box.append(outcome.capture(done.result))
            try:
                token.run_sync_soon(finished.set)
            except trio.RunFinishedError:
                pass

        task.add_done_callback(on_done)
        try:
            await finished.wait()
        except trio.Cancelled:
            task.cancel()
            raise
        return box[0].unwrap()


async def run_with_guest(
    host_main: Callable[[GuestPortal], Awaitable[None]],
    trio_main: Callable[[GuestPortal], Awaitable[None]],
) -> None:
    """Run ``trio_main`` as a Trio guest and ``host_main`` on this asyncio loop, until
    either returns or fails; then stop the other and raise the first error."""
    loop = asyncio.get_running_loop()
    portal = GuestPortal(loop)
    done: asyncio.Future[outcome.Outcome[Any]] = loop.create_future()
    scope_box: list[trio.CancelScope] = []
    host_task: asyncio.Task[None] = loop.create_task(_as_coroutine(host_main(portal)))

    async def guest() -> None:
        with trio.CancelScope() as scope:
            scope_box.append(scope)
            portal.token = trio.lowlevel.current_trio_token()
            if host_task.done():
                scope.cancel()
            await trio_main(portal)

    def done_callback(result: outcome.Outcome[Any]) -> None:
        portal.token = None
        if not done.done():
            done.set_result(result)
        if not host_task.done():
            host_task.cancel()

    trio.lowlevel.start_guest_run(
        guest,
        run_sync_soon_threadsafe=loop.call_soon_threadsafe,
        done_callback=done_callback,
        host_uses_signal_set_wakeup_fd=True,
    )
    host_error: BaseException | None = None
    try:
        await host_task
    except asyncio.CancelledError:
        if not done.done():  # cancelled from outside, not by the guest's end
            host_error = asyncio.CancelledError()
    except BaseException as exc:
        host_error = exc
    finally:
        if not done.done() and scope_box and portal.token is not None:
            portal.token.run_sync_soon(scope_box[0].cancel)
        result = await asyncio.shield(done)
    if host_error is not None:
        raise host_error
    result.unwrap()


async def _as_coroutine(awaitable: Awaitable[None]) -> None:
    await awaitable
