"""What the chat core needs of a platform, and what a platform hands the core.

An adapter (Telegram, Discord) implements `ChatPlatform` on the Trio side
(its library calls cross to asyncio through `agentrio.guest`) and turns its library's
updates into `Said` and `Pressed`. Its failures reach the core as `PlatformError`\\s:
`RetryLater` (429 with ``retry_after``), `Transient` (5xx, timeouts, a dropped
network) or `Refused` (a 4xx that will not get better). `with_retries` is the one
retry policy: honour ``retry_after``, back off exponentially with jitter otherwise.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Awaitable, Callable, Sequence
from typing import Final, Protocol, TypeVar

import attrs
import trio

from agentrio.frontends.markup import Dialect

__all__ = [
    "Backoff",
    "Button",
    "ChatPlatform",
    "Inbound",
    "PlatformError",
    "Pressed",
    "Refused",
    "RetryLater",
    "Said",
    "Transient",
    "with_retries",
]

log = logging.getLogger("agentrio.frontends")

T = TypeVar("T")

#: Attempts of one platform call before its error is given up on.
ATTEMPTS: Final = 6


@attrs.frozen
class Button:
    label: str
    data: str


#: Rows of buttons under a message.
Buttons = Sequence[Sequence[Button]]


@attrs.frozen(kw_only=True)
class Said:
    """A person wrote ``text`` in ``chat`` (a platform id, as text)."""

    chat: str
    user: int
    group: bool
    text: str
    message: str


@attrs.frozen(kw_only=True)
class Pressed:
    """A person pressed the button carrying ``data`` under ``message``; ``press`` is
    the platform's id for answering the press."""

    chat: str
    user: int
    group: bool
    data: str
    press: str
    message: str


Inbound = Said | Pressed


class PlatformError(Exception):
    """A platform call failed."""


class RetryLater(PlatformError):
    """The platform said: too many requests, retry after ``retry_after`` seconds."""

    def __init__(self, retry_after: float, message: str = "") -> None:
        super().__init__(message or f"retry after {retry_after} s")
        self.retry_after = retry_after


class Transient(PlatformError):
    """A server error, a timeout or a dropped network: worth retrying."""


class Refused(PlatformError):
    """The platform refused the call for good (bad request, message gone, forbidden)."""


class ChatPlatform(Protocol):
    """A chat platform, as the core uses it (called from Trio)."""

    #: The session prefix the front-end listens on (``tg-``).
    prefix: str
    dialect: Dialect

    async def send(self, chat: str, text: str, buttons: Buttons = ()) -> str:
        """Post ``text`` (in the dialect's markup); the new message's id."""
        ...

    async def edit(self, chat: str, message: str, text: str, buttons: Buttons = ()) -> None: ...

    async def delete(self, chat: str, message: str) -> None: ...

    async def answer_press(self, press: str, text: str = "") -> None:
        """Acknowledge a button press, with a short notice when ``text`` is given."""
        ...

    def is_group(self, chat: str) -> bool:
        """Whether ``chat`` is a group chat (from its id, or as the adapter saw it)."""
        ...

    def cannot_delete(self, chat: str) -> str:
        """Why the bot cannot delete a person's message in ``chat`` (a secret is only
        taken where it can be deleted at once); empty when it can."""
        ...


@attrs.frozen
class Backoff:
    """Exponential backoff with full jitter: attempt ``n`` waits a random time up to
    ``min(cap, base * 2**n)``."""

    base: float = 0.5
    cap: float = 30.0

    def delay(self, attempt: int, rng: random.Random | None = None) -> float:
        ceiling = min(self.cap, self.base * 2 ** min(attempt, 30))
        return (rng or random).uniform(ceiling / 2, ceiling)


async def with_retries(
    call: Callable[[], Awaitable[T]],
    *,
    what: str,
    backoff: Backoff = Backoff(),
    attempts: int = ATTEMPTS,
) -> T:
    """``call()``, retried on `RetryLater` (after exactly ``retry_after``, plus a
    little jitter) and `Transient` (backoff); `Refused` and the last failure raise."""
    for attempt in range(attempts):
        try:
            return await call()
        except RetryLater as exc:
            if attempt == attempts - 1:
                raise
            wait = exc.retry_after + random.uniform(0, 0.25)
            log.info("%s: rate limited, retrying in %.1f s", what, wait)
        except Transient as exc:
            if attempt == attempts - 1:
                raise
            wait = backoff.delay(attempt)
            log.info("%s: %s; retrying in %.1f s", what, exc, wait)
        await trio.sleep(wait)
    raise AssertionError("unreachable")
