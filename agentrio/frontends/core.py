"""What a chat command (`agentrio.frontends.commands`) and a button press
(`agentrio.frontends.presses`) act on: the chat core, `agentrio.frontends.chat.ChatFrontend`,
as a Protocol. The core imports those two modules to dispatch to them; they name the
core only through this, so no module reaches itself through its imports (issue 30, held
by tests/engine/test_architecture.py).
"""

from __future__ import annotations

from typing import Protocol

from agentrio.client import Client
from agentrio.frontends.asks import ShownAsk, Tokens
from agentrio.frontends.conversation import Conversation
from agentrio.frontends.platform import Buttons, ChatPlatform
from agentrio.frontends.sessions import SessionBook
from agentrio.handles import Decision

__all__ = ["ChatCore"]


class ChatCore(Protocol):
    """The chat core's state and actions a command or a press uses."""

    platform: ChatPlatform
    sessions: SessionBook
    client: Client | None
    conversations: dict[str, Conversation]
    tokens: Tokens
    #: Shown asks by token.
    shown: dict[str, ShownAsk]
    #: Resume buttons of /pending: token → (session id, task hash).
    resumes: dict[str, tuple[str, str]]

    def conversation(self, chat: str) -> Conversation: ...

    async def say(self, chat: str, text: str, buttons: Buttons = ()) -> None: ...

    async def subscribe(self, conversation: Conversation) -> None: ...

    async def wait_connected(self) -> Client | None: ...

    async def answer_question(self, shown: ShownAsk, answer: str) -> None: ...

    async def decide(self, shown: ShownAsk, decision: Decision, outcome: str) -> bool: ...

    async def close_ask(self, shown: ShownAsk, outcome: str, *, keep: bool = False) -> None: ...
