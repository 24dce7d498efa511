"""Modal pieces drawn between the live text and the input: menus, confirmations, forms.

Each is an object with ``__pt_container__`` (as ptpython's dialogs are) that calls back
once with its answer; what the answer *means* (which frame goes out) is decided by
`repl.state.ReplState` and `repl.commands`, so these classes only collect input.

Keys: Up/Down (or Tab/Shift+Tab) move, Enter picks, a digit picks that entry, Space
toggles in multi-select. Esc in a popup picks its harmless first entry ("No"); a
confirmation or question cannot be dismissed by Esc (it needs an answer, and Ctrl+C
still cancels the whole task), except that Esc leaves the deny-reason field.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from prompt_toolkit.application.current import get_app
from prompt_toolkit.buffer import Buffer
from prompt_toolkit.filters import Condition
from prompt_toolkit.formatted_text import StyleAndTextTuples
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.layout import (
    AnyContainer,
    ConditionalContainer,
    Container,
    DynamicContainer,
    FormattedTextControl,
    HSplit,
    Window,
)
from prompt_toolkit.widgets import Frame, TextArea

from protocol.events import Question
from protocol.frames import Ask
from repl.commands import ConfirmChoice
from repl.render import clip, format_args
from repl.state import Popup

__all__ = ["ConfirmDialog", "Menu", "PopupDialog", "QuestionDialog", "focus"]


def focus(target: AnyContainer | Buffer) -> bool:
    """Focus ``target``; False when it cannot take the focus yet.

    prompt_toolkit only focuses windows that were visible at the last render, so a
    dialog that was just swapped in can be focused only after it is drawn once: the
    caller retries after the next render.
    """
    try:
        get_app().layout.focus(target)
    except ValueError:
        return False
    return True


def _text(fragments: StyleAndTextTuples) -> Window:
    return Window(FormattedTextControl(fragments), dont_extend_height=True, wrap_lines=True)


class Menu:
    """A vertical list of choices. ``on_done`` gets ``[index]`` (single) or the sorted
    checked indexes (``multi``, Enter confirms)."""

    def __init__(
        self,
        choices: Sequence[str],
        on_done: Callable[[list[int]], None],
        *,
        multi: bool = False,
        on_escape: Callable[[], None] | None = None,
    ) -> None:
        self.choices = list(choices)
        self.selected = 0
        self.checked: set[int] = set()
        self.multi = multi
        self._on_done = on_done
        kb = KeyBindings()

        @kb.add("up")
        @kb.add("s-tab")
        def _up(event: KeyPressEvent) -> None:
            self.selected = (self.selected - 1) % len(self.choices)

        @kb.add("down")
        @kb.add("tab")
        def _down(event: KeyPressEvent) -> None:
            self.selected = (self.selected + 1) % len(self.choices)

        @kb.add("enter")
        def _enter(event: KeyPressEvent) -> None:
            self._done(self.selected)

        @kb.add(" ")
        def _space(event: KeyPressEvent) -> None:
            if self.multi:
                self.checked ^= {self.selected}
            else:
                self._done(self.selected)

        for digit in range(1, min(len(self.choices), 9) + 1):

            @kb.add(str(digit))
            def _digit(event: KeyPressEvent, index: int = digit - 1) -> None:
                self.selected = index
                if self.multi:
                    self.checked ^= {index}
                else:
                    self._done(index)

        if on_escape is not None:
            escape = on_escape

            @kb.add("escape", eager=True)
            def _escape(event: KeyPressEvent) -> None:
                escape()

        self.control = FormattedTextControl(
            self._fragments, focusable=True, key_bindings=kb, show_cursor=False
        )
        self.window = Window(self.control, dont_extend_height=True)

    def _done(self, index: int) -> None:
        self._on_done(sorted(self.checked) if self.multi else [index])

    def _fragments(self) -> StyleAndTextTuples:
        out: StyleAndTextTuples = []
        for index, choice in enumerate(self.choices):
            current = index == self.selected
            mark = "> " if current else "  "
            box = ("[x] " if index in self.checked else "[ ] ") if self.multi else ""
            style = "class:menu.selected" if current else "class:menu"
            number = f"{index + 1}. " if index < 9 else "   "
            out.append((style, f"{mark}{number}{box}{choice}\n"))
        if self.multi:
            out.append(("class:dim", "  Space toggles, Enter confirms\n"))
        if out:
            last = out[-1]
            out[-1] = (last[0], last[1].removesuffix("\n"))
        return out

    def __pt_container__(self) -> Container:
        return self.window


class PopupDialog:
    """The cancel popup, the background-leg menu, or its confirmation (R47)."""

    def __init__(self, popup: Popup, choose: Callable[[int], None]) -> None:
        self.popup = popup
        self.menu = Menu(
            popup.choices, lambda picked: choose(picked[0]), on_escape=lambda: choose(0)
        )
        self.container = Frame(
            HSplit([_text([("class:dialog.title", popup.title)]), self.menu]),
            style="class:dialog",
        )

    def focus_target(self) -> AnyContainer:
        return self.menu

    def __pt_container__(self) -> AnyContainer:
        return self.container


class ConfirmDialog:
    """Approve a tool call (SPEC §11): six choices, a reason field for Deny, and a
    password field for a restricted path (R7)."""

    def __init__(
        self,
        ask: Ask,
        on_answer: Callable[[ConfirmChoice, str, str | None], None],
    ) -> None:
        self.ask = ask
        self._on_answer = on_answer
        self.asking_reason = False
        self.error = ""
        self.password = TextArea(
            password=True,
            multiline=False,
            prompt="system password: ",
            accept_handler=self._password_entered,
        )
        self.reason = TextArea(
            multiline=False,
            prompt="reason (Enter sends, Esc goes back): ",
            accept_handler=self._reason_entered,
        )
        reason_keys = KeyBindings()

        @reason_keys.add("escape", eager=True)
        def _back(event: KeyPressEvent) -> None:
            self.asking_reason = False
            focus(self.menu)

        self.menu = Menu([c.value for c in ConfirmChoice], self._picked)
        header: StyleAndTextTuples = [
            ("class:dialog.title", f"Run {ask.tool_name}?\n"),
            ("class:tool", f"  {format_args(ask.tool_args, 300)}"),
        ]
        if ask.restricted:
            header.append(("class:warn", "\n  ⚠ touches a restricted path"))
        self.container = Frame(
            HSplit(
                [
                    _text(header),
                    ConditionalContainer(
                        self.password, filter=Condition(lambda: self.ask.need_password)
                    ),
                    self.menu,
                    ConditionalContainer(
                        HSplit([self.reason], key_bindings=reason_keys),
                        filter=Condition(lambda: self.asking_reason),
                    ),
                    ConditionalContainer(
                        Window(
                            FormattedTextControl(lambda: [("class:error", self.error)]), height=1
                        ),
                        filter=Condition(lambda: bool(self.error)),
                    ),
                ]
            ),
            title="Confirm tool call",
            style="class:dialog",
        )

    def focus_target(self) -> AnyContainer:
        return self.password if self.ask.need_password else self.menu

    def _password_entered(self, buffer: Buffer) -> bool:
        focus(self.menu)
        return True

    def _reason_entered(self, buffer: Buffer) -> bool:
        self._on_answer(ConfirmChoice.DENY, buffer.text.strip(), None)
        return True

    def _picked(self, picked: list[int]) -> None:
        choice = list(ConfirmChoice)[picked[0]]
        if choice is ConfirmChoice.DENY:
            self.asking_reason = True
            focus(self.reason)
            return
        approving = choice in (ConfirmChoice.APPROVE, ConfirmChoice.ALWAYS, ConfirmChoice.TURN)
        password: str | None = None
        if approving and self.ask.need_password:
            password = self.password.text
            if not password:
                self.error = "enter the system password first"
                focus(self.password)
                return
        self._on_answer(choice, "", password)

    def __pt_container__(self) -> AnyContainer:
        return self.container


class QuestionDialog:
    """One form per ask: each question in turn as a menu (options, multi-select) or a
    text field (free text; hidden for secrets). Answers go back together, in order."""

    def __init__(self, ask: Ask, on_answer: Callable[[list[str]], None]) -> None:
        self.ask = ask
        self.questions = list(ask.questions) or [
            Question(text="value", secret=ask.kind == "secret")
        ]
        self.answers: list[str] = []
        self._on_answer = on_answer
        self.element: AnyContainer = self._build(self.questions[0])
        self.container = Frame(
            HSplit(
                [
                    Window(
                        FormattedTextControl(self._header), dont_extend_height=True, wrap_lines=True
                    ),
                    DynamicContainer(lambda: self.element),
                ]
            ),
            title="Secret" if ask.kind == "secret" else "Question",
            style="class:dialog",
        )

    @property
    def current(self) -> Question:
        return self.questions[len(self.answers)]

    def _header(self) -> StyleAndTextTuples:
        count = len(self.questions)
        step = f"({len(self.answers) + 1}/{count}) " if count > 1 else ""
        return [("class:dialog.title", f"{step}{clip(self.current.text, 300)}")]

    def _build(self, question: Question) -> AnyContainer:
        if question.options:
            options = question.options
            return Menu(
                options,
                lambda picked: self._answered(", ".join(options[i] for i in picked)),
                multi=question.multi,
            )
        return TextArea(
            multiline=False,
            password=question.secret or self.ask.kind == "secret",
            prompt="> ",
            accept_handler=self._text_entered,
        )

    def _text_entered(self, buffer: Buffer) -> bool:
        self._answered(buffer.text)
        return True

    def _answered(self, answer: str) -> None:
        self.answers.append(answer)
        if len(self.answers) == len(self.questions):
            self._on_answer(list(self.answers))
            return
        self.element = self._build(self.current)
        focus(self.element)

    def focus_target(self) -> AnyContainer:
        return self.element

    def __pt_container__(self) -> AnyContainer:
        return self.container
