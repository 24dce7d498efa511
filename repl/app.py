"""The prompt_toolkit application around a `ReplState` (asyncio side).

`ReplApp` wires the state to the screen: the input line submits to the state, keys call
the state's Esc/Ctrl+C decisions and carry out the two the UI owns (close the picker,
clear the input), and after every change `refresh` swaps the visible dialog to match
the state, prints new transcript lines above the prompt, and redraws. Frames reach it
through `deliver`, which `agentrio.repl.bridge` schedules on the asyncio loop.

Arming (R77). An ask arrives whenever the daemon sends it, often while the person is
typing at the prompt, and a key meant for the prompt must never answer it (an Enter
that ends ``/legs`` approving a command). So a confirmation or question dialog is
drawn at once but takes the keyboard only when *armed*: once it has been on screen for
`ARM_DELAY_S` with no key pressed. Every key pressed before that restarts the wait and
goes where it was going — the input line: typed text stays there, and an Enter submits
the line as the person meant (``/legs⏎`` lists the legs and leaves the dialog open).
Only then does the focus move into the dialog, and the dialog is armed only once it
holds the focus with every key of its form (`agentrio.repl.menus.focus`), so a dialog
drawn armed takes the very next key — so does a form's next question. Popups (Esc's
cancel menu, the leg menu) open on the person's own key and are armed at once.

Esc in an ask's dialog opens the stop popup of its task over it (R47); the dialog is
kept, not rebuilt, so "Keep running" returns to it as it was — its selection, typed
text, focus and arming.

The screen redraws by itself (spinner, elapsed time, a hint that expires) only while
something on it moves: `TICK_S` apart, and not at all when the REPL is idle.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Final

from prompt_toolkit.application import Application
from prompt_toolkit.buffer import Buffer
from prompt_toolkit.formatted_text import FormattedText
from prompt_toolkit.history import History, InMemoryHistory
from prompt_toolkit.layout import AnyContainer, Window
from prompt_toolkit.output import Output
from prompt_toolkit.renderer import print_formatted_text as write_formatted_text
from prompt_toolkit.shortcuts import print_formatted_text

from agentrio.protocol.frames import Ack, Ask
from agentrio.repl.anchor import SafeEraseRenderer
from agentrio.repl.commands import ConfirmChoice
from agentrio.repl.dialogs import ConfirmDialog, PopupDialog, QuestionDialog, focus
from agentrio.repl.key_bindings import load_repl_bindings
from agentrio.repl.layout import STYLE, SlashCompleter, make_layout
from agentrio.repl.messages import Incoming
from agentrio.repl.render import Line, line_fragments
from agentrio.repl.state import ReplState
from agentrio.repl.views import EscAction, Popup

__all__ = ["ARM_DELAY_S", "KEY_TIMEOUT_S", "TICK_S", "Dialog", "ReplApp", "print_lines"]

#: Seconds an ask's dialog must be on screen with no key pressed before it takes keys
#: (see the module docstring). Long enough to notice a dialog that popped up, short
#: enough not to slow down someone who waits for it.
ARM_DELAY_S: Final = 0.4
#: How long a lone Esc waits for a key that would make it Alt+<key> (Esc, Enter is
#: Alt+Enter: a new line). Short enough that Esc still feels immediate.
KEY_TIMEOUT_S: Final = 0.12
#: Redraw period while something on screen moves (the spinner's clock).
TICK_S: Final = 0.25

Dialog = PopupDialog | ConfirmDialog | QuestionDialog


def _fragments(lines: list[Line]) -> FormattedText:
    return FormattedText(line_fragments(lines))


def print_lines(lines: list[Line]) -> None:
    """Print transcript lines (styled) to the current output (no app running)."""
    print_formatted_text(_fragments(lines), style=STYLE, end="")


def write_lines(output: Output, lines: list[Line]) -> None:
    """Write transcript lines straight to ``output`` (the app's area already erased)."""
    write_formatted_text(output, _fragments(lines), STYLE)
    output.flush()


def erase_live_area(app: Application[None]) -> None:
    """Erase what the app drew (prompt, dialog, toolbar) and put the cursor where it
    began, never scrolling the screen into the scrollback (`SafeEraseRenderer`)."""
    app.renderer.erase()


class ReplApp:
    """One REPL window. See the module docstring."""

    def __init__(
        self,
        state: ReplState,
        *,
        history: History | None = None,
        arm_delay_s: float = ARM_DELAY_S,
    ) -> None:
        self.state = state
        self.arm_delay_s = arm_delay_s
        #: Arms the dialog on screen when it fires; every key press restarts it.
        self._arm_timer: asyncio.TimerHandle | None = None
        #: Enter sends; Alt+Enter and Ctrl+J insert new lines (`agentrio.repl.key_bindings`).
        self.buffer = Buffer(
            name="input",
            multiline=False,
            completer=SlashCompleter(),
            complete_while_typing=True,
            history=history or InMemoryHistory(),
            accept_handler=self._accept,
        )
        self.dialog: Dialog | None = None
        self._dialog_key: tuple[str, object] | None = None
        #: The open ask's dialog, kept while a popup covers it, and where its focus was.
        self._ask_dialog_kept: ConfirmDialog | QuestionDialog | None = None
        self._ask_focus: Window | None = None
        self.application: Application[None] = Application(
            layout=make_layout(state, self.buffer, self._dialog_container),
            key_bindings=load_repl_bindings(self),
            style=STYLE,
            full_screen=False,
            mouse_support=False,
            erase_when_done=False,
        )
        self.application.renderer = SafeEraseRenderer.of(self.application)
        # Esc must act at once, not wait half a second for a possible escape sequence,
        # yet Esc then Enter (Alt+Enter) must still arrive as one key.
        self.application.ttimeoutlen = 0.05
        self.application.timeoutlen = KEY_TIMEOUT_S
        self.application.key_processor.before_key_press += self._key_pressed

    # ------------------------------------------------------------ running

    async def run(self) -> None:
        """Run until ``/quit``, Ctrl+D or `exit`; then print what is left to print."""
        ticker = asyncio.ensure_future(self._tick())
        try:
            await self.application.run_async(pre_run=self.refresh)
        finally:
            ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await ticker
            self._stop_arming()
        rest = self.state.output[self.state.flushed :]
        self.state.flushed = len(self.state.output)
        if rest:
            print_lines(rest)

    async def _tick(self) -> None:
        """Redraw every `TICK_S` while something moves (a spinner, a hint until it
        expires); an idle REPL sleeps."""
        while True:
            await asyncio.sleep(TICK_S)
            state = self.state
            if state.hint is not None and time.monotonic() >= state.hint[1]:
                state.hint = None  # drawn once more, without it
            elif not (state.runs or state.legs or state.hint or state.connection != "connected"):
                continue
            if self.application.is_running:
                self.application.invalidate()

    def exit(self) -> None:
        app = self.application
        if app.is_running and app.future is not None and not app.future.done():
            app.exit()

    def deliver(self, message: Incoming) -> None:
        self.state.handle(message)
        self.refresh()

    def refresh(self) -> None:
        """Make the screen match the state after any change."""
        self._sync_dialog()
        if self.state.quit_requested:
            self.exit()
            return
        self._flush()
        self.application.invalidate()

    # ------------------------------------------------------------ keys

    def on_escape(self) -> EscAction:
        action = self.state.esc(
            picker_open=self.buffer.complete_state is not None, input_text=self.buffer.text
        )
        if action is EscAction.CLOSE_PICKER:
            self.buffer.cancel_completion()
        elif action is EscAction.CLEAR_INPUT:
            self.buffer.reset()
        self.refresh()
        return action

    def on_dialog_escape(self) -> None:
        """Esc in a confirmation or question: the stop popup; it answers nothing."""
        self.state.esc_dialog()
        self.refresh()

    def on_ctrl_c(self) -> EscAction:
        action = self.state.ctrl_c(input_text=self.buffer.text)
        if action is EscAction.CLEAR_INPUT:
            self.buffer.reset()
        self.refresh()
        return action

    def quit(self) -> None:
        """Ctrl+D: the quit of ``/quit`` (it says what becomes of running tasks)."""
        self.state.quit()
        self.refresh()

    def _accept(self, buffer: Buffer) -> bool:
        self.state.submit(buffer.text)
        self.refresh()
        return False

    # ------------------------------------------------------------ dialogs

    def _dialog_container(self) -> AnyContainer | None:
        return self.dialog

    def _sync_dialog(self) -> None:
        """Show the popup if there is one, else the oldest open ask, else nothing;
        move the focus into a dialog that just appeared, back to the input after."""
        state = self.state
        ask = state.current_ask()
        key: tuple[str, object] | None
        if state.popup is not None:
            key = ("popup", state.popup)
        elif ask is not None:
            key = ("ask", ask.id)
        else:
            key = None
        if key == self._dialog_key:
            return
        self._dialog_key = key
        kept = self._ask_dialog_kept
        if kept is not None and (ask is None or kept.ask.id != ask.id):
            kept = self._ask_dialog_kept = None
            self._ask_focus = None
        if kept is not None and self.dialog is kept:  # a popup covers it: remember focus
            self._ask_focus = self.application.layout.current_window
        if state.popup is not None:
            self.dialog = self._popup_dialog(state.popup)
        elif ask is not None:
            if kept is None:  # drawn now: tell the daemon it is on screen (issue 34, R97)
                self.state.send(Ack(id=ask.id))
            self.dialog = kept or self._ask_dialog(ask)
            self._ask_dialog_kept = self.dialog
        else:
            self.dialog = None
        self._stop_arming()
        dialog = self.dialog
        if dialog is None or not dialog.armed:
            focus(self.buffer)  # an ask's dialog takes the keyboard once armed (`_arm`)
            if dialog is not None:
                self._start_arming()
            return
        target: AnyContainer = dialog.focus_target()
        if dialog is kept and self._ask_focus is not None:
            target = self._ask_focus
        focus(target)

    def _start_arming(self) -> None:
        """(Re)start the arming delay of the dialog on screen."""
        self._stop_arming()
        loop = asyncio.get_running_loop()
        self._arm_timer = loop.call_later(self.arm_delay_s, self._arm)

    def _stop_arming(self) -> None:
        if self._arm_timer is not None:
            self._arm_timer.cancel()
            self._arm_timer = None

    def _key_pressed(self, _: object) -> None:
        """A key before the dialog is armed went to the input line: wait again. Any key
        also clears the one-line hint under the input."""
        self.state.hint = None
        if self._arm_timer is not None:
            self._start_arming()

    def _arm(self) -> None:
        """No key for the arming delay: the dialog takes the keyboard."""
        self._arm_timer = None
        dialog = self.dialog
        if dialog is None or dialog.armed:
            return
        if not focus(dialog.focus_target()):
            self._start_arming()  # never shown armed while the keys go elsewhere
            return
        dialog.arm()
        self.application.invalidate()

    def _popup_dialog(self, popup: Popup) -> PopupDialog:
        def choose(index: int) -> None:
            self.state.choose(index)
            self.refresh()

        return PopupDialog(popup, choose)

    def _ask_dialog(self, ask: Ask) -> ConfirmDialog | QuestionDialog:
        if ask.kind == "tool_confirm":

            def confirmed(
                choice: ConfirmChoice, reason: str, password: str | None, rule: str
            ) -> None:
                self.state.answer_confirm(
                    ask.id, choice, reason=reason, password=password, rule=rule
                )
                self.refresh()

            return ConfirmDialog(ask, confirmed, self.on_dialog_escape)

        def answered(answers: list[str]) -> None:
            self.state.answer_questions(ask.id, answers)
            self.refresh()

        return QuestionDialog(ask, answered, self.on_dialog_escape)

    # ------------------------------------------------------------ transcript

    def _flush(self) -> None:
        """Print new transcript lines above the prompt, into the terminal's scrollback.

        Done in one synchronous step — erase the live area, write the lines, redraw —
        rather than with ``run_in_terminal``: that switches the terminal to cooked mode
        while it prints, and a key pressed in that moment (an Enter meant for a dialog
        that just appeared) was echoed and lost.
        """
        app = self.application
        if self.state.flushed >= len(self.state.output) or not app.is_running:
            return
        lines = self.state.output[self.state.flushed :]
        self.state.flushed = len(self.state.output)
        erase_live_area(app)
        write_lines(app.output, lines)
        app.renderer.request_absolute_cursor_position()
