"""The configuration of the chat front-ends (``[telegram]`` in config.toml), shared by
the daemon, which validates it at start and starts the enabled front-ends, and by the
front-end processes, which read it themselves (they never import the engine).

Pure values: reading the file and the token is the caller's business. The bot token
is never a key of the file (`TOKEN_KEY_REFUSED`): it comes from the environment
(`TELEGRAM_TOKEN_ENV`) or from ``<home>/`` `TELEGRAM_TOKEN_FILE` (0600).
"""

from __future__ import annotations

from typing import Final

import attrs

__all__ = [
    "DEFAULT_TELEGRAM_API",
    "DEFAULT_TELEGRAM_FILE_API",
    "TELEGRAM_TOKEN_ENV",
    "TELEGRAM_TOKEN_FILE",
    "TOKEN_KEY_REFUSED",
    "TelegramConfig",
]

DEFAULT_TELEGRAM_API: Final = "https://api.telegram.org/bot"
DEFAULT_TELEGRAM_FILE_API: Final = "https://api.telegram.org/file/bot"
TELEGRAM_TOKEN_ENV: Final = "AGENTRIO_TELEGRAM_TOKEN"
TELEGRAM_TOKEN_FILE: Final = "telegram.token"
TOKEN_KEY_REFUSED: Final = (
    "the bot token is never read from config.toml: set $AGENTRIO_TELEGRAM_TOKEN or "
    "store it with `agentrio telegram --store-token` (<home>/telegram.token, 0600)"
)


def _api_url(_: object, attribute: attrs.Attribute[str], value: str) -> None:
    if not value.startswith(("https://", "http://")):
        raise ValueError(f"{attribute.name} must start with https:// or http://")


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
