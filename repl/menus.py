"""The pieces every dialog is built of, and the popups: focus, the hint line, the menu.

`Menu` is a vertical list of choices (Up/Down or Tab/Shift+Tab move, Enter picks, a
digit picks that entry, Space toggles in multi-select). `PopupDialog` is Esc's stop
popup, the background-leg menu and its confirmation (R47): it opens only on the
person's own key, so it is armed from the start, and Esc picks its harmless first
entry. `agentrio.repl.dialogs` builds the confirmation and question forms from the same parts.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from prompt_toolkit.application.current import get_app
from prompt_toolkit.buffer import Buffer
from prompt_toolkit.filters import Condition
from prompt_toolkit.formatted_text import StyleAndTextTuples
from prompt_toolkit.key_binding import ConditionalKeyBindings, KeyBindings, KeyPressEvent
from prompt_toolkit.layout import (
    AnyContainer,
    Container,
    FormattedTextControl,
    HSplit,
    Window,
)
from prompt_toolkit.widgets import Frame

from agentrio.repl.hints import popup_hint
from agentrio.repl.views import Popup

__all__ = [
    "Menu",
    "PopupDialog",
    "escape_keys",
    "focus",
    "hint_line",
    "leave_line_keys",
    "text_window",
]


def focus(target: AnyContainer | Buffer) -> bool:
    """Focus ``target`` so that the very next key reaches it with all of its keys;
    False when ``target`` is not part of the layout.

    prompt_toolkit gathers the keys of the focused window from the window up through
    its parent containers (a dialog's Esc, a confirmation's scroll keys) and caches the
    set per window, but it learns which container is whose parent only when it renders.
    A window focused before it was ever drawn — the next question of a form, built as
    the one before is answered; a dialog armed before a loaded machine drew it — took a
    key typed in that moment with its own keys only, and kept that set: the form's Esc
    never reached it again (issue 33 item 10). So the parent links are refreshed here,
    at the moment of focusing, not at the next render.
    """
    layout = get_app().layout
    try:
        layout.focus(target)
    except ValueError:
        return False
    layout.update_parents_relations()
    return True


def text_window(fragments: StyleAndTextTuples) -> Window:
    return Window(FormattedTextControl(fragments), dont_extend_height=True, wrap_lines=True)


def hint_line(text: Callable[[], str]) -> Window:
    """The dialog's last line: its key hints (`agentrio.repl.hints`)."""
    return Window(
        FormattedTextControl(lambda: [("class:dialog.hint", text())]),
        dont_extend_height=True,
        wrap_lines=True,
    )


def escape_keys(on_escape: Callable[[], None], armed: Callable[[], bool]) -> KeyBindings:
    """Esc of an armed confirmation or question: ``on_escape`` (the stop popup)."""
    keys = KeyBindings()

    @keys.add("escape", eager=True, filter=Condition(armed))
    def _escape(event: KeyPressEvent) -> None:
        on_escape()

    return keys


def leave_line_keys(menu: Menu, leave: Callable[[], None]) -> KeyBindings:
    """Esc in a dialog's text line opened from its choices (a confirmation's deny
    reason, a question's Other… answer): ``leave`` (the line closes), then the choices
    take the keys again. The typed text stays for the next time the line opens."""
    keys = KeyBindings()

    @keys.add("escape", eager=True)
    def _back(event: KeyPressEvent) -> None:
        leave()
        focus(menu)

    return keys


class Menu:
    """A vertical list of choices. ``on_done`` gets ``[index]`` (single) or the sorted
    checked indexes (``multi``, Enter confirms).

    ``on_typed`` makes it a confirmation's menu, where nothing but a choice decides
    (issue 34 item 3, R98): Space picks nothing, and a printable key that is not an
    entry's digit starts *typed text* -- a message typed at the dialog ("do NOT run
    that") -- which takes every key up to its Enter (digits, Space and Enter
    included), picks nothing and is sent nowhere; ``on_typed(text, ended)`` lets the
    dialog say so. Backspace edits it, Up/Down leave it."""

    def __init__(
        self,
        choices: Sequence[str],
        on_done: Callable[[list[int]], None],
        *,
        multi: bool = False,
        on_escape: Callable[[], None] | None = None,
        enabled: Callable[[], bool] | None = None,
        on_typed: Callable[[str, bool], None] | None = None,
    ) -> None:
        self.choices = list(choices)
        self.selected = 0
        self.checked: set[int] = set()
        self.multi = multi
        self._on_done = on_done
        self._on_typed = on_typed
        #: Text typed at a confirmation's menu, up to its Enter (None: not typing).
        self.typed: str | None = None
        kb = KeyBindings()

        @kb.add("up")
        @kb.add("s-tab")
        def _up(event: KeyPressEvent) -> None:
            self.typed = None
            self.selected = (self.selected - 1) % len(self.choices)

        @kb.add("down")
        @kb.add("tab")
        def _down(event: KeyPressEvent) -> None:
            self.typed = None
            self.selected = (self.selected + 1) % len(self.choices)

        @kb.add("enter")
        def _enter(event: KeyPressEvent) -> None:
            if self.typed is not None:
                self._type("", ended=True)
            else:
                self._done(self.selected)

        @kb.add(" ")
        def _space(event: KeyPressEvent) -> None:
            if self._on_typed is not None:
                self._type(" ")
            elif self.multi:
                self.checked ^= {self.selected}
            else:
                self._done(self.selected)

        for digit in range(1, min(len(self.choices), 9) + 1):

            @kb.add(str(digit))
            def _digit(event: KeyPressEvent, index: int = digit - 1) -> None:
                if self.typed is not None:
                    self._type(event.data)
                    return
                self.selected = index
                if self.multi:
                    self.checked ^= {index}
                else:
                    self._done(index)

        if on_typed is not None:
            self._typing_keys(kb)

        if on_escape is not None:
            escape = on_escape

            @kb.add("escape", eager=True)
            def _escape(event: KeyPressEvent) -> None:
                escape()

        # An unarmed dialog's menu takes no key even if it somehow had the focus.
        keys = kb if enabled is None else ConditionalKeyBindings(kb, Condition(enabled))
        self.control = FormattedTextControl(
            self._fragments, focusable=True, key_bindings=keys, show_cursor=False
        )
        self.window = Window(self.control, dont_extend_height=True)

    def _typing_keys(self, kb: KeyBindings) -> None:
        """A confirmation's typed text: any printable key starts or goes on with it."""

        @kb.add("<any>")
        def _typing(event: KeyPressEvent) -> None:
            if event.data.isprintable():
                self._type(event.data)

        @kb.add("backspace", filter=Condition(lambda: self.typed is not None))
        def _erase(event: KeyPressEvent) -> None:
            self._type("", erase=True)

    def _done(self, index: int) -> None:
        self._on_done(sorted(self.checked) if self.multi else [index])

    def _type(self, text: str, *, ended: bool = False, erase: bool = False) -> None:
        """Typed text goes on (or ends, at its Enter): it decides nothing."""
        typed = (self.typed or "")[:-1] if erase else (self.typed or "") + text
        self.typed = None if ended else typed
        if self._on_typed is not None:
            self._on_typed(typed, ended)

    def _fragments(self) -> StyleAndTextTuples:
        out: StyleAndTextTuples = []
        for index, choice in enumerate(self.choices):
            current = index == self.selected
            mark = "> " if current else "  "
            box = ("[x] " if index in self.checked else "[ ] ") if self.multi else ""
            style = "class:menu.selected" if current else "class:menu"
            number = f"{index + 1}. " if index < 9 else "   "
            out.append((style, f"{mark}{number}{box}{choice}\n"))
        if out:
            last = out[-1]
            out[-1] = (last[0], last[1].removesuffix("\n"))
        return out

    def __pt_container__(self) -> Container:
        return self.window


class PopupDialog:
    """The cancel popup, the background-leg menu, or its confirmation (R47). It opens
    only on the person's own key, so it is armed from the start."""

    def __init__(self, popup: Popup, choose: Callable[[int], None]) -> None:
        self.popup = popup
        self.armed = True
        self.menu = Menu(
            popup.choices, lambda picked: choose(picked[0]), on_escape=lambda: choose(0)
        )
        self.container = Frame(
            HSplit(
                [
                    text_window([("class:dialog.title", popup.title)]),
                    self.menu,
                    hint_line(lambda: popup_hint(popup.choices)),
                ]
            ),
            style="class:dialog",
        )

    def arm(self) -> None:
        """Nothing to do: a popup is armed from the start."""

    def focus_target(self) -> AnyContainer:
        return self.menu

    def __pt_container__(self) -> AnyContainer:
        return self.container
