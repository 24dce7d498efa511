"""Modal pieces drawn between the live text and the input: confirmations, and the
question forms of `agentrio.repl.forms` (the menus and popups they share are in
`agentrio.repl.menus`; both are re-exported here).

Each is an object with ``__pt_container__`` (as ptpython's dialogs are) that calls back
once with its answer; what the answer *means* (which frame goes out) is decided by
`agentrio.repl.state.ReplState` and `agentrio.repl.commands`, so these classes only collect input.

Keys: Up/Down (or Tab/Shift+Tab) move, Enter picks, a digit picks that entry, Space
toggles in multi-select. Esc in a popup picks its harmless first entry ("Keep running",
"No"). Esc in a confirmation or question never answers it: it calls the dialog's
``on_escape``, which opens the stop popup of the task that asks (R47; choosing "Keep
running" there comes back to the dialog untouched), except that Esc leaves the
deny-reason field. Each dialog ends with a line of key hints (`agentrio.repl.hints`).

Asks arrive unbidden, so a confirmation or question is *armed* before it takes a key
(R77): `agentrio.repl.app.ReplApp` keeps the keyboard on the input line until the dialog has
been on screen for `agentrio.repl.app.ARM_DELAY_S` with no key pressed, then calls `arm`. Until
then the dialog's own bindings are switched off as well, so no key typed for the prompt
can answer it. A popup opens only on the person's own key and needs no arming.

A confirmation shows its tool arguments through `agentrio.protocol.faithful` in a `CommandView`:
line by line, invisible characters escaped, scrolled with PgUp/PgDn (Home/End) when
longer than the view, with a line saying which rows are shown and how many characters
are above and below — nothing is cut away. A file change (``write_file``/``edit_file``,
issue 32) shows its diff in the same view after the path (`confirm_lines`): each line's
``+``/``-``/``@@`` in the gutter, coloured, its text escaped by the same rules.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final

from prompt_toolkit.application.current import get_app
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
    FormattedTextControl,
    HSplit,
    UIContent,
    UIControl,
    Window,
)
from prompt_toolkit.utils import get_cwidth
from prompt_toolkit.widgets import Frame, TextArea

from agentrio.protocol.events import FileChange
from agentrio.protocol.faithful import FaithfulLine, Row, confirm_lines, source_length, wrap_rows
from agentrio.protocol.frames import Ask
from agentrio.protocol.wording import confirm_title
from agentrio.repl.commands import APPROVING, ConfirmChoice, confirm_choices
from agentrio.repl.forms import QuestionDialog
from agentrio.repl.hints import confirm_hint, typed_note
from agentrio.repl.menus import (
    Menu,
    PopupDialog,
    escape_keys,
    focus,
    hint_line,
    leave_line_keys,
    text_window,
)
from agentrio.repl.render import clip

__all__ = [
    "COMMAND_ROWS",
    "CommandView",
    "ConfirmDialog",
    "Menu",
    "PopupDialog",
    "QuestionDialog",
    "focus",
]

#: Most rows of a command shown at once; longer commands scroll (PgUp/PgDn).
COMMAND_ROWS: Final = 12
#: Terminal rows the rest of the screen needs around the command view (the dialog's
#: frame, title, choices and hints, the input line, the toolbar); the view shrinks
#: to fit a short terminal, down to 3 rows.
_SCREEN_CHROME: Final = 20
#: Style of each piece kind of a faithful rendering (see agentrio.repl.layout.STYLE).
_PIECE_STYLE: Final = {
    "text": "class:command",
    "escape": "class:command.escape",
    "mark": "class:command.mark",
    "key": "class:command.key",
}


#: Gutter styles of a diff's lines (`agentrio.protocol.faithful.diff_lines` labels).
_GUTTER_STYLE: Final = {"+": "class:diff.add", "-": "class:diff.remove", "@@": "class:diff.hunk"}


def _change(ask: Ask) -> FileChange | None:
    return ask.details.change if ask.details is not None else None


def _interrupted(ask: Ask) -> str:
    """The note of a call met again after a stop (issue 34), or ``""``."""
    return ask.details.interrupted if ask.details is not None else ""


class CommandView(UIControl):
    """A confirmation's arguments, faithfully (R77): rows of `agentrio.protocol.faithful`, wrapped
    to the window's width, at most `max_rows` at a time, scrolled by `scroll`.

    The gutter shows line numbers (or argv indexes) with ``│``; a wrapped line's further
    rows show ``┆``. `position` tells the dialog which rows are in view, so it can state
    how much is hidden."""

    def __init__(self, lines: Sequence[FaithfulLine], max_rows: Callable[[], int]) -> None:
        self.lines = list(lines)
        self.max_rows = max_rows
        self.offset = 0
        #: Rows in view at the last render (the window's height).
        self.shown = 0
        label_width = max((len(line.label) for line in self.lines), default=0)
        self._gutter = label_width + 2 if label_width else 2
        self._rows: list[Row] = []
        self._width = -1

    def rows(self, width: int) -> list[Row]:
        """Every row at window ``width`` (cached per width)."""
        if width != self._width:
            self._width = width
            self._rows = wrap_rows(self.lines, width - self._gutter, get_cwidth)
        return self._rows

    def preferred_width(self, max_available_width: int) -> int | None:
        return None

    def preferred_height(
        self,
        width: int,
        max_available_height: int,
        wrap_lines: bool,
        get_line_prefix: object,
    ) -> int | None:
        # Known before the scroll line below is laid out (create_content comes later).
        self.shown = max(1, min(len(self.rows(width)), self.max_rows(), max_available_height))
        return self.shown

    def create_content(self, width: int, height: int) -> UIContent:
        rows = self.rows(width)
        self.shown = min(height, len(rows))
        self.offset = max(0, min(self.offset, len(rows) - self.shown))

        def get_line(index: int) -> StyleAndTextTuples:
            return self._fragments(rows[self.offset + index])

        return UIContent(get_line=get_line, line_count=self.shown, show_cursor=False)

    def _fragments(self, row: Row) -> StyleAndTextTuples:
        size = self._gutter - 2
        if not size:
            gutter = "  "
        elif row.continued:
            gutter = " " * size + "┆ "
        else:
            gutter = row.label.rjust(size) + "│ "
        style = _GUTTER_STYLE.get(row.label, "class:command.gutter") if size else ""
        out: StyleAndTextTuples = [(style or "class:command.gutter", gutter)]
        out += [(_PIECE_STYLE[piece.kind], piece.text) for piece in row.pieces]
        return out

    def scroll(self, rows: int) -> None:
        """Move the view by ``rows`` (negative: up); clamped at the next render."""
        total = len(self._rows)
        self.offset = max(0, min(self.offset + rows, total - self.shown))

    def position(self) -> tuple[int, int, int, int, int]:
        """``(first, last, total, chars_above, chars_below)`` of the last render: the
        1-based rows in view, all rows, and the command characters out of view."""
        rows = self._rows
        first, last = self.offset, self.offset + self.shown
        above = source_length(p for row in rows[:first] for p in row.pieces)
        below = source_length(p for row in rows[last:] for p in row.pieces)
        return first + 1, last, len(rows), above, below

    def is_focusable(self) -> bool:
        return False


def _command_rows() -> int:
    return max(3, min(COMMAND_ROWS, get_app().output.get_size().rows - _SCREEN_CHROME))


class ConfirmDialog:
    """Approve a tool call (SPEC §11): six choices and one more per rule the ask
    offers (R92, after the six: `confirm_choices`), a reason field for Deny, and a
    password field for a restricted path (R7). The arguments show in a `CommandView`
    (R77); the dialog takes keys only once `arm` was called. ``on_answer`` gets the
    choice, the reason, the password and the kind of the offered rule chosen."""

    def __init__(
        self,
        ask: Ask,
        on_answer: Callable[[ConfirmChoice, str, str | None, str], None],
        on_escape: Callable[[], None] = lambda: None,
    ) -> None:
        self.ask = ask
        self._on_answer = on_answer
        self._on_escape = on_escape
        self.armed = False
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
        self.choices = confirm_choices(ask)
        self.menu = Menu(
            [label for _, label, _ in self.choices],
            self._picked,
            enabled=self._armed,
            on_typed=self._typed,  # issue 34 item 3: typing decides nothing
        )
        self.command = CommandView(
            confirm_lines(ask.tool_args, _change(ask), _interrupted(ask)), _command_rows
        )
        self.container = self._layout()

    def _stop_reason(self) -> None:
        self.asking_reason = False

    def _scroll_keys(self) -> KeyBindings:
        keys = KeyBindings()
        command = self.command

        @keys.add("pagedown")
        def _page_down(event: KeyPressEvent) -> None:
            command.scroll(max(1, command.shown - 1))

        @keys.add("pageup")
        def _page_up(event: KeyPressEvent) -> None:
            command.scroll(-max(1, command.shown - 1))

        @keys.add("home")
        def _top(event: KeyPressEvent) -> None:
            command.scroll(-command.position()[2])

        @keys.add("end")
        def _bottom(event: KeyPressEvent) -> None:
            command.scroll(command.position()[2])

        return keys

    def _layout(self) -> Frame:
        # One wording with the page and the bots (protocol/wording.py, issue 33 item 11).
        plain = confirm_title(self.ask.tool_name)
        title: StyleAndTextTuples = [("class:dialog.title", plain)]
        if self.ask.restricted:
            tail = confirm_title(self.ask.tool_name, restricted=True)[len(plain) :]
            title.append(("class:dialog.warn", f"⚠{tail}"))
        if self.ask.subagent:  # who asks (R80): one label line
            title.append(("class:dialog.title", f"\nfrom {clip(self.ask.subagent, 200)}"))
        more = Window(
            FormattedTextControl(self._scroll_line),
            style="class:command.more",
            wrap_lines=True,
            dont_extend_height=True,
        )
        error = Window(FormattedTextControl(lambda: [("class:error", self.error)]), height=1)
        return Frame(
            HSplit(
                [
                    text_window(title),
                    Window(self.command, style="class:command", dont_extend_height=True),
                    ConditionalContainer(more, filter=Condition(self._overflows)),
                    ConditionalContainer(
                        self.password, filter=Condition(lambda: self.ask.need_password)
                    ),
                    self.menu,
                    ConditionalContainer(
                        HSplit(
                            [self.reason],
                            key_bindings=leave_line_keys(self.menu, self._stop_reason),
                        ),
                        filter=Condition(lambda: self.asking_reason),
                    ),
                    ConditionalContainer(error, filter=Condition(lambda: bool(self.error))),
                    hint_line(self._hint),
                ],
                key_bindings=merge_key_bindings(
                    [
                        ConditionalKeyBindings(self._scroll_keys(), Condition(self._armed)),
                        escape_keys(self._on_escape, self._armed),
                    ]
                ),
            ),
            title="Confirm tool call",
            style="class:dialog",
        )

    def _armed(self) -> bool:
        return self.armed

    def arm(self) -> None:
        """Let the dialog take keys (called by the app once the arming delay passed)."""
        self.armed = True

    def _overflows(self) -> bool:
        first, last, total, _, _ = self.command.position()
        return total > last - first + 1

    def _scroll_line(self) -> StyleAndTextTuples:
        """Which rows are in view and how much of the command is not (never a silent
        cut): ``rows 1–12 of 40 · 2,345 more characters below · PgDn/PgUp scroll``."""
        first, last, total, above, below = self.command.position()
        parts = [f"rows {first}–{last} of {total}"]
        if above:
            parts.append(f"{above:,} more characters above")
        if below:
            parts.append(f"{below:,} more characters below")
        parts.append("PgDn/PgUp/Home/End scroll")
        return [("class:command.more", " " + " · ".join(parts))]

    def _hint(self) -> str:
        in_password = self.ask.need_password and get_app().layout.has_focus(self.password)
        return confirm_hint(
            armed=self.armed,
            entries=len(self.choices),
            asking_reason=self.asking_reason,
            in_password=in_password,
        )

    def focus_target(self) -> AnyContainer:
        return self.password if self.ask.need_password else self.menu

    def _password_entered(self, buffer: Buffer) -> bool:
        focus(self.menu)
        return True

    def _reason_entered(self, buffer: Buffer) -> bool:
        if not self.armed:
            return True
        self._on_answer(ConfirmChoice.DENY, buffer.text.strip(), None, "")
        return True

    def _typed(self, text: str, ended: bool) -> None:
        self.error = typed_note(text, ended=ended)

    def _picked(self, picked: list[int]) -> None:
        if not self.armed:
            return
        choice, _, rule = self.choices[picked[0]]
        if choice is ConfirmChoice.DENY:
            self.asking_reason = True
            focus(self.reason)
            return
        password: str | None = None
        if choice in APPROVING and self.ask.need_password:
            password = self.password.text
            if not password:
                self.error = "enter the system password first"
                focus(self.password)
                return
        self._on_answer(choice, "", password, rule)

    def __pt_container__(self) -> AnyContainer:
        return self.container
