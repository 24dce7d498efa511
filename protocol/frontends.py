"""The configuration of the chat front-ends (``[telegram]``, ``[discord]`` in
config.toml), shared by the daemon, which validates it at start and starts the enabled
front-ends, and by the front-end processes, which read it themselves (they never import
the engine).

Pure values: reading the file and the token is the caller's business. The bot token
is never a key of the file (`token_key_refused`): it comes from the environment
(`TELEGRAM_TOKEN_ENV`, `DISCORD_TOKEN_ENV`) or from ``<home>/`` `TELEGRAM_TOKEN_FILE`,
`DISCORD_TOKEN_FILE` (0600).
"""

from __future__ import annotations

from typing import Final

import attrs

__all__ = [
    "DEFAULT_DISCORD_API",
    "DEFAULT_DISCORD_GATEWAY",
    "DEFAULT_TELEGRAM_API",
    "DEFAULT_TELEGRAM_FILE_API",
    "DISCORD_TOKEN_ENV",
    "DISCORD_TOKEN_FILE",
    "TELEGRAM_TOKEN_ENV",
    "TELEGRAM_TOKEN_FILE",
    "TOKEN_KEY_REFUSED",
    "DiscordConfig",
    "TelegramConfig",
    "token_key_refused",
]

DEFAULT_TELEGRAM_API: Final = "https://api.telegram.org/bot"
DEFAULT_TELEGRAM_FILE_API: Final = "https://api.telegram.org/file/bot"
TELEGRAM_TOKEN_ENV: Final = "AGENTRIO_TELEGRAM_TOKEN"
TELEGRAM_TOKEN_FILE: Final = "telegram.token"
DEFAULT_DISCORD_API: Final = "https://discord.com/api/v10"
DEFAULT_DISCORD_GATEWAY: Final = "wss://gateway.discord.gg/"
DISCORD_TOKEN_ENV: Final = "AGENTRIO_DISCORD_TOKEN"
DISCORD_TOKEN_FILE: Final = "discord.token"


def token_key_refused(platform: str) -> str:
    """Why a ``token`` key in ``[<platform>]`` is refused, and where the token goes."""
    return (
        f"the bot token is never read from config.toml: set "
        f"$AGENTRIO_{platform.upper()}_TOKEN or store it with `agentrio {platform} "
        f"--store-token` (<home>/{platform}.token, 0600)"
    )


TOKEN_KEY_REFUSED: Final = token_key_refused("telegram")


def _api_url(_: object, attribute: attrs.Attribute[str], value: str) -> None:
    if not value.startswith(("https://", "http://")):
        raise ValueError(f"{attribute.name} must start with https:// or http://")


def _gateway_url(_: object, attribute: attrs.Attribute[str], value: str) -> None:
    if not value.startswith(("wss://", "ws://")):
        raise ValueError(f"{attribute.name} must start with wss:// or ws://")


@attrs.frozen(kw_only=True)
class TelegramConfig:
    """``[telegram]``: docs/frontends.md."""

    #: Start the bot with the daemon (supervised: restarted on a crash).
    enabled: bool = False
    #: Telegram user ids that may use the bot; anyone else gets one refusal.
    allowed_users: list[int] = attrs.field(factory=list)
    #: Answer in group chats too (their allowed users only).
    allow_groups: bool = False
    #: Take secret values (``store_secret``) in the chat; the message is deleted at once.
    allow_secrets_in_chat: bool = False
    #: The Bot API's base URL (tests point it at a fake server).
    api_base_url: str = attrs.field(default=DEFAULT_TELEGRAM_API, validator=_api_url)
    api_file_url: str = attrs.field(default=DEFAULT_TELEGRAM_FILE_API, validator=_api_url)


@attrs.frozen(kw_only=True)
class DiscordConfig:
    """``[discord]``: docs/frontends.md."""

    #: Start the bot with the daemon (supervised: restarted on a crash).
    enabled: bool = False
    #: Discord user ids that may use the bot; anyone else gets one refusal.
    allowed_users: list[int] = attrs.field(factory=list)
    #: Answer in guild (server) channels too, not only in direct messages.
    allow_guilds: bool = False
    #: With ``allow_guilds``: only these channel ids (empty: every channel it can read).
    allowed_channels: list[int] = attrs.field(factory=list)
    #: Take secret values (``store_secret``) in the chat; the message is deleted at once.
    allow_secrets_in_chat: bool = False
    #: The REST API's base URL and the gateway's URL (tests point them at a fake server).
    api_base_url: str = attrs.field(default=DEFAULT_DISCORD_API, validator=_api_url)
    gateway_url: str = attrs.field(default=DEFAULT_DISCORD_GATEWAY, validator=_gateway_url)
