"""``agentrio telegram``: the Telegram front-end as a process of its own.

python-telegram-bot runs on asyncio; the chat core and agentrio's Trio client run as a
Trio guest on the same thread (`agentrio.guest.run_with_guest`). The daemon starts this
process when ``[telegram] enabled`` (`engine.frontends_supervisor`); people may run it
by hand too. It reads ``[telegram]`` from ``<home>/config.toml`` and the bot token
from ``$AGENTRIO_TELEGRAM_TOKEN`` or ``<home>/telegram.token`` (0600), never from the
TOML file (`agentrio.frontends.setup`). SIGTERM or SIGINT stop it cleanly.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from pathlib import Path

from agentrio.frontends.setup import (
    SetupError,
    load_table,
    parse_args,
    read_token,
    setup_logging,
    store_token,
)
from protocol.frontends import TelegramConfig

__all__ = ["SetupError", "load_telegram_config", "main"]

log = logging.getLogger("agentrio.frontends.telegram")


def load_telegram_config(home: Path) -> TelegramConfig:
    """``[telegram]`` of ``<home>/config.toml`` (defaults when absent)."""
    return load_table(home, "telegram", TelegramConfig)


def main(argv: list[str] | None = None) -> int:
    args = parse_args("telegram", "Telegram", argv)
    home: Path = args.home
    if args.store_token:
        path = store_token(home, "telegram", sys.stdin.readline())
        print(f"stored the bot token in {path}")
        return 0
    setup_logging()
    logging.getLogger("httpx").setLevel(logging.WARNING)  # its lines name the token
    try:
        config = load_telegram_config(home)
        token = read_token(home, "telegram")
    except SetupError as exc:
        print(f"agentrio telegram: {exc}", file=sys.stderr)
        return 2
    if not config.allowed_users:
        log.warning("[telegram] allowed_users is empty: the bot refuses everyone")
    os.environ.setdefault("PTB_TIMEDELTA", "1")
    from agentrio.frontends.telegram.run import run_bot

    try:
        asyncio.run(run_bot(home, config, token))
    except SetupError as exc:
        print(f"agentrio telegram: {exc}", file=sys.stderr)
        return 2
    return 0
