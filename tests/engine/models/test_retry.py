"""engine/models/retry.py on a MockClock: waits, reports, bounds and cancels (issue 31
item 6)."""

from __future__ import annotations

import random

import pytest
import trio
import trio.testing

from agentrio.engine.models.base import ModelError, Retrying
from agentrio.engine.models.retry import (
    RetryPolicy,
    Transient,
    call_with_retries,
    parse_retry_after,
)


class Flaky:
    """Fails with ``failures`` in order, then answers ``"ok"``."""

    def __init__(self, *failures: Exception) -> None:
        self.failures = list(failures)
        self.calls: list[float] = []

    async def __call__(self) -> str:
        self.calls.append(trio.current_time())
        await trio.lowlevel.checkpoint()
        if self.failures:
            raise self.failures.pop(0)
        return "ok"


@pytest.fixture
def autojump_clock() -> trio.testing.MockClock:
    return trio.testing.MockClock(autojump_threshold=0)


async def test_retry_after_is_honoured_and_reported_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Issue 31 (6): a 429 with ``Retry-After: 4`` then success: one `Retrying`, the
    second try exactly 4 s after the first."""
    flaky = Flaky(Transient("HTTP 429", reason="rate limited", retry_after_s=4.0))
    seen: list[Retrying] = []

    async def on_retry(notice: Retrying) -> None:
        seen.append(notice)

    assert await call_with_retries(flaky, policy=RetryPolicy(), on_retry=on_retry) == "ok"
    assert seen == [Retrying(reason="rate limited", attempt=1, delay_s=4.0)]
    assert flaky.calls[1] - flaky.calls[0] == pytest.approx(4.0)


async def test_backoff_doubles_is_capped_and_gives_up(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Issue 31 (6): without Retry-After the waits double from ``base_delay_s`` up to
    ``max_delay_s`` (less at most 25 % jitter); after ``attempts`` tries the call fails."""
    policy = RetryPolicy(attempts=5, base_delay_s=1.0, max_delay_s=3.0)
    flaky = Flaky(*(Transient(f"HTTP 50{i}", reason=f"server error 50{i}") for i in range(5)))
    seen: list[Retrying] = []

    async def on_retry(notice: Retrying) -> None:
        seen.append(notice)

    with pytest.raises(ModelError) as info:
        await call_with_retries(flaky, policy=policy, on_retry=on_retry, rng=random.Random(1))
    assert not isinstance(info.value, Transient)
    assert str(info.value) == "HTTP 504 (gave up after 5 tries)"
    caps = [1.0, 2.0, 3.0, 3.0]
    assert [n.attempt for n in seen] == [1, 2, 3, 4]
    for notice, cap in zip(seen, caps, strict=True):
        assert cap * 0.75 <= notice.delay_s <= cap
    gaps = [b - a for a, b in zip(flaky.calls, flaky.calls[1:], strict=False)]
    assert gaps == pytest.approx([n.delay_s for n in seen])


async def test_cancel_during_back_off_lands_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Issue 31 (6): a cancel 10 ms into a 30 s back-off ends the call at that moment."""
    flaky = Flaky(Transient("HTTP 429", reason="rate limited", retry_after_s=30.0))
    ended = 0.0
    async with trio.open_nursery() as nursery:
        scope = trio.CancelScope()

        async def call() -> None:
            nonlocal ended
            with scope:
                await call_with_retries(flaky, policy=RetryPolicy(), on_retry=None)
            ended = trio.current_time()

        nursery.start_soon(call)
        await trio.sleep(0.01)
        scope.cancel()
    assert scope.cancelled_caught
    assert ended - flaky.calls[0] == pytest.approx(0.01)
    assert len(flaky.calls) == 1


async def test_a_retry_after_past_the_limit_fails_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Issue 31 (6): a provider asking for an hour is not waited for; the error says how
    long it asked and which key bounds it."""
    flaky = Flaky(Transient("HTTP 429: quota", reason="rate limited", retry_after_s=3600.0))
    start = trio.current_time()
    with pytest.raises(ModelError) as info:
        await call_with_retries(flaky, policy=RetryPolicy(), on_retry=None)
    assert trio.current_time() == start
    assert str(info.value) == (
        "HTTP 429: quota (the provider asks to wait 3600 s, more than "
        "model.max_retry_after_s = 120)"
    )


def test_parse_retry_after() -> None:
    """Retry-After as seconds or an HTTP date, and OpenAI's retry-after-ms."""
    assert parse_retry_after({"Retry-After": "4"}) == 4.0
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert parse_retry_after({"Retry-After": "Wed, 21 Oct 2015 07:28:10 GMT"}, now=1445412480) == 10
    assert parse_retry_after({"Retry-After": "soon"}) is None
    assert parse_retry_after({}) is None
