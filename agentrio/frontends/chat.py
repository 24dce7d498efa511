"""The chat front-end core, platform-neutral: Telegram and Discord are adapters of it.

`ChatFrontend.run` takes a channel of `Said`/`Pressed` from the adapter and keeps a
connection to the daemon (reconnecting with backoff and jitter). Through it:

- **who**: only ``allowed_users`` reach agentrio; anyone else gets one refusal, and
  nothing of theirs reaches the engine. Group chats only with ``allow_groups`` (and
  only those of ``group_chats``, when given).
- **sessions**: one per chat, ``<prefix><chat id>`` (``/new`` starts another,
  ``<prefix><chat id>_<n>``); the front-end is the listener for its prefix and
  subscribes to the sessions of its chats (their events become live messages).
- **messages** start a task (``POST /v1/send``), steer the running one, or answer
  what the chat was asked (a denial's reason, a question, a secret).
- **asks** become buttons (`agentrio.frontends.asks`); presses become replies.
- **faults**: while disconnected nothing is sent and presses say so; after a
  reconnect the asks that come back stay answerable, the others are withdrawn with a
  message. A press is never turned into an approval by a fault.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Final

import attrs
import trio

from agentrio.client import Client
from agentrio.errors import ClientError
from agentrio.frontends import commands
from agentrio.frontends.asks import (
    NO_LONGER_OPEN,
    RESTRICTED_REFUSAL,
    ShownAsk,
    Tokens,
    command_text,
    command_too_long,
    confirm_buttons,
    confirm_parts,
    question_buttons,
    question_parts,
)
from agentrio.frontends.conversation import Awaiting, Conversation
from agentrio.frontends.markup import Part, paginate, prose
from agentrio.frontends.platform import (
    Backoff,
    Buttons,
    ChatPlatform,
    Inbound,
    PlatformError,
    Pressed,
    Said,
    with_retries,
)
from agentrio.frontends.presses import handle_press
from agentrio.frontends.sessions import SessionBook
from agentrio.frontends.streaming import EDIT_INTERVAL_S
from agentrio.handles import Decision, Subscription
from agentrio.protocol.frames import Ask, Withdrawn

__all__ = ["ChatFrontend", "ChatSettings"]

log = logging.getLogger("agentrio.frontends")

#: After a reconnect, how long asks shown before may take to come back before they
#: are withdrawn with a message.
REOFFER_WAIT_S: Final = 3.0
NOT_CONNECTED: Final = "agentrio is not reachable right now (reconnecting): nothing was sent."


@attrs.frozen(kw_only=True)
class ChatSettings:
    #: The session prefix (``tg-``) and the platform's name in messages.
    prefix: str
    platform_name: str
    allowed_users: frozenset[int]
    allow_groups: bool = False
    #: With ``allow_groups``: only these group chats (None: every one).
    group_chats: frozenset[str] | None = None
    #: What the platform calls its group chats, in the refusal.
    groups_word: str = "group chats"
    allow_secrets_in_chat: bool = False
    edit_interval_s: float = EDIT_INTERVAL_S
    reoffer_wait_s: float = REOFFER_WAIT_S
    #: How long a message waits for a connection being made before it is refused.
    connect_wait_s: float = 10.0
    backoff: Backoff = attrs.field(factory=Backoff)


Connector = Callable[[], AbstractAsyncContextManager[Client]]


class ChatFrontend:
    """The core of a chat front-end; see the module doc."""

    def __init__(
        self,
        settings: ChatSettings,
        platform: ChatPlatform,
        connect: Connector,
        sessions: SessionBook,
    ) -> None:
        self.settings = settings
        self.platform = platform
        self.connect = connect
        self.sessions = sessions
        self.client: Client | None = None
        self.connected = trio.Event()
        self.conversations: dict[str, Conversation] = {}
        self.tokens = Tokens()
        #: Shown asks by token and by ask id.
        self.shown: dict[str, ShownAsk] = {}
        self.by_ask: dict[str, ShownAsk] = {}
        #: Resume buttons of /pending: token → (session id, task hash).
        self.resumes: dict[str, tuple[str, str]] = {}
        self.refused: set[int] = set()
        self.refused_chats: set[str] = set()
        self._nursery: trio.Nursery | None = None
        self._subscribed: set[str] = set()
        self._connection: trio.Nursery | None = None

    # ------------------------------------------------------------------ running

    async def run(self, inbound: trio.MemoryReceiveChannel[Inbound]) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            nursery.start_soon(self._connection_loop)
            async for item in inbound:
                try:
                    await self.handle(item)
                except PlatformError as exc:
                    log.warning("could not answer in chat %s: %s", item.chat, exc)
                except ClientError as exc:  # the connection dropped midway: nothing sent
                    log.info("chat %s: %s", item.chat, exc)
                    await self._tell_quietly(item.chat, NOT_CONNECTED)
            nursery.cancel_scope.cancel()

    async def _connection_loop(self) -> None:
        attempt = 0
        while True:
            try:
                async with self.connect() as client:
                    attempt = 0
                    await self._serve(client)
            except ClientError as exc:
                log.info("daemon connection: %s", exc)
            self.client = None
            self.connected = trio.Event()
            self._subscribed.clear()
            for conversation in self.conversations.values():
                conversation.close_all()
            await trio.sleep(self.settings.backoff.delay(attempt))
            attempt += 1

    async def _serve(self, client: Client) -> None:
        listener = await client.listen(self.settings.prefix)
        async with trio.open_nursery() as nursery:
            self._connection = nursery
            self.client = client
            self.connected.set()
            log.info("connected to agentrio, listening on %r", self.settings.prefix)
            for conversation in list(self.conversations.values()):
                await self.subscribe(conversation)
            stale = set(self.by_ask)
            for shown in self.by_ask.values():
                shown.reoffered = False
            if stale:
                nursery.start_soon(self._withdraw_stale, stale)
            async for notice in listener:
                if isinstance(notice, Ask):
                    await self._offer(notice)
                elif isinstance(notice, Withdrawn):
                    await self._withdrawn(notice.id, f"withdrawn: {notice.reason}")
            nursery.cancel_scope.cancel()
        self._connection = None

    async def _withdraw_stale(self, stale: set[str]) -> None:
        """Asks shown before a reconnect that did not come back are gone (their task
        stopped with the daemon): say so, and take their buttons away."""
        await trio.sleep(self.settings.reoffer_wait_s)
        for ask_id in stale:
            shown = self.by_ask.get(ask_id)
            if shown is not None and not shown.reoffered:
                await self._withdrawn(
                    ask_id, "withdrawn: agentrio restarted; the task waits in /pending"
                )

    async def subscribe(self, conversation: Conversation) -> None:
        client, nursery = self.client, self._connection
        if client is None or nursery is None or conversation.session_id in self._subscribed:
            return
        if not conversation.since:
            conversation.since = time.time()
        self._subscribed.add(conversation.session_id)
        subscription = await client.subscribe(conversation.session_id)
        nursery.start_soon(self._pump_events, conversation, subscription)

    async def _pump_events(self, conversation: Conversation, subscription: Subscription) -> None:
        assert self._nursery is not None
        async for frame in subscription:
            if frame.session_id != conversation.session_id:
                continue  # an older session of the chat (after /new)
            if conversation.fresh(frame.event):
                conversation.show(self._nursery, frame.task_hash, frame.event)

    # ------------------------------------------------------------------ inbound

    async def handle(self, item: Inbound) -> None:
        if not await self._admit(item):
            return
        if isinstance(item, Pressed):
            await handle_press(self, item)
            return
        conversation = self.conversation(item.chat)
        text = item.text.strip()
        awaiting = conversation.awaiting
        if awaiting is not None and awaiting.kind == "secret":
            # Whatever it looks like (even "/…"), it is the secret: read, then deleted.
            await self._answer_awaited(conversation, item)
        elif text.startswith("/"):
            await commands.run_command(self, conversation, text)
        elif awaiting is not None:
            await self._answer_awaited(conversation, item)
        elif text:
            await self._start_or_steer(conversation, text)

    async def _admit(self, item: Inbound) -> bool:
        """Allowed users only; one refusal for anyone else (R82)."""
        if item.user not in self.settings.allowed_users:
            log.info("refused user %d in chat %s", item.user, item.chat)
            if isinstance(item, Pressed):
                await self.platform.answer_press(item.press, "You may not use this bot.")
            elif item.user not in self.refused:
                self.refused.add(item.user)
                await self.say(
                    item.chat,
                    f"This bot is private. Your {self.settings.platform_name} user id is "
                    f"{item.user}; its owner can add it to allowed_users.",
                )
            return False
        if item.group and not self._group_allowed(item.chat):
            if isinstance(item, Said) and item.chat not in self.refused_chats:
                self.refused_chats.add(item.chat)
                await self.say(
                    item.chat, f"This bot does not work in {self.settings.groups_word} here."
                )
            return False
        return True

    def conversation(self, chat: str) -> Conversation:
        conversation = self.conversations.get(chat)
        if conversation is None:
            session = self.sessions.session_of(chat)
            conversation = Conversation(
                self.platform, chat, session, interval=self.settings.edit_interval_s
            )
            self.conversations[chat] = conversation
        return conversation

    async def wait_connected(self) -> Client | None:
        """The client, waiting a little for a connection being made (at start, after a
        daemon restart); None when there is none by then."""
        if self.client is None:
            with trio.move_on_after(self.settings.connect_wait_s):
                await self.connected.wait()
        return self.client

    async def _start_or_steer(self, conversation: Conversation, text: str) -> None:
        client = await self.wait_connected()
        if client is None:
            await self.say(conversation.chat, NOT_CONNECTED)
            return
        await self.subscribe(conversation)
        try:
            result = await client.send(
                text,
                session_id=conversation.session_id,
                pending_task=conversation.task_hash or None,
                cwd="",  # a chat works in [agent] cwd, not where the bot runs (R86)
            )
        except ClientError as exc:
            await self.say(conversation.chat, f"agentrio refused it: {exc.message}")
            return
        if conversation.task_hash and not hasattr(result, "task_hash"):
            await self.say(conversation.chat, "↪ sent to the running task")

    async def _answer_awaited(self, conversation: Conversation, item: Said) -> None:
        awaiting = conversation.awaiting
        assert awaiting is not None
        conversation.awaiting = None
        shown = self.by_ask.get(awaiting.ask_id)
        if awaiting.kind == "secret":
            # Deleted first: the value must not stay in the chat whatever happens next.
            await self._delete_quietly(item.chat, item.message)
        if shown is None or not shown.live:
            await self.say(item.chat, NO_LONGER_OPEN)
            return
        if awaiting.kind == "reason":
            await self.decide(shown, Decision.deny(item.text.strip()), f"✗ denied: {item.text}")
        elif awaiting.kind == "secret":
            await self.answer(shown, [item.text], "✓ secret received (your message was deleted)")
        else:
            await self.answer_question(shown, item.text.strip())

    async def _tell_quietly(self, chat: str, text: str) -> None:
        try:
            await self.say(chat, text)
        except PlatformError as exc:
            log.warning("could not answer in chat %s: %s", chat, exc)

    async def _delete_quietly(self, chat: str, message: str) -> None:
        try:
            await with_retries(lambda: self.platform.delete(chat, message), what="delete")
        except PlatformError as exc:
            log.warning("could not delete a secret message in chat %s: %s", chat, exc)

    # ------------------------------------------------------------------ asks

    def chat_of(self, session_id: str) -> str | None:
        conversation = next(
            (c for c in self.conversations.values() if c.session_id == session_id), None
        )
        if conversation is not None:
            return conversation.chat
        return self.sessions.chat_of(session_id)

    async def _offer(self, ask: Ask) -> None:
        previous = self.by_ask.get(ask.id)
        if previous is not None:  # offered again after a reconnect: still answerable
            previous.reoffered = True
            return
        chat = self.chat_of(ask.session_id)
        if chat is None or not await self._may_show(chat):
            await self._refuse(ask, "no allowed chat for this session")
            return
        conversation = self.conversation(chat)
        await self.subscribe(conversation)
        shown = ShownAsk(ask=ask, chat=chat, token=self.tokens.new(), reoffered=True)
        if ask.kind == "tool_confirm":
            await self._show_confirm(shown)
        elif ask.kind == "secret":
            await self._show_secret(shown, conversation)
        else:
            await self._show_question(shown, 0, conversation)

    def _group_allowed(self, chat: str) -> bool:
        chats = self.settings.group_chats
        return self.settings.allow_groups and (chats is None or chat in chats)

    async def _may_show(self, chat: str) -> bool:
        return not self.platform.is_group(chat) or self._group_allowed(chat)

    async def _refuse(self, ask: Ask, reason: str) -> None:
        if self.client is None:
            return
        try:
            await self.client.reply(ask.id, approve=False, reason=reason)
        except ClientError as exc:
            log.info("ask %s: %s", ask.id, exc)

    async def _show_confirm(self, shown: ShownAsk) -> None:
        ask = shown.ask
        refusal = (
            RESTRICTED_REFUSAL
            if ask.restricted or ask.need_password
            else command_too_long(command_text(ask))
        )
        if refusal:
            await self.say_parts(shown.chat, [*confirm_parts(ask), prose("\nRefused: " + refusal)])
            await self._refuse(ask, refusal)
            return
        await self._register(shown, confirm_parts(ask), confirm_buttons(shown.token, ask))

    async def _show_secret(self, shown: ShownAsk, conversation: Conversation) -> None:
        key = shown.ask.tool_args.get("key", "?")
        why = (
            "allow_secrets_in_chat is off"
            if not self.settings.allow_secrets_in_chat
            else self.platform.cannot_delete(shown.chat)
        )
        if why:
            await self.say(
                shown.chat,
                f"A secret value is asked for {key!r}. Secrets are not taken in this chat "
                f"({why}): store it from the REPL (agentrio) instead. "
                "The question was declined.",
            )
            await self._refuse(shown.ask, "secrets are not taken in this chat")
            return
        parts = [
            prose(
                f"Send the value of the secret {key!r} as your next message: "
                "it is deleted as soon as it is read."
            )
        ]
        # Awaited before the prompt is out: a message that arrives while it is being
        # sent is the value (deleted, never a steer carrying it to the model).
        conversation.awaiting = Awaiting("secret", shown.ask.id)
        await self._register(shown, parts, ())

    async def _show_question(self, shown: ShownAsk, index: int, conversation: Conversation) -> None:
        buttons = question_buttons(shown.token, shown.ask, index)
        conversation.awaiting = Awaiting("answer", shown.ask.id)  # before: as above
        await self._register(shown, question_parts(shown.ask, index), buttons)

    async def _register(self, shown: ShownAsk, parts: list[Part], buttons: Buttons) -> None:
        pages = paginate(parts, self.platform.dialect)
        token = shown.token
        shown.begin(pages[-1])
        # Answerable before it is sent: the person may reply while the prompt is still
        # on its way (a secret typed at once must be taken as the value, never as a
        # message to the task).
        self.shown[token] = shown
        self.by_ask[shown.ask.id] = shown
        for page in pages[:-1]:
            await self.send(shown.chat, page)
        message = await self.send(shown.chat, shown.text, buttons)
        await self._acknowledge(shown.ask.id)
        if shown.token != token:  # it moved on to its next question meanwhile
            return  # (this message's buttons answer "no longer open")
        shown.message = message
        if shown.closed_text is not None:  # answered meanwhile: take the buttons away
            await self._edit_ask(shown, shown.closed_text)

    async def _acknowledge(self, ask_id: str) -> None:
        """The platform took the ask's message: tell the daemon it is shown here
        (issue 34). A dropped connection only leaves the ask unacknowledged."""
        if self.client is None:
            return
        try:
            await self.client.acknowledge(ask_id)
        except ClientError as exc:
            log.info("ask %s: not acknowledged: %s", ask_id, exc)

    async def answer_question(self, shown: ShownAsk, answer: str) -> None:
        shown.answers.append(answer)
        if len(shown.answers) < len(shown.ask.questions):
            await self.close_ask(shown, f"→ {answer}", keep=True)
            shown.token = self.tokens.new()
            self.shown[shown.token] = shown
            await self._show_question(shown, len(shown.answers), self.conversation(shown.chat))
            return
        await self.answer(shown, list(shown.answers), f"→ {answer}")

    async def answer(self, shown: ShownAsk, answers: list[str], outcome: str) -> None:
        await self.decide(shown, Decision.answer(*answers), outcome)

    async def decide(self, shown: ShownAsk, decision: Decision, outcome: str) -> bool:
        """Send ``decision``; True when agentrio took it. Nothing is sent while
        disconnected, and an ask that is gone is closed as such."""
        client = self.client
        if client is None:
            await self.say(shown.chat, NOT_CONNECTED)
            return False
        try:
            await client.decide(shown.ask.id, decision)
        except ClientError as exc:
            if exc.code == "gone":
                await self.close_ask(shown, NO_LONGER_OPEN)
                return False
            await self.say(shown.chat, f"not sent: {exc.message}")
            return False
        await self.close_ask(shown, outcome)
        return True

    async def close_ask(self, shown: ShownAsk, outcome: str, *, keep: bool = False) -> None:
        """Take the buttons away and say what became of the ask."""
        self.shown.pop(shown.token, None)
        if not keep:
            shown.live = False
            self.by_ask.pop(shown.ask.id, None)
            conversation = self.conversations.get(shown.chat)
            if (
                conversation
                and conversation.awaiting
                and conversation.awaiting.ask_id == shown.ask.id
            ):
                conversation.awaiting = None
        tail = self.platform.dialect.prose("\n" + outcome)
        text = shown.text + tail
        if self.platform.dialect.measure(text) > self.platform.dialect.limit:
            text = shown.text
            await self.say(shown.chat, outcome)
        if not shown.message:  # still being sent: `_register` writes it in
            shown.closed_text = text
            return
        await self._edit_ask(shown, text)

    async def _edit_ask(self, shown: ShownAsk, text: str) -> None:
        try:
            await with_retries(
                lambda: self.platform.edit(shown.chat, shown.message, text), what="edit"
            )
        except PlatformError as exc:
            log.warning("could not update an ask in chat %s: %s", shown.chat, exc)

    async def _withdrawn(self, ask_id: str, message: str) -> None:
        shown = self.by_ask.get(ask_id)
        if shown is not None and shown.live:
            await self.close_ask(shown, message)

    # ------------------------------------------------------------------ output

    async def send(self, chat: str, text: str, buttons: Buttons = ()) -> str:
        return await with_retries(lambda: self.platform.send(chat, text, buttons), what="send")

    async def say(self, chat: str, text: str, buttons: Buttons = ()) -> None:
        """Post plain ``text`` (escaped), split when long."""
        await self.say_parts(chat, [prose(text)], buttons)

    async def say_parts(self, chat: str, parts: list[Part], buttons: Buttons = ()) -> None:
        pages = paginate(parts, self.platform.dialect)
        for index, page in enumerate(pages):
            await self.send(chat, page, buttons if index == len(pages) - 1 else ())
