"""Discord for the chat core, through discord.py on asyncio.

`DiscordPlatform` is the core's `ChatPlatform`: each call crosses to asyncio
(`agentrio.guest.GuestPortal.to_asyncio`). discord.py itself waits out a 429's
``retry_after`` and retries 5xx answers a few times; what still fails comes back as the
core's errors: ``RateLimited`` → `RetryLater`, ``DiscordServerError``, timeouts and a
dropped network → `Transient`, any other ``HTTPException`` → `Refused`.

Every message goes out with no allowed mentions (nothing it says can ping anyone) and
without link embeds. Buttons are message components (``discord.ui.Button`` with the
core's data as ``custom_id``, at most 5 to a row and 25 to a message); a press is an
interaction, which `answer_press` acknowledges (a deferred update, or an ephemeral
notice).

`DiscordBot` is the ``discord.Client``: each message of a person and each button
press becomes a `Said` or `Pressed` for the core (`agentrio.frontends.hosting.Inbox`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import aiohttp
import discord

from agentrio.frontends.hosting import Inbox
from agentrio.frontends.markup import DISCORD_MARKDOWN, Dialect
from agentrio.frontends.platform import (
    Button,
    Buttons,
    Pressed,
    Refused,
    RetryLater,
    Said,
    Transient,
)
from agentrio.guest import GuestPortal

__all__ = ["DiscordBot", "DiscordPlatform", "intents"]

log = logging.getLogger("agentrio.frontends.discord")

T = TypeVar("T")

#: Discord's limits on components: buttons to a row, rows to a message, label length.
ROW_BUTTONS = 5
ROWS = 5
LABEL_LENGTH = 80
#: A press not answered by the core this soon is acknowledged by the adapter
#: (Discord allows 3 s).
ACK_DEADLINE_S = 2.5
NO_MENTIONS = discord.AllowedMentions.none()


def intents() -> discord.Intents:
    """What the bot subscribes to: messages in DMs and guild channels, their content
    (a privileged intent, switched on in the developer portal), and guilds (to know
    its channels)."""
    wanted = discord.Intents.none()
    wanted.guilds = True
    wanted.dm_messages = True
    wanted.guild_messages = True
    wanted.message_content = True
    return wanted


def _rows(buttons: Buttons) -> list[list[Button]]:
    """The core's rows within Discord's limits: rows longer than 5 split, and when
    more than 5 rows result, the buttons packed 5 to a row (25 at most)."""
    rows = [list(row[i : i + ROW_BUTTONS]) for row in buttons for i in range(0, len(row), 5)]
    if len(rows) > ROWS:
        flat = [button for row in rows for button in row][: ROWS * ROW_BUTTONS]
        rows = [flat[i : i + ROW_BUTTONS] for i in range(0, len(flat), ROW_BUTTONS)]
    return rows


def _label(text: str) -> str:
    return text if len(text) <= LABEL_LENGTH else text[: LABEL_LENGTH - 1] + "…"


def _view(buttons: Buttons) -> discord.ui.View | None:
    """A view that only carries the buttons (its presses reach `DiscordBot` as
    interactions; it is never stored for dispatch)."""
    if not buttons:
        return None
    view = discord.ui.View(timeout=None)
    for number, row in enumerate(_rows(buttons)):
        for button in row:
            view.add_item(
                discord.ui.Button(
                    label=_label(button.label),
                    custom_id=button.data,
                    style=discord.ButtonStyle.secondary,
                    row=number,
                )
            )
    return view


class DiscordPlatform:
    """The Discord REST API, as the chat core uses it."""

    prefix = "dc-"
    dialect: Dialect = DISCORD_MARKDOWN

    def __init__(self, client: DiscordBot, portal: GuestPortal) -> None:
        self.client = client
        self.portal = portal

    async def _call(self, make: Callable[[], Awaitable[T]]) -> T:
        async def run() -> T:
            return await make()

        try:
            return await self.portal.to_asyncio(run)
        except discord.RateLimited as exc:
            raise RetryLater(exc.retry_after, str(exc)) from None
        except discord.DiscordServerError as exc:
            raise Transient(f"{exc.status}: {exc.text}") from None
        except discord.HTTPException as exc:
            if exc.status == 429:
                raise RetryLater(1.0, str(exc)) from None
            raise Refused(f"{exc.status}: {exc.text}") from None
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            raise Transient(f"{type(exc).__name__}: {exc}") from None

    def _channel(self, chat: str) -> discord.PartialMessageable:
        return self.client.get_partial_messageable(int(chat))

    async def send(self, chat: str, text: str, buttons: Buttons = ()) -> str:
        async def make() -> discord.Message:
            view = _view(buttons)
            channel = self._channel(chat)
            if view is None:
                return await channel.send(
                    content=text, allowed_mentions=NO_MENTIONS, suppress_embeds=True
                )
            message = await channel.send(
                content=text, view=view, allowed_mentions=NO_MENTIONS, suppress_embeds=True
            )
            view.stop()  # presses are read as interactions, not by the view
            return message

        message = await self._call(make)
        return str(message.id)

    async def edit(self, chat: str, message: str, text: str, buttons: Buttons = ()) -> None:
        async def make() -> None:
            view = _view(buttons)
            target = self._channel(chat).get_partial_message(int(message))
            await target.edit(content=text, view=view, allowed_mentions=NO_MENTIONS)
            if view is not None:
                view.stop()

        await self._call(make)

    async def delete(self, chat: str, message: str) -> None:
        await self._call(lambda: self._channel(chat).get_partial_message(int(message)).delete())

    async def answer_press(self, press: str, text: str = "") -> None:
        interaction = self.client.presses.pop(press, None)
        if interaction is None:
            return

        async def make() -> None:
            if text:
                await interaction.response.send_message(text, ephemeral=True)
            else:
                await interaction.response.defer()

        try:
            await self._call(make)
        except Refused as exc:  # expired (3 s) or answered already: nothing to do
            log.info("press %s not answered: %s", press, exc)

    def is_group(self, chat: str) -> bool:
        """A guild channel (as seen in its messages, or known to discord.py's cache)."""
        if chat in self.client.guild_channels:
            return True
        channel = self.client.get_channel(int(chat))
        return channel is not None and getattr(channel, "guild", None) is not None

    def cannot_delete(self, chat: str) -> str:
        """Discord lets no bot delete a person's message in a direct message; in a
        server channel it needs the Manage Messages permission (docs/frontends.md)."""
        if self.is_group(chat):
            return ""
        return "Discord does not let bots delete your messages in direct messages"


class DiscordBot(discord.Client):
    """The gateway side: messages and button presses to the core."""

    def __init__(self, inbox: Inbox, **options: Any) -> None:
        super().__init__(intents=intents(), **options)
        self.inbox = inbox
        #: Interactions not answered yet, by id (`DiscordPlatform.answer_press`).
        self.presses: dict[str, discord.Interaction] = {}
        self.guild_channels: set[str] = set()
        self.ready = asyncio.Event()
        self._late: set[asyncio.Task[None]] = set()

    async def on_ready(self) -> None:
        log.info("Discord bot %s connected", self.user)
        self.ready.set()

    async def on_message(self, message: discord.Message) -> None:
        if message.author.bot or message.type not in _PERSON_MESSAGES:
            return
        group = not isinstance(message.channel, discord.DMChannel | discord.GroupChannel)
        chat = str(message.channel.id)
        if group:
            self.guild_channels.add(chat)
        self.inbox.deliver(
            Said(
                chat=chat,
                user=message.author.id,
                group=group,
                text=message.content,
                message=str(message.id),
            )
        )

    async def on_interaction(self, interaction: discord.Interaction) -> None:
        if interaction.type is not discord.InteractionType.component:
            return
        data: Any = interaction.data or {}
        custom_id = data.get("custom_id")
        if not isinstance(custom_id, str) or interaction.message is None:
            return
        chat = str(interaction.channel_id)
        group = interaction.guild_id is not None
        if group:
            self.guild_channels.add(chat)
        press = str(interaction.id)
        self.presses[press] = interaction
        asyncio.get_running_loop().call_later(ACK_DEADLINE_S, self._ack_late, press)
        self.inbox.deliver(
            Pressed(
                chat=chat,
                user=interaction.user.id,
                group=group,
                data=custom_id,
                press=press,
                message=str(interaction.message.id),
            )
        )

    def _ack_late(self, press: str) -> None:
        """Discord drops a press not answered within 3 s: when the core is slow to
        answer it (busy waiting out a rate limit), acknowledge it here."""
        interaction = self.presses.pop(press, None)
        if interaction is not None and not interaction.response.is_done():
            task = asyncio.get_running_loop().create_task(_defer(interaction))
            self._late.add(task)
            task.add_done_callback(self._late.discard)


async def _defer(interaction: discord.Interaction) -> None:
    try:
        await interaction.response.defer()
    except discord.HTTPException as exc:
        log.info("press %s not acknowledged: %s", interaction.id, exc)


_PERSON_MESSAGES: Sequence[discord.MessageType] = (
    discord.MessageType.default,
    discord.MessageType.reply,
)
