"""``agentrio telegram``: the Telegram front-end as a process of its own.

python-telegram-bot runs on asyncio; the chat core and agentrio's Trio client run as a
Trio guest on the same thread (`agentrio.guest.run_with_guest`). The daemon starts this
process when ``[telegram] enabled`` (`agentrio.engine.frontends_supervisor`); people may run it
by hand too. It reads ``[telegram]`` from ``<home>/config.toml`` and the bot token
from ``$AGENTRIO_TELEGRAM_TOKEN`` or ``<home>/telegram.token`` (0600), never from the
TOML file (`agentrio.frontends.setup`). SIGTERM or SIGINT stop it cleanly.
"""

from __future__ import annotations

import logging
import os

from agentrio.frontends.setup import BotRunner, run_frontend
from agentrio.protocol.frontends import TelegramConfig

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    return run_frontend(
        argv, name="telegram", title="Telegram", config_type=TelegramConfig, load_runner=_runner
    )


def _runner() -> BotRunner[TelegramConfig]:
    logging.getLogger("httpx").setLevel(logging.WARNING)  # its lines name the token
    os.environ.setdefault("PTB_TIMEDELTA", "1")
    from agentrio.frontends.telegram.run import run_bot

    return run_bot
