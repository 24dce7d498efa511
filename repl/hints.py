"""The key hint line at the foot of each dialog: which keys it takes, as it takes them.

Pure functions of what a dialog shows, so each hint is tested against the dialog's real
keys without a terminal (`agentrio.repl.dialogs` draws them in ``class:dialog.hint``). A dialog
that is not armed yet takes no key (R77) and says so instead.
"""

from __future__ import annotations

from typing import Final

from agentrio.protocol import wording
from agentrio.protocol.events import Question

__all__ = ["ARMING", "NOT_AN_ANSWER", "confirm_hint", "popup_hint", "question_hint", "typed_note"]

#: Shown while a confirmation or question is not armed yet (R77).
ARMING: Final = "(arming… what you type still goes to the input line)"
#: The keys every confirmation and question share once armed.
_STOP: Final = f"Esc: stop menu · Ctrl+C: {wording.STOP_DISCARD.lower()}"


#: What a confirmation says of text typed at it (issue 34 item 3): it decides nothing.
NOT_AN_ANSWER: Final = "typing is not an answer: nothing was chosen or sent"


def typed_note(text: str, *, ended: bool) -> str:
    """The confirmation's note on text typed at its choices (`agentrio.repl.menus.Menu`):
    while it is typed, and once its Enter ended it; the person still has to choose."""
    shown = text if len(text) <= 60 else text[:59] + "…"
    if not ended:
        return f"{NOT_AN_ANSWER} · typed: {shown} · Enter ends it"
    return f"{NOT_AN_ANSWER} ({shown!r}) · choose with ↑↓ Enter or a digit"


def _digits(count: int) -> str:
    """``1–6`` for six entries: the digits a menu takes (at most 9)."""
    top = min(count, 9)
    return "1" if top == 1 else f"1–{top}"


def confirm_hint(
    *, armed: bool, entries: int = 6, asking_reason: bool = False, in_password: bool = False
) -> str:
    """A tool confirmation's hint: its ``entries`` choices (the six, and one more per
    rule the ask offers), the reason field, the password."""
    if not armed:
        return ARMING
    if asking_reason:
        return "type the reason · Enter sends it (the call is denied) · Esc back to the choices"
    if in_password:
        return f"type the system password · Enter goes to the choices · {_STOP}"
    return f"↑↓ choose · Enter or {_digits(entries)} picks · {_STOP}"


def question_hint(
    question: Question,
    *,
    armed: bool,
    secret: bool = False,
    typing_other: bool = False,
    back_to: int = 0,
) -> str:
    """A question's hint: options (one or several, and Other…), the Other… line, or a
    text field (hidden for secrets); ``back_to`` (1-based, 0 for none) is the question
    PgUp goes back to."""
    if not armed:
        return ARMING
    back = f" · PgUp: back to question {back_to}" if back_to else ""
    entries = len(question.options) + 1  # the options and Other…
    if typing_other:
        return f"type your answer · Enter answers · Esc back to the choices{back}"
    if question.options and question.multi:
        digits = _digits(entries)
        return f"↑↓ move · Space or {digits} ticks · Enter confirms{back} · {_STOP}"
    if question.options:
        return f"↑↓ choose · Enter or {_digits(entries)} picks{back} · {_STOP}"
    hidden = "typing is hidden · " if secret or question.secret else ""
    return f"{hidden}Enter answers{back} · {_STOP}"


def popup_hint(choices: tuple[str, ...]) -> str:
    """A popup's hint: it is armed from the start; Esc picks its harmless first entry."""
    return f"↑↓ choose · Enter or {_digits(len(choices))} picks · Esc: {choices[0]}"
