"""Asks in a chat: what a confirmation, a question or a secret looks like, and which
answer each button gives.

A shown ask has a short *token*; its buttons carry ``<token>|<choice>`` (Telegram
allows 64 bytes of callback data, Discord 100 characters of ``custom_id``). A rule the
confirmation offers (R92) is written out in full in the message, numbered, and its
button (``p<N>``, after the fixed ones) names that number: a button label is too short
(Discord: 80 characters) to say the prefix and the directory faithfully. A press
whose token is unknown — the ask was answered, withdrawn, or shown by an earlier run of
the bot — gets `NO_LONGER_OPEN` and nothing is sent to agentrio: no fault ever approves.
"""

from __future__ import annotations

import itertools
from typing import Final, Literal

import attrs

from agentrio.frontends.markup import Part, code, prose
from agentrio.frontends.platform import Button
from agentrio.handles import Decision
from agentrio.protocol import wording
from agentrio.protocol.causes import Cause
from agentrio.protocol.events import FileChange
from agentrio.protocol.faithful import confirm_lines, one_line, plain_text
from agentrio.protocol.frames import Ask

__all__ = [
    "CHOICES",
    "HEAD_LINES",
    "MAX_CONFIRM_CHARS",
    "NO_LONGER_OPEN",
    "RESTRICTED_REFUSAL",
    "ShownAsk",
    "Tokens",
    "command_text",
    "command_too_long",
    "confirm_buttons",
    "confirm_parts",
    "decision_of",
    "offer_outcome",
    "question_buttons",
    "question_parts",
]

NO_LONGER_OPEN: Final = "This question is no longer open."
#: The longest confirmation text (every argument, rendered) a chat shows and takes an
#: answer for: about three Telegram messages, six Discord ones.
MAX_CONFIRM_CHARS: Final = 12_000
#: Lines of a longer one shown before saying how much more there is.
HEAD_LINES: Final = 40
#: Why a restricted-path confirmation is refused in a chat (docs/frontends.md).
RESTRICTED_REFUSAL: Final = wording.RESTRICTED_ELSEWHERE

Choice = Literal["a", "d", "r", "t", "k", "x"]

#: Confirmation buttons: choice letter → the words of protocol/wording.py.
CHOICES: Final[dict[str, str]] = {
    "a": wording.APPROVE,
    "d": wording.DENY,
    "r": wording.ALWAYS_ALLOW,
    "t": wording.ALLOW_TURN_BUTTON,
    "k": wording.STOP_KEEP,
    "x": wording.STOP_DISCARD,
}

#: What each choice, once pressed, says under the confirmation.
OUTCOMES: Final[dict[str, str]] = {
    "a": "✓ approved",
    "r": "✓ approved, and always allowed in this home (kept across restarts)",
    "t": "✓ approved, and plain programs allowed for the rest of this turn",
    "k": "‖ stopped — kept: resume it with /pending",
    "x": "✗ stopped and discarded",
}


class Tokens:
    """Short ids for button data."""

    def __init__(self) -> None:
        self._counter = itertools.count(1)

    def new(self) -> str:
        return format(next(self._counter), "x")


@attrs.define
class ShownAsk:
    """An ask as shown in one chat."""

    ask: Ask
    chat: str
    token: str
    #: The message carrying the buttons and its text (to edit the outcome in).
    message: str = ""
    text: str = ""
    #: Answers given so far to an ask_user's questions (one per question).
    answers: list[str] = attrs.field(factory=list)
    #: Still answerable here.
    live: bool = True
    #: Offered on the current connection (an ask shown before a reconnect that is not
    #: offered again is withdrawn).
    reoffered: bool = True
    #: The closed text of an ask answered before its message was sent (a reply typed
    #: while the prompt was on its way); written in once the message exists.
    closed_text: str | None = None

    def begin(self, text: str) -> None:
        """Start showing ``text`` as a new message (the ask's next question, or its
        first): nothing sent yet, nothing closed."""
        self.text, self.message, self.closed_text = text, "", None


def command_text(ask: Ask) -> str:
    """Every argument of a confirmation, as the person must read it: the faithful
    rendering every front-end shares (`agentrio.protocol.faithful`, issue 29 finding 5) --
    ``command``, ``cwd``, ``timeout_s`` and any other argument, each line numbered,
    control, invisible and bidi characters as ``⟨\\x1b⟩``-style escapes -- and a file
    change's diff (issue 32), each line's ``+``/``-`` before its ``│``."""
    interrupted = ask.details.interrupted if ask.details is not None else ""  # issue 34
    return plain_text(confirm_lines(ask.tool_args, _change(ask), interrupted))


def _change(ask: Ask) -> FileChange | None:
    return ask.details.change if ask.details is not None else None


def command_too_long(text: str) -> str:
    """Why a confirmation showing ``text`` is not taken in a chat, or ``""``: one
    longer than `MAX_CONFIRM_CHARS` would take more messages than a person reads
    before pressing a button (the REPL and the web page scroll through any length)."""
    if len(text) <= MAX_CONFIRM_CHARS:
        return ""
    return (
        f"the command is too long to show in a chat ({len(text):,} characters); "
        "run it from the REPL (agentrio) or the web page, which show it in full"
    )


def confirm_parts(ask: Ask) -> list[Part]:
    """Title, who asks (a sub-agent), and every argument as a code block -- in full,
    or, past `MAX_CONFIRM_CHARS`, its first `HEAD_LINES` lines and how many more lines
    there are (such an ask is refused: `command_too_long`)."""
    restricted = ask.restricted or ask.need_password
    parts = [prose(wording.confirm_title(ask.tool_name, restricted=restricted) + "\n")]
    if ask.subagent:
        parts.append(prose(f"from {ask.subagent}\n"))
    text = command_text(ask)
    if not command_too_long(text):
        parts.append(code(text))
        if _change(ask) is None:  # what its "Allow this turn" button allows, in full
            parts.append(prose(f"\n{wording.ALLOW_TURN}"))
        parts.extend(_offer_parts(ask))
        return parts
    lines = text.split("\n")
    head = "\n".join(lines[:HEAD_LINES])[:MAX_CONFIRM_CHARS]
    rest = len(lines) - min(len(lines), HEAD_LINES)
    parts.append(code(head))
    parts.append(
        prose(
            f"\n… {rest:,} more line{'' if rest == 1 else 's'} and "
            f"{len(text) - len(head):,} more characters not shown here"
        )
    )
    return parts


def _offer_parts(ask: Ask) -> list[Part]:
    """Each offered rule, numbered, in the words of every front-end (its ``covers``
    line, escaped like the command, in a code block: no character of a directory's
    name is read as markup): what its button approves."""
    parts: list[Part] = []
    for number, offer in enumerate(ask.offers, 1):
        parts.append(prose(f"\nRule {number} offered:"))
        parts.append(code(wording.offer_label(one_line(offer.covers))))
    return parts


def offer_outcome(number: int) -> str:
    """What pressing the button of offered rule ``number`` says under the confirmation."""
    return f"✓ approved, and rule {number} always allowed in this home (kept across restarts)"


def confirm_buttons(token: str, ask: Ask) -> list[list[Button]]:
    """The fixed choices, then one button per offered rule (``p<index>``)."""

    def button(choice: str) -> Button:
        return Button(CHOICES[choice], f"{token}|{choice}")

    offers = [
        [Button(f"{wording.ALWAYS_ALLOW_RULE} rule {number} (above)", f"{token}|p{number - 1}")]
        for number in range(1, len(ask.offers) + 1)
    ]
    # A file change (issue 32) has no "this exact command" rule and no "Allow this
    # turn" (plain programs): its edits rule is offered.
    always = [] if _change(ask) is not None else [[button("r")], [button("t")]]
    return [[button("a"), button("d")], *always, [button("k"), button("x")], *offers]


def decision_of(choice: str, ask: Ask) -> Decision | None:
    """The reply a confirmation button gives; None for "deny" (a reason comes first)
    and for a press naming no offered rule (the press's data is untrusted)."""
    if choice.startswith("p") and choice[1:].isdigit():
        index = int(choice[1:])
        if index < len(ask.offers):
            return Decision.allow(rule=ask.offers[index].kind)
        return None
    match choice:
        case "a":
            return Decision.allow()
        case "r" if _change(ask) is None:  # a file change shows no such button
            return Decision.allow(remember=True)
        case "t" if _change(ask) is None:
            return Decision.allow(allow_turn=True)
        case "k":
            return Decision(approve=False, stop=Cause.USER_ABORTED)
        case "x":
            return Decision(approve=False, stop=Cause.USER_CANCELED)
    return None


def question_parts(ask: Ask, index: int) -> list[Part]:
    question = ask.questions[index]
    count = len(ask.questions)
    head = f"Question {index + 1}/{count}: " if count > 1 else ""
    tail = "\n(choose below, or write your answer)" if question.options else "\n(write your answer)"
    if question.options and question.multi:
        tail = "\n(choose one below, or write several separated by commas)"
    return [prose(f"{head}{question.text}{tail}")]


def question_buttons(token: str, ask: Ask, index: int) -> list[list[Button]]:
    """One button per option (data ``<token>|o<question>.<option>``)."""
    options = ask.questions[index].options
    return [[Button(option, f"{token}|o{index}.{number}")] for number, option in enumerate(options)]
