"""Retries of a model call: which failures are worth another try, and how long to wait.

A dialect raises `Transient` for what may pass (429, 408, 409, 5xx, 529 "overloaded",
connection errors, timeouts); `call_with_retries` waits and tries again, at most
``RetryPolicy.attempts`` times in all, telling ``on_retry`` before each wait so the
front-ends can say "rate limited, retrying in 4 s". Everything else is a plain
`ModelError` (or `ContextLengthError`) and passes through at once.

The wait is the provider's ``Retry-After`` when it sent one (seconds or an HTTP date,
or OpenAI's ``retry-after-ms``), else exponential back-off from ``base_delay_s``,
doubling, capped at ``max_delay_s``, with up to 25 % jitter taken off so that many
sessions do not retry in step. A ``Retry-After`` longer than ``max_retry_after_s`` is
not waited for: the call fails at once with the provider's words and the wait it
asked for, which a person can act on, instead of hanging for an hour.

The wait is a plain ``trio.sleep``: a cancel during it lands at once.
"""

from __future__ import annotations

import email.utils
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Final, TypeVar

import attrs
import trio

from agentrio.engine.models.base import ModelError, Retrying, RetrySink

__all__ = [
    "RetryPolicy",
    "Transient",
    "call_with_retries",
    "parse_retry_after",
]

T = TypeVar("T")

#: Share of a computed back-off that jitter may take off.
JITTER: Final = 0.25


@attrs.frozen(kw_only=True)
class RetryPolicy:
    """How hard to try one model call (``[model] retries`` and friends)."""

    #: Tries in all, the first included (1 means no retry).
    attempts: int = 4
    base_delay_s: float = 1.0
    max_delay_s: float = 30.0
    #: The longest ``Retry-After`` honoured; past it the call fails at once.
    max_retry_after_s: float = 120.0

    def backoff(self, attempt: int, rng: random.Random | None = None) -> float:
        """The wait before try ``attempt + 1`` when the provider named none."""
        raw = min(self.max_delay_s, self.base_delay_s * 2.0 ** (attempt - 1))
        fraction: float = (rng or random).random()
        return raw * (1 - JITTER * fraction)


class Transient(ModelError):
    """A failure that may pass: worth another try after a wait.

    ``reason`` is short and for people (``rate limited``, ``server error 503``);
    ``retry_after_s`` is the wait the provider asked for, if it said.
    """

    def __init__(self, message: str, *, reason: str, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.retry_after_s = retry_after_s


async def call_with_retries(
    attempt: Callable[[], Awaitable[T]],
    *,
    policy: RetryPolicy,
    on_retry: RetrySink | None,
    rng: random.Random | None = None,
) -> T:
    """``await attempt()`` until it returns, retrying `Transient` failures (module doc).

    The last `Transient` is raised as a plain `ModelError` with its message, so the
    caller sees one kind of failure for "the provider kept failing".
    """
    number = 1
    while True:
        try:
            return await attempt()
        except Transient as exc:
            if number >= policy.attempts:
                tries = f"{number} tries" if number > 1 else "1 try"
                raise ModelError(f"{exc} (gave up after {tries})") from None
            if exc.retry_after_s is not None and exc.retry_after_s > policy.max_retry_after_s:
                raise ModelError(
                    f"{exc} (the provider asks to wait {exc.retry_after_s:g} s, more than "
                    f"model.max_retry_after_s = {policy.max_retry_after_s:g})"
                ) from None
            if exc.retry_after_s is not None:
                delay = max(0.0, exc.retry_after_s)
            else:
                delay = policy.backoff(number, rng)
            if on_retry is not None:
                await on_retry(Retrying(reason=exc.reason, attempt=number, delay_s=delay))
            await trio.sleep(delay)
            number += 1


def parse_retry_after(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """The wait a response asks for, in seconds: ``retry-after-ms`` (OpenAI), else
    ``Retry-After`` as seconds or as an HTTP date; ``None`` when absent or unreadable."""
    lowered = {k.lower(): v for k, v in headers.items()}
    millis = lowered.get("retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = lowered.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))
