"""Telegram for the chat core, through python-telegram-bot (PTB) on asyncio.

`TelegramPlatform` is the core's `ChatPlatform`: each call crosses to asyncio
(`agentrio.guest.GuestPortal.to_asyncio`) and PTB's errors come back as the core's:
``RetryAfter`` → `RetryLater` (its ``retry_after`` honoured), ``TimedOut`` and
``NetworkError`` (5xx, a dropped network) → `Transient`, ``BadRequest``/``Forbidden`` →
`Refused` — except "message is not modified", which is success.

`updates_to_core` is PTB's one handler: every message and button press of the bot
becomes a `Said` or `Pressed` for the core (`agentrio.frontends.hosting.Inbox`).
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from telegram import InlineKeyboardButton, InlineKeyboardMarkup, Update
from telegram.constants import ChatType, ParseMode
from telegram.error import BadRequest, Forbidden, NetworkError, RetryAfter, TelegramError, TimedOut
from telegram.ext import Application, ContextTypes

from agentrio.frontends.hosting import Inbox
from agentrio.frontends.markup import TELEGRAM_HTML, Dialect
from agentrio.frontends.platform import (
    Buttons,
    Inbound,
    Pressed,
    Refused,
    RetryLater,
    Said,
    Transient,
)
from agentrio.guest import GuestPortal

__all__ = ["TelegramPlatform", "updates_to_core"]

log = logging.getLogger("agentrio.frontends.telegram")

T = TypeVar("T")


def _markup(buttons: Buttons) -> InlineKeyboardMarkup | None:
    if not buttons:
        return None
    return InlineKeyboardMarkup(
        [[InlineKeyboardButton(b.label, callback_data=b.data) for b in row] for row in buttons]
    )


def seconds_of(value: int | float | dt.timedelta) -> float:
    return value.total_seconds() if isinstance(value, dt.timedelta) else float(value)


class TelegramPlatform:
    """The Bot API, as the chat core uses it."""

    prefix = "tg-"
    dialect: Dialect = TELEGRAM_HTML

    def __init__(
        self, application: Application[Any, Any, Any, Any, Any, Any], portal: GuestPortal
    ) -> None:
        self.application = application
        self.portal = portal

    async def _call(
        self, make: Callable[[], Awaitable[T]], *, unchanged_ok: bool = False
    ) -> T | None:
        async def run() -> T:
            return await make()

        try:
            return await self.portal.to_asyncio(run)
        except RetryAfter as exc:
            raise RetryLater(seconds_of(exc.retry_after), str(exc)) from None
        except (TimedOut, NetworkError) as exc:
            raise Transient(f"{type(exc).__name__}: {exc}") from None
        except BadRequest as exc:
            if unchanged_ok and "not modified" in str(exc).lower():
                return None
            raise Refused(f"bad request: {exc}") from None
        except (Forbidden, TelegramError) as exc:
            raise Refused(f"{type(exc).__name__}: {exc}") from None

    async def send(self, chat: str, text: str, buttons: Buttons = ()) -> str:
        bot = self.application.bot
        message = await self._call(
            lambda: bot.send_message(
                chat_id=int(chat),
                text=text,
                parse_mode=ParseMode.HTML,
                reply_markup=_markup(buttons),
                disable_web_page_preview=True,
            )
        )
        assert message is not None
        return str(message.message_id)

    async def edit(self, chat: str, message: str, text: str, buttons: Buttons = ()) -> None:
        bot = self.application.bot
        await self._call(
            lambda: bot.edit_message_text(
                chat_id=int(chat),
                message_id=int(message),
                text=text,
                parse_mode=ParseMode.HTML,
                reply_markup=_markup(buttons),
                disable_web_page_preview=True,
            ),
            unchanged_ok=True,
        )

    async def delete(self, chat: str, message: str) -> None:
        bot = self.application.bot
        await self._call(lambda: bot.delete_message(chat_id=int(chat), message_id=int(message)))

    async def answer_press(self, press: str, text: str = "") -> None:
        bot = self.application.bot
        try:
            await self._call(lambda: bot.answer_callback_query(press, text=text or None))
        except Refused as exc:  # a press older than Telegram keeps: nothing to answer
            log.info("press %s not answered: %s", press, exc)

    def is_group(self, chat: str) -> bool:
        """Telegram's group and channel ids are negative; private chats are users."""
        return chat.startswith("-")

    def cannot_delete(self, chat: str) -> str:
        """Bots may delete incoming messages in every chat they answer in (private
        chats; groups where the bot is an admin, as docs/frontends.md says)."""
        return ""


def updates_to_core(
    inbox: Inbox,
) -> Callable[[Update, ContextTypes.DEFAULT_TYPE], Coroutine[Any, Any, None]]:
    """PTB's handler: each update as a `Said` or `Pressed` for the core."""

    async def handle(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        item = inbound_of(update)
        if item is not None:
            inbox.deliver(item)

    return handle


def inbound_of(update: Update) -> Inbound | None:
    query = update.callback_query
    if query is not None:
        message = query.message
        if message is None or query.data is None:
            return None
        return Pressed(
            chat=str(message.chat.id),
            user=query.from_user.id,
            group=message.chat.type != ChatType.PRIVATE,
            data=query.data,
            press=query.id,
            message=str(message.message_id),
        )
    message = update.message
    if message is None or message.from_user is None or message.text is None:
        return None
    return Said(
        chat=str(message.chat.id),
        user=message.from_user.id,
        group=message.chat.type != ChatType.PRIVATE,
        text=message.text,
        message=str(message.message_id),
    )
