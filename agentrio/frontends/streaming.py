"""A task's output in a chat: one message edited as the text grows, at most once per
``interval`` seconds, continued in new messages past the platform's limit.

Parts are appended as they come (prose from the model, code from tools); every flush
paginates the whole and brings the chat up to date: pages already sent and unchanged
are left alone, the page that grew is edited, new pages are sent. Code blocks are
never broken across messages (`agentrio.frontends.markup.paginate`). Platform errors
are retried by `with_retries`; one that still fails is logged and the next flush tries
again (a message's text is never lost, only late).
"""

from __future__ import annotations

import logging
import math
from functools import partial
from typing import Final

import trio

from agentrio.frontends.markup import Part, paginate, parse
from agentrio.frontends.platform import ChatPlatform, PlatformError, Refused, with_retries

__all__ = ["EDIT_INTERVAL_S", "LiveMessage"]

log = logging.getLogger("agentrio.frontends")

#: The shortest time between two flushes of one live message.
EDIT_INTERVAL_S: Final = 1.0


class LiveMessage:
    """The live output of one task in one chat. Run `run` in a nursery; `append` and
    `close` from anywhere on the Trio side."""

    def __init__(
        self, platform: ChatPlatform, chat: str, *, interval: float = EDIT_INTERVAL_S
    ) -> None:
        self.platform = platform
        self.chat = chat
        self.interval = interval
        self.parts: list[Part] = []
        #: ``(message id, text)`` of every page sent, in order.
        self.sent: list[tuple[str, str]] = []
        #: How many flushes made a platform call (tests count the edits).
        self.flushes = 0
        self._wake = trio.Event()
        self._last_flush = -math.inf
        self._closed = False
        self._done = trio.Event()

    def append(self, part: Part) -> None:
        """Add code, or prose in markdown (its fenced blocks become code blocks: the
        text is parsed whole at each flush, so a fence split across stream pieces is
        still one block)."""
        if part.text:
            if self.parts and not self.parts[-1].is_code and not part.is_code:
                self.parts[-1] = Part(self.parts[-1].text + part.text)
            else:
                self.parts.append(part)
            self._wake.set()

    @property
    def empty(self) -> bool:
        return not self.parts

    def close(self) -> None:
        """No more parts: `run` flushes what is left and returns."""
        self._closed = True
        self._wake.set()

    async def wait_done(self) -> None:
        await self._done.wait()

    async def run(self) -> None:
        try:
            while True:
                await self._wake.wait()
                self._wake = trio.Event()
                delay = self._last_flush + self.interval - trio.current_time()
                if delay > 0:
                    await trio.sleep(delay)
                self._wake = trio.Event()  # the flush below takes all that came
                await self.flush()
                if self._closed and not self._wake.is_set():
                    return
        finally:
            self._done.set()

    async def flush(self) -> None:
        """Bring the chat up to date now (callers rate-limit; `run` does)."""
        parts = [p for part in self.parts for p in ([part] if part.is_code else parse(part.text))]
        pages = paginate(parts, self.platform.dialect) if parts else []
        changed = False
        try:
            for index, page in enumerate(pages):
                if index < len(self.sent):
                    message, text = self.sent[index]
                    if text != page:
                        await with_retries(
                            partial(self.platform.edit, self.chat, message, page), what="edit"
                        )
                        self.sent[index] = (message, page)
                        changed = True
                else:
                    message = await with_retries(
                        partial(self.platform.send, self.chat, page), what="send"
                    )
                    self.sent.append((message, page))
                    changed = True
        except Refused as exc:
            log.warning("chat %s: the platform refused the output: %s", self.chat, exc)
            changed = True
        except PlatformError as exc:
            log.warning("chat %s: output not shown yet: %s", self.chat, exc)
            self._wake.set()
            changed = True
        if changed:
            self.flushes += 1
            self._last_flush = trio.current_time()
