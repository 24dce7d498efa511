"""Key bindings of the input line (ptpython's ``load_…_bindings(state)``).

Esc runs the chain of R47 when the input line has focus (popups and dialogs bind their
own Esc); Ctrl+C cancels the current task from anywhere; Enter with the ``/`` picker open
takes the highlighted (or first) command; Ctrl+D on an empty line quits.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from prompt_toolkit.filters import Condition, has_completions, has_focus
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent

if TYPE_CHECKING:
    from repl.app import ReplApp

__all__ = ["load_repl_bindings"]


def load_repl_bindings(repl: ReplApp) -> KeyBindings:
    kb = KeyBindings()
    input_focused = has_focus(repl.buffer)
    empty_input = Condition(lambda: not repl.buffer.text)

    @kb.add("escape", eager=True, filter=input_focused)
    def _escape(event: KeyPressEvent) -> None:
        repl.on_escape()

    @kb.add("c-c", eager=True)
    def _interrupt(event: KeyPressEvent) -> None:
        repl.on_ctrl_c()

    @kb.add("c-d", filter=input_focused & empty_input)
    def _quit(event: KeyPressEvent) -> None:
        repl.state.quit_requested = True
        repl.refresh()

    @kb.add("enter", filter=input_focused & has_completions)
    def _pick(event: KeyPressEvent) -> None:
        state = repl.buffer.complete_state
        if state is not None:
            completion = state.current_completion or (
                state.completions[0] if state.completions else None
            )
            if completion is not None:
                repl.buffer.apply_completion(completion)
        repl.buffer.cancel_completion()
        repl.buffer.validate_and_handle()

    return kb
