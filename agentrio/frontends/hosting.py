"""The two halves of a chat front-end's process, as every adapter runs them: the bot
library on asyncio (the host), the chat core and agentrio's client on Trio (the guest,
`agentrio.guest.run_with_guest`).

- `Inbox`: the library's handlers (asyncio) hand each `Said`/`Pressed` to the core
  without ever blocking the library: when the core is far behind, or not running, the
  update is dropped and logged.
- `run_core`: the guest's side: take updates as soon as the host starts, run the
  `ChatFrontend` once the host says the bot is ready.
- `stop_signals`: an event set by SIGTERM or SIGINT (the daemon stops its children so);
  `unless_stopped` runs a step (the first contact with the platform, retried while it
  is unreachable) only until that event is set.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Awaitable
from pathlib import Path
from typing import Final, TypeVar

import trio

import agentrio
from agentrio.frontends.chat import ChatFrontend, ChatSettings
from agentrio.frontends.platform import ChatPlatform, Inbound
from agentrio.frontends.sessions import SessionBook
from agentrio.guest import GuestPortal

__all__ = ["INBOUND_BUFFER", "Inbox", "run_core", "stop_signals", "unless_stopped"]

T = TypeVar("T")

log = logging.getLogger("agentrio.frontends")

#: Updates the core may have waiting before new ones are dropped.
INBOUND_BUFFER: Final = 256


class Inbox:
    """Updates from the library (asyncio) to the core (Trio)."""

    def __init__(self) -> None:
        self.portal: GuestPortal | None = None
        self.send: trio.MemorySendChannel[Inbound] | None = None

    def deliver(self, item: Inbound) -> None:
        """From asyncio: queue ``item`` for the core, never blocking."""
        send = self.send
        if send is None or self.portal is None:
            log.warning("agentrio side not started: an update of chat %s dropped", item.chat)
        elif not self.portal.to_trio(_put, send, item):
            log.warning("agentrio side not running: an update of chat %s dropped", item.chat)


def _put(send: trio.MemorySendChannel[Inbound], item: Inbound) -> None:
    try:
        send.send_nowait(item)
    except (trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError):
        log.warning("too many updates waiting: one from chat %s dropped", item.chat)


async def run_core(
    inbox: Inbox,
    portal: GuestPortal,
    ready: trio.Event,
    settings: ChatSettings,
    platform: ChatPlatform,
    home: Path,
    name: str,
) -> None:
    """The core of front-end ``name`` (its sessions kept in
    ``<home>/frontends/<name>.json``), fed by ``inbox`` from when this starts; it
    runs once ``ready`` is set."""
    send, receive = trio.open_memory_channel[Inbound](INBOUND_BUFFER)
    inbox.portal, inbox.send = portal, send  # updates wait in the channel until the core runs
    await ready.wait()
    front = ChatFrontend(
        settings,
        platform,
        connect=lambda: agentrio.connect(home=home, client_name=f"agentrio-{name}/1"),
        sessions=SessionBook(settings.prefix, home / "frontends" / f"{name}.json"),
    )
    async with send, receive:
        await front.run(receive)


def stop_signals() -> asyncio.Event:
    """An event SIGTERM and SIGINT set (on the running asyncio loop)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    return stop


async def unless_stopped(step: Awaitable[T], stop: asyncio.Event) -> tuple[T] | None:
    """``(result,)`` of ``step``, or None once ``stop`` is set first (then ``step`` is
    cancelled): a bot still retrying an unreachable platform stops on SIGTERM/SIGINT
    at once (issue 33), not when the platform answers. ``step``'s error is raised."""
    work = asyncio.ensure_future(step)
    waiting = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait([work, waiting], return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiting.cancel()
        if not work.done():
            work.cancel()
            await asyncio.gather(work, return_exceptions=True)
    if work.cancelled() or not work.done():
        return None
    return (work.result(),)
