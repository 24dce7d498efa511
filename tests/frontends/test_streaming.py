"""R82: live output is edited at most once a second, split over messages at the
limit; platform calls honour retry_after and back off on server errors (MockClock)."""

from __future__ import annotations

import itertools

import pytest
import trio
import trio.testing

from agentrio.frontends.conversation import Conversation
from agentrio.frontends.markup import TELEGRAM_HTML, code, prose
from agentrio.frontends.platform import (
    Backoff,
    Buttons,
    Refused,
    RetryLater,
    Transient,
    with_retries,
)
from agentrio.frontends.streaming import LiveMessage
from agentrio.protocol.events import Compacted, Text


class FakePlatform:
    prefix = "tg-"
    dialect = TELEGRAM_HTML

    def __init__(self) -> None:
        self.calls: list[tuple[float, str, str, str]] = []
        self.failures: list[Exception] = []
        self.next_id = 0

    def _maybe_fail(self) -> None:
        if self.failures:
            raise self.failures.pop(0)

    async def send(self, chat: str, text: str, buttons: Buttons = ()) -> str:
        self._maybe_fail()
        self.next_id += 1
        self.calls.append((trio.current_time(), "send", str(self.next_id), text))
        return str(self.next_id)

    async def edit(self, chat: str, message: str, text: str, buttons: Buttons = ()) -> None:
        self._maybe_fail()
        self.calls.append((trio.current_time(), "edit", message, text))

    async def delete(self, chat: str, message: str) -> None:
        self.calls.append((trio.current_time(), "delete", message, ""))

    async def answer_press(self, press: str, text: str = "") -> None:
        pass

    def is_group(self, chat: str) -> bool:
        return False

    def cannot_delete(self, chat: str) -> str:
        return ""


async def test_edits_at_most_once_a_second(mock_clock: trio.testing.MockClock) -> None:
    """R82: text streamed in 100 pieces, 50 ms apart, costs one send and an edit per
    second -- never two calls within a second."""
    mock_clock.autojump_threshold = 0
    platform = FakePlatform()
    live = LiveMessage(platform, "1")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(live.run)
        for n in range(100):
            live.append(prose(f"word{n} "))
            await trio.sleep(0.05)
        live.close()
    times = [t for t, *_ in platform.calls]
    assert all(b - a >= 1.0 for a, b in itertools.pairwise(times))
    assert 4 <= len(times) <= 7
    assert platform.calls[-1][3].endswith("word99 ")


async def test_output_over_the_limit_goes_on_in_new_messages(
    mock_clock: trio.testing.MockClock,
) -> None:
    mock_clock.autojump_threshold = 0
    platform = FakePlatform()
    live = LiveMessage(platform, "1")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(live.run)
        live.append(prose("output:\n"))
        live.append(code("".join(f"{n}\n" for n in range(3000))))
        live.close()
    sent = [c for c in platform.calls if c[1] == "send"]
    assert len(sent) >= 4
    assert all(len(text) <= 4096 for *_, text in platform.calls)


async def test_retry_after_is_honoured(mock_clock: trio.testing.MockClock) -> None:
    """R82: a 429 is retried after exactly its retry_after (plus at most 0.25 s of
    jitter), not sooner."""
    mock_clock.autojump_threshold = 0
    platform = FakePlatform()
    platform.failures = [RetryLater(7)]
    start = trio.current_time()
    await with_retries(lambda: platform.send("1", "hi"), what="send")
    waited = platform.calls[0][0] - start
    assert 7.0 <= waited <= 7.25


async def test_server_errors_back_off_with_jitter(mock_clock: trio.testing.MockClock) -> None:
    mock_clock.autojump_threshold = 0
    platform = FakePlatform()
    platform.failures = [Transient("502"), Transient("502"), Transient("timeout")]
    start = trio.current_time()
    await with_retries(lambda: platform.send("1", "hi"), what="send", backoff=Backoff(1.0, 30))
    waited = platform.calls[0][0] - start
    assert 0.5 + 1 + 2 <= waited <= 1 + 2 + 4


async def test_refused_is_not_retried(mock_clock: trio.testing.MockClock) -> None:
    platform = FakePlatform()
    platform.failures = [Refused("bad request")]
    with pytest.raises(Refused):
        await with_retries(lambda: platform.send("1", "hi"), what="send")
    assert platform.calls == []


async def test_gives_up_after_the_attempts(mock_clock: trio.testing.MockClock) -> None:
    mock_clock.autojump_threshold = 0
    platform = FakePlatform()
    platform.failures = [Transient("down")] * 3
    with pytest.raises(Transient):
        await with_retries(lambda: platform.send("1", "hi"), what="send", attempts=3)


def test_backoff_grows_and_is_capped() -> None:
    backoff = Backoff(0.5, 30.0)
    assert 0.25 <= backoff.delay(0) <= 0.5
    assert 15.0 <= backoff.delay(20) <= 30.0


async def test_a_sessions_own_compaction_leaves_no_message_open(
    mock_clock: trio.testing.MockClock,
) -> None:
    """R82, issue 31: a ``compacted`` event of the session itself (``/compact``, no task
    hash) sends nothing to the chat and keeps no live message open; a task's text still
    streams as before."""
    mock_clock.autojump_threshold = 0
    platform = FakePlatform()
    conversation = Conversation(platform, "1", "tg-1")
    async with trio.open_nursery() as nursery:
        conversation.show(nursery, "", Compacted(seq=1, at=0, summarised=2, reason="request"))
        assert conversation._lives == {}
        conversation.show(nursery, "a" * 32, Text(seq=2, at=0, text="hello"))
        conversation.end("a" * 32)
    assert [(kind, text) for _, kind, _, text in platform.calls] == [("send", "hello")]
