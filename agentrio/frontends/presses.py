"""What a button press does: answer a confirmation or a question, or resume a task
listed by ``/pending``. A press that matches nothing open gets `NO_LONGER_OPEN`."""

from __future__ import annotations

from agentrio.errors import ClientError
from agentrio.frontends.asks import CHOICES, NO_LONGER_OPEN, OUTCOMES, decision_of, offer_outcome
from agentrio.frontends.conversation import Awaiting
from agentrio.frontends.core import ChatCore
from agentrio.frontends.platform import Pressed

__all__ = ["handle_press"]


async def handle_press(front: ChatCore, press: Pressed) -> None:
    token, _, choice = press.data.partition("|")
    if token == "resume":
        await _resume(front, press, choice)
        return
    shown = front.shown.get(token)
    if shown is None or not shown.live or shown.chat != press.chat:
        await front.platform.answer_press(press.press, NO_LONGER_OPEN)
        return
    if front.client is None:
        await front.platform.answer_press(
            press.press, "agentrio is reconnecting: nothing was sent; press again in a moment."
        )
        return
    await front.platform.answer_press(press.press)
    if choice.startswith("o") and shown.ask.kind == "ask_user":
        # The press's data comes from the platform's client: read it as untrusted.
        index, _, number = choice[1:].partition(".")
        if not (index.isdigit() and number.isdigit()) or int(index) != len(shown.answers):
            return
        if int(index) < len(shown.ask.questions):
            options = shown.ask.questions[int(index)].options
            if int(number) < len(options):
                await front.answer_question(shown, options[int(number)])
        return
    if choice == "d":
        front.shown.pop(token, None)
        front.conversation(press.chat).awaiting = Awaiting("reason", shown.ask.id)
        await front.close_ask(shown, f"{CHOICES['d']}: reply with the reason", keep=True)
        return
    decision = decision_of(choice, shown.ask)
    if decision is not None:
        said = offer_outcome(int(choice[1:]) + 1) if decision.rule else OUTCOMES[choice]
        await front.decide(shown, decision, said)


async def _resume(front: ChatCore, press: Pressed, key: str) -> None:
    target = front.resumes.pop(key, None)
    if target is None:
        await front.platform.answer_press(press.press, NO_LONGER_OPEN)
        return
    session_id, task_hash = target
    client = front.client
    if client is None:
        front.resumes[key] = target
        await front.platform.answer_press(
            press.press, "agentrio is reconnecting: nothing was sent; press again in a moment."
        )
        return
    await front.platform.answer_press(press.press)
    conversation = front.conversation(press.chat)
    try:
        await front.subscribe(conversation)
        await client.send("", session_id=session_id, pending_task=task_hash)
    except ClientError as exc:
        await front.say(press.chat, f"not resumed: {exc.message}")
        return
    await front.say(press.chat, f"↻ resuming task {task_hash[:8]}")
