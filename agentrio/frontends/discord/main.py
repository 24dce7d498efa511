"""``agentrio discord``: the Discord front-end as a process of its own.

discord.py runs on asyncio; the chat core and agentrio's Trio client run as a Trio
guest on the same thread (`agentrio.guest.run_with_guest`). The daemon starts this
process when ``[discord] enabled`` (`engine.frontends_supervisor`); people may run it
by hand too. It reads ``[discord]`` from ``<home>/config.toml`` and the bot token from
``$AGENTRIO_DISCORD_TOKEN`` or ``<home>/discord.token`` (0600), never from the TOML
file (`agentrio.frontends.setup`). SIGTERM or SIGINT stop it cleanly.
"""

from __future__ import annotations

import asyncio
import logging
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
from protocol.frontends import DiscordConfig

__all__ = ["load_discord_config", "main"]

log = logging.getLogger("agentrio.frontends.discord")


def load_discord_config(home: Path) -> DiscordConfig:
    """``[discord]`` of ``<home>/config.toml`` (defaults when absent)."""
    return load_table(home, "discord", DiscordConfig)


def main(argv: list[str] | None = None) -> int:
    args = parse_args("discord", "Discord", argv)
    home: Path = args.home
    if args.store_token:
        path = store_token(home, "discord", sys.stdin.readline())
        print(f"stored the bot token in {path}")
        return 0
    setup_logging()
    try:
        config = load_discord_config(home)
        token = read_token(home, "discord")
    except SetupError as exc:
        print(f"agentrio discord: {exc}", file=sys.stderr)
        return 2
    if not config.allowed_users:
        log.warning("[discord] allowed_users is empty: the bot refuses everyone")
    from agentrio.frontends.discord.run import run_bot

    try:
        asyncio.run(run_bot(home, config, token))
    except SetupError as exc:
        print(f"agentrio discord: {exc}", file=sys.stderr)
        return 2
    return 0
