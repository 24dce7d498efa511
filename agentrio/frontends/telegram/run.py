"""The bot's two halves on one thread: python-telegram-bot on asyncio (the host), the
chat core and agentrio's client on Trio (the guest)."""

from __future__ import annotations

import asyncio
import logging
import random
from pathlib import Path
from typing import Any

import trio
from telegram import Update
from telegram.error import InvalidToken, NetworkError, RetryAfter, TimedOut
from telegram.ext import Application, TypeHandler

from agentrio.frontends.chat import ChatSettings
from agentrio.frontends.hosting import Inbox, run_core, stop_signals, unless_stopped
from agentrio.frontends.setup import SetupError
from agentrio.frontends.telegram.adapter import TelegramPlatform, seconds_of, updates_to_core
from agentrio.guest import GuestPortal, run_with_guest
from agentrio.protocol.frontends import TelegramConfig

__all__ = ["build_application", "run_bot"]

log = logging.getLogger("agentrio.frontends.telegram")

#: Seconds getUpdates waits on the server for updates.
POLL_TIMEOUT_S = 10


def build_application(
    config: TelegramConfig, token: str
) -> Application[Any, Any, Any, Any, Any, Any]:
    return (
        Application.builder()
        .token(token)
        .base_url(config.api_base_url)
        .base_file_url(config.api_file_url)
        .get_updates_read_timeout(POLL_TIMEOUT_S + 10)
        .build()
    )


def settings_of(config: TelegramConfig) -> ChatSettings:
    return ChatSettings(
        prefix="tg-",
        platform_name="Telegram",
        allowed_users=frozenset(config.allowed_users),
        allow_groups=config.allow_groups,
        allow_secrets_in_chat=config.allow_secrets_in_chat,
    )


async def run_bot(home: Path, config: TelegramConfig, token: str) -> None:
    """Run until SIGTERM/SIGINT (or until either half fails)."""
    application = build_application(config, token)
    ready = trio.Event()
    inbox = Inbox()

    async def host(portal: GuestPortal) -> None:
        application.add_handler(TypeHandler(Update, updates_to_core(inbox)))
        stop = stop_signals()
        if await unless_stopped(_initialize(application), stop) is None:
            log.info("stopped before Telegram answered")
            return
        try:
            await application.start()
            assert application.updater is not None
            await application.updater.start_polling(
                allowed_updates=["message", "callback_query"], timeout=POLL_TIMEOUT_S
            )
            me = application.bot.username
            log.info("Telegram bot @%s polling %s", me, config.api_base_url)
            portal.to_trio(ready.set)
            await stop.wait()
            log.info("stopping")
        finally:
            if application.updater is not None and application.updater.running:
                await application.updater.stop()
            if application.running:
                await application.stop()
            await application.shutdown()

    async def guest(portal: GuestPortal) -> None:
        platform = TelegramPlatform(application, portal)
        await run_core(inbox, portal, ready, settings_of(config), platform, home, "telegram")

    await run_with_guest(host, guest)


async def _initialize(application: Application[Any, Any, Any, Any, Any, Any]) -> None:
    """``getMe`` until it works: the network may be down when the bot starts. A token
    Telegram refuses is a `SetupError` (no retry can fix it)."""
    attempt = 0
    while True:
        try:
            await application.initialize()
            return
        except InvalidToken as exc:
            raise SetupError(f"Telegram refused the bot token: {exc}") from None
        except RetryAfter as exc:
            delay = seconds_of(exc.retry_after)
        except (TimedOut, NetworkError) as exc:
            delay = random.uniform(0.5, 1.0) * min(30.0, 0.5 * 2**attempt)
            log.warning("Telegram not reachable (%s); retrying in %.1f s", exc, delay)
        attempt += 1
        await asyncio.sleep(delay)
