"""The bot's two halves on one thread: discord.py on asyncio (the host), the chat core
and agentrio's client on Trio (the guest).

discord.py has no option for its endpoints; tests (and anyone with a proxy) point it
elsewhere through two public class attributes, set before the client starts
(`point_at`): ``discord.http.Route.BASE`` (the REST base, the attribute discord.py's own
API-version switch sets) and ``discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY`` (the
first gateway URL: a single-shard ``Client`` does not ask ``GET /gateway/bot``; after
READY it resumes at READY's ``resume_gateway_url``). This process runs one bot, so
setting them process-wide is what it means.
"""

from __future__ import annotations

import asyncio
import logging
import random
from pathlib import Path

import aiohttp
import discord
import discord.gateway
import discord.http
import trio
import yarl

from agentrio.frontends.chat import ChatSettings
from agentrio.frontends.discord.adapter import DiscordBot, DiscordPlatform
from agentrio.frontends.hosting import Inbox, run_core, stop_signals, unless_stopped
from agentrio.frontends.setup import SetupError
from agentrio.guest import GuestPortal, run_with_guest
from agentrio.protocol.frontends import DiscordConfig

__all__ = ["point_at", "run_bot", "settings_of"]

log = logging.getLogger("agentrio.frontends.discord")


def point_at(config: DiscordConfig) -> None:
    """discord.py's REST base and first gateway URL, from ``[discord]``."""
    discord.http.Route.BASE = config.api_base_url.rstrip("/")
    discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(config.gateway_url)
    # The bot never joins voice: no warning that voice's libraries are missing.
    discord.VoiceClient.warn_nacl = discord.VoiceClient.warn_dave = False


def settings_of(config: DiscordConfig) -> ChatSettings:
    channels = frozenset(str(c) for c in config.allowed_channels)
    return ChatSettings(
        prefix="dc-",
        platform_name="Discord",
        allowed_users=frozenset(config.allowed_users),
        allow_groups=config.allow_guilds,
        group_chats=channels or None,
        groups_word="server channels",
        allow_secrets_in_chat=config.allow_secrets_in_chat,
    )


async def run_bot(home: Path, config: DiscordConfig, token: str) -> None:
    """Run until SIGTERM/SIGINT (or until either half fails)."""
    point_at(config)
    inbox = Inbox()
    ready = trio.Event()
    client = DiscordBot(inbox)

    async def host(portal: GuestPortal) -> None:
        stop = stop_signals()
        if await unless_stopped(_login(client, token), stop) is None:
            log.info("stopped before Discord answered")
            await client.close()
            return
        connection = asyncio.create_task(client.connect(reconnect=True))
        try:
            waiting = asyncio.create_task(stop.wait())
            first = asyncio.create_task(client.ready.wait())
            await asyncio.wait([waiting, first, connection], return_when=asyncio.FIRST_COMPLETED)
            if connection.done():
                connection.result()  # raises: the gateway refused the bot
            if first.done():
                log.info("Discord bot ready (REST %s)", config.api_base_url)
                portal.to_trio(ready.set)
            await asyncio.wait([waiting, connection], return_when=asyncio.FIRST_COMPLETED)
            if connection.done():
                connection.result()
            log.info("stopping")
        finally:
            await client.close()
            connection.cancel()
            await asyncio.gather(connection, return_exceptions=True)

    async def guest(portal: GuestPortal) -> None:
        platform = DiscordPlatform(client, portal)
        await run_core(inbox, portal, ready, settings_of(config), platform, home, "discord")

    await run_with_guest(host, guest)


async def _login(client: DiscordBot, token: str) -> None:
    """Log in until it works: the network may be down when the bot starts. A token
    Discord refuses is a `SetupError` (no retry can fix it)."""
    attempt = 0
    while True:
        try:
            await client.login(token)
            return
        except discord.LoginFailure as exc:
            raise SetupError(f"Discord refused the bot token: {exc}") from None
        except (discord.DiscordServerError, aiohttp.ClientError, OSError, TimeoutError) as exc:
            delay = random.uniform(0.5, 1.0) * min(30.0, 0.5 * 2**attempt)
            log.warning("Discord not reachable (%s); retrying in %.1f s", exc, delay)
        attempt += 1
        await asyncio.sleep(delay)
