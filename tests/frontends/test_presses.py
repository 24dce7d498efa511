"""Button presses read as untrusted data (R82): a platform client can send any
callback data, so a malformed or out-of-range option answers nothing and never
raises (an exception would end the front-end's loop)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from agentrio.frontends.asks import NO_LONGER_OPEN, ShownAsk
from agentrio.frontends.platform import Pressed
from agentrio.frontends.presses import handle_press
from agentrio.protocol.events import Question
from agentrio.protocol.frames import Ask


class FakeFront:
    """The parts of `ChatFrontend` a press uses, recording what they were asked."""

    def __init__(self, shown: ShownAsk) -> None:
        self.shown = {shown.token: shown}
        self.client = object()
        self.answered: list[str] = []
        self.presses: list[tuple[str, str | None]] = []
        self.platform = SimpleNamespace(answer_press=self._answer_press)

    async def _answer_press(self, press: str, text: str | None = None) -> None:
        self.presses.append((press, text))

    async def answer_question(self, shown: ShownAsk, answer: str) -> None:
        self.answered.append(answer)


def shown_question() -> ShownAsk:
    ask = Ask(
        id="a" * 32,
        kind="ask_user",
        session_id="tg-1",
        task_hash="b" * 32,
        questions=[Question(text="Which?", options=["x", "y"])],
    )
    return ShownAsk(ask=ask, chat="1", token="t1")


@pytest.mark.parametrize("choice", ["oX.1", "o0.", "o0.9", "o5.0", "o-1.0", "o0.1.2", "o"])
async def test_a_malformed_option_press_answers_nothing(choice: str) -> None:
    """R82: forged or stale option data is ignored, without an exception."""
    front: Any = FakeFront(shown_question())
    await handle_press(
        front, Pressed(chat="1", user=7, group=False, data=f"t1|{choice}", press="p1", message="m1")
    )
    assert front.answered == []


async def test_a_valid_option_press_answers_it() -> None:
    """R82: the option's index picks that option's text."""
    front: Any = FakeFront(shown_question())
    await handle_press(
        front, Pressed(chat="1", user=7, group=False, data="t1|o0.1", press="p1", message="m1")
    )
    assert front.answered == ["y"]


async def test_a_press_from_another_chat_answers_nothing() -> None:
    """R82: an ask is answered only from the chat it was shown in."""
    front: Any = FakeFront(shown_question())
    await handle_press(
        front, Pressed(chat="2", user=7, group=False, data="t1|o0.1", press="p1", message="m1")
    )
    assert front.answered == []
    assert front.presses == [("p1", NO_LONGER_OPEN)]
