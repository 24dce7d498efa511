"""asyncio hosts prompt_toolkit; Trio runs as a guest on the same thread.

This module is the only place the two loops meet (DESIGN "repl/"):

- Trio → asyncio: the client's ``deliver`` is ``loop.call_soon_threadsafe(app.deliver,
  item)``, so the state is only ever touched from the asyncio side;
- asyncio → Trio: the state's ``send`` is `FrameSink`, which hands each item to
  ``trio_token.run_sync_soon`` to put it on the client's bounded memory channel;
- lifetimes: Trio's ``done_callback`` ends the prompt app (a crashed client must not
  leave a prompt that talks to nobody), and leaving the app cancels the Trio run and
  waits for it, so the connection closes cleanly (R43: the daemon then cancels this
  window's runs with ``disconnected``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Final, Protocol

import outcome
import trio

from agentrio.repl.app import ReplApp
from agentrio.repl.client import run_client
from agentrio.repl.messages import Incoming, Outgoing, Status

__all__ = ["OUTGOING_BUFFER", "ClientMain", "FrameSink", "run_with_trio"]

#: Items the UI may queue for the Trio side before it drains them.
OUTGOING_BUFFER: Final = 256


class ClientMain(Protocol):
    def __call__(
        self,
        *,
        home: Path,
        outgoing: trio.MemoryReceiveChannel[Outgoing],
        deliver: Callable[[Incoming], None],
    ) -> Awaitable[None]: ...


class FrameSink:
    """The state's ``send``: callable from the asyncio side, delivers on the Trio side.

    Until the Trio run has started (``token`` unset) nothing can be connected, so the
    state never sends; an item that still arrives then is reported, not queued.
    """

    def __init__(self) -> None:
        self.token: trio.lowlevel.TrioToken | None = None
        self.channel: trio.MemorySendChannel[Outgoing] | None = None
        self.report: Callable[[Incoming], None] = lambda item: None

    def __call__(self, item: Outgoing) -> None:
        if self.token is None or self.channel is None:
            self.report(Status(text="not connected yet: not sent", error=True))
            return
        try:
            self.token.run_sync_soon(self._put, item)
        except trio.RunFinishedError:
            self.report(Status(text="the connection side has stopped: not sent", error=True))

    def _put(self, item: Outgoing) -> None:
        assert self.channel is not None
        try:
            self.channel.send_nowait(item)
        except (trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError):
            self.report(Status(text="too many requests queued: not sent", error=True))


async def run_with_trio(
    app: ReplApp,
    sink: FrameSink,
    *,
    home: Path,
    client_main: ClientMain = run_client,
) -> None:
    """Run ``app`` on this asyncio loop with ``client_main`` as a Trio guest."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[outcome.Outcome[Any]] = loop.create_future()
    scope_box: list[trio.CancelScope] = []
    stop_requested = False

    def deliver(item: Incoming) -> None:
        loop.call_soon_threadsafe(app.deliver, item)

    sink.report = deliver

    async def trio_main() -> None:
        send, receive = trio.open_memory_channel[Outgoing](OUTGOING_BUFFER)
        with trio.CancelScope() as scope:
            scope_box.append(scope)
            sink.channel = send
            sink.token = trio.lowlevel.current_trio_token()
            if stop_requested:
                scope.cancel()
            async with send, receive:
                await client_main(home=home, outgoing=receive, deliver=deliver)

    def done_callback(result: outcome.Outcome[Any]) -> None:
        sink.token = None
        if not done.done():
            done.set_result(result)
        app.exit()

    trio.lowlevel.start_guest_run(
        trio_main,
        run_sync_soon_threadsafe=loop.call_soon_threadsafe,
        done_callback=done_callback,
        host_uses_signal_set_wakeup_fd=True,
    )
    try:
        await app.run()
    finally:
        stop_requested = True
        if not done.done() and scope_box and sink.token is not None:
            sink.token.run_sync_soon(scope_box[0].cancel)
        result = await done
    result.unwrap()
