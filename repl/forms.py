"""The question form of an ``ask_user`` call or a ``secret`` ask (SPEC §11, R10).

One field per question, shown in turn: a closed question as a `Menu` of its options
that ends with "Other…", which opens a line for an answer of the person's own words
(the model is not always right about the choices); a free-text question as a line;
a secret hidden. In a form of several questions PgUp goes back to the one before, its
field as it was left (its choice, its text), and its answer is given again (issue 33
item 8). The answers go back together, in order, once the last one is given.

Like a confirmation, the form takes keys only once `QuestionDialog.arm` was called
(R77, `agentrio.repl.app`). Esc opens the stop popup of the task (R47), except in the
Other… line, where it goes back to the choices (as the deny-reason line of a
confirmation does). The hint line says which keys the field on show takes
(`agentrio.repl.hints.question_hint`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from prompt_toolkit.buffer import Buffer
from prompt_toolkit.filters import Condition
from prompt_toolkit.formatted_text import StyleAndTextTuples
from prompt_toolkit.key_binding import (
    ConditionalKeyBindings,
    KeyBindings,
    KeyPressEvent,
    merge_key_bindings,
)
from prompt_toolkit.layout import (
    AnyContainer,
    ConditionalContainer,
    DynamicContainer,
    FormattedTextControl,
    HSplit,
    Window,
)
from prompt_toolkit.widgets import Frame, TextArea

from agentrio.protocol.events import Question
from agentrio.protocol.frames import Ask
from agentrio.repl.hints import question_hint
from agentrio.repl.menus import Menu, escape_keys, focus, hint_line, leave_line_keys
from agentrio.repl.render import clip

__all__ = ["OTHER", "ChoiceField", "QuestionDialog", "TextField"]

#: The last entry of every closed question: an answer in the person's own words.
OTHER: Final = "Other…"


class TextField:
    """A free-text question's line (hidden for a secret); Enter answers it."""

    def __init__(
        self, *, secret: bool, on_answer: Callable[[str], None], armed: Callable[[], bool]
    ) -> None:
        self._on_answer = on_answer
        self._armed = armed
        self.area = TextArea(
            multiline=False, password=secret, prompt="> ", accept_handler=self._entered
        )
        self.container: AnyContainer = self.area

    def _entered(self, buffer: Buffer) -> bool:
        if self._armed():
            self._on_answer(buffer.text)
        return True  # the text stays: going back to this question shows it

    def focus_target(self) -> AnyContainer:
        return self.area


class ChoiceField:
    """A closed question: its options, then `OTHER`; picking Other… (or confirming a
    multi-select with it ticked) opens the line for the person's own answer, which is
    given alone or after the ticked options (joined by ``", "`` like them)."""

    def __init__(
        self, question: Question, *, on_answer: Callable[[str], None], armed: Callable[[], bool]
    ) -> None:
        self.options = list(question.options)
        self._on_answer = on_answer
        self._armed = armed
        #: The Other… line is open (it has the focus until Esc goes back).
        self.typing = False
        self.menu = Menu([*self.options, OTHER], self._picked, multi=question.multi, enabled=armed)
        self.other = TextArea(multiline=False, prompt="your answer: ", accept_handler=self._typed)
        self.container = HSplit(
            [
                self.menu,
                ConditionalContainer(
                    HSplit(
                        [self.other], key_bindings=leave_line_keys(self.menu, self._stop_typing)
                    ),
                    filter=Condition(lambda: self.typing),
                ),
            ]
        )

    def _stop_typing(self) -> None:
        self.typing = False

    def _chosen(self, picked: list[int]) -> list[str]:
        return [self.options[i] for i in picked if i < len(self.options)]

    def _picked(self, picked: list[int]) -> None:
        if len(self.options) in picked:  # Other…
            self.typing = True
            focus(self.other)
            return
        self._on_answer(", ".join(self._chosen(picked)))

    def _typed(self, buffer: Buffer) -> bool:
        text = buffer.text.strip()
        if self._armed() and text:
            ticked = self._chosen(sorted(self.menu.checked)) if self.menu.multi else []
            self._on_answer(", ".join([*ticked, text]))
        return True  # the text stays: going back to this question shows it

    def focus_target(self) -> AnyContainer:
        return self.other if self.typing else self.menu


Field = TextField | ChoiceField


class QuestionDialog:
    """One form per ask (see the module docstring): a field per question, in turn, and
    PgUp back to the one before. ``on_answer`` gets every answer, in order, once."""

    def __init__(
        self,
        ask: Ask,
        on_answer: Callable[[list[str]], None],
        on_escape: Callable[[], None] = lambda: None,
    ) -> None:
        self.ask = ask
        self.armed = False
        self.questions = list(ask.questions) or [
            Question(text="value", secret=ask.kind == "secret")
        ]
        #: The answers of the questions before the one on show.
        self.answers: list[str] = []
        self._on_answer = on_answer
        self.fields: list[Field] = [self._build(q) for q in self.questions]
        armed = Condition(lambda: self.armed)
        self.container = Frame(
            HSplit(
                [
                    Window(
                        FormattedTextControl(self._header), dont_extend_height=True, wrap_lines=True
                    ),
                    DynamicContainer(lambda: self.field.container),
                    hint_line(self._hint),
                ],
                key_bindings=merge_key_bindings(
                    [
                        escape_keys(on_escape, lambda: self.armed),
                        ConditionalKeyBindings(self._back_keys(), armed),
                    ]
                ),
            ),
            title="Secret" if ask.kind == "secret" else "Question",
            style="class:dialog",
        )

    def _build(self, question: Question) -> Field:
        if question.options:
            return ChoiceField(question, on_answer=self._answered, armed=self._is_armed)
        secret = question.secret or self.ask.kind == "secret"
        return TextField(secret=secret, on_answer=self._answered, armed=self._is_armed)

    def _back_keys(self) -> KeyBindings:
        keys = KeyBindings()

        @keys.add("pageup")
        def _back(event: KeyPressEvent) -> None:
            self.back()

        return keys

    def _is_armed(self) -> bool:
        return self.armed

    def arm(self) -> None:
        """Let the form take keys (called by the app once the arming delay passed)."""
        self.armed = True

    @property
    def index(self) -> int:
        """The question on show (0-based)."""
        return min(len(self.answers), len(self.questions) - 1)

    @property
    def current(self) -> Question:
        return self.questions[self.index]

    @property
    def field(self) -> Field:
        return self.fields[self.index]

    @property
    def element(self) -> AnyContainer:
        """What has the focus in the field on show (its menu, its line)."""
        return self.field.focus_target()

    def _header(self) -> StyleAndTextTuples:
        count = len(self.questions)
        step = f"({self.index + 1}/{count}) " if count > 1 else ""
        who = f"from {clip(self.ask.subagent, 200)}\n" if self.ask.subagent else ""  # R80
        return [("class:dialog.title", f"{who}{step}{clip(self.current.text, 300)}")]

    def _hint(self) -> str:
        return question_hint(
            self.current,
            armed=self.armed,
            secret=self.ask.kind == "secret",
            typing_other=isinstance(self.field, ChoiceField) and self.field.typing,
            back_to=self.index,
        )

    def _answered(self, answer: str) -> None:
        self.answers.append(answer)
        if len(self.answers) == len(self.questions):
            self._on_answer(list(self.answers))
            return
        focus(self.element)

    def back(self) -> None:
        """PgUp: the question before, as it was left; its answer is given again."""
        if not self.armed or not self.answers:
            return
        self.answers.pop()
        focus(self.element)

    def focus_target(self) -> AnyContainer:
        return self.element

    def __pt_container__(self) -> AnyContainer:
        return self.container
