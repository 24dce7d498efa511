"""``agentrio discord``: the Discord front-end as a process of its own.

discord.py runs on asyncio; the chat core and agentrio's Trio client run as a Trio
guest on the same thread (`agentrio.guest.run_with_guest`). The daemon starts this
process when ``[discord] enabled`` (`agentrio.engine.frontends_supervisor`); people may run it
by hand too. It reads ``[discord]`` from ``<home>/config.toml`` and the bot token from
``$AGENTRIO_DISCORD_TOKEN`` or ``<home>/discord.token`` (0600), never from the TOML
file (`agentrio.frontends.setup`). SIGTERM or SIGINT stop it cleanly.
"""

from __future__ import annotations

from agentrio.frontends.setup import BotRunner, run_frontend
from agentrio.protocol.frontends import DiscordConfig

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    return run_frontend(
        argv, name="discord", title="Discord", config_type=DiscordConfig, load_runner=_runner
    )


def _runner() -> BotRunner[DiscordConfig]:
    from agentrio.frontends.discord.run import run_bot

    return run_bot
