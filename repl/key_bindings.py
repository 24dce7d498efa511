"""Key bindings of the input line (ptpython's ``load_…_bindings(state)``).

- Enter sends the whole text (with the ``/`` picker open: takes the highlighted, or
  first, command); Alt+Enter (Esc then Enter in a terminal) and Ctrl+J insert a new
  line, so a message may have several lines.
- Esc runs the chain of R47 when the input line has focus (popups and dialogs bind their
  own Esc). It is not eager: Esc is also the first key of Alt+Enter, so a lone Esc acts
  after `agentrio.repl.app.KEY_TIMEOUT_S` without a second key.
- Ctrl+C stops the current task from anywhere, and on an idle empty line asks for a
  second Ctrl+C, which quits; Ctrl+D on an empty line quits. Both quit like ``/quit``.
- Ctrl+R searches the input history backwards (prompt_toolkit's incremental search,
  shown in the search line under the input; Enter takes the match, Esc or Ctrl+C leave).
"""

from __future__ import annotations

from typing import Protocol

from prompt_toolkit.buffer import Buffer
from prompt_toolkit.filters import Condition, has_completions, has_focus, is_searching
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent

__all__ = ["BindingsHost", "load_repl_bindings"]


class BindingsHost(Protocol):
    """What the bindings act on: the input line and the three key decisions
    (`agentrio.repl.app.ReplApp`; a Protocol, so this module does not import the app that
    imports it)."""

    buffer: Buffer

    def on_escape(self) -> object: ...

    def on_ctrl_c(self) -> object: ...

    def quit(self) -> None: ...


def load_repl_bindings(repl: BindingsHost) -> KeyBindings:
    kb = KeyBindings()
    input_focused = has_focus(repl.buffer)
    empty_input = Condition(lambda: not repl.buffer.text)

    @kb.add("escape", filter=input_focused)
    def _escape(event: KeyPressEvent) -> None:
        repl.on_escape()

    @kb.add("escape", "enter", filter=input_focused)
    @kb.add("escape", "c-j", filter=input_focused)  # terminals whose Alt+Enter sends \n
    @kb.add("c-j", filter=input_focused)
    def _newline(event: KeyPressEvent) -> None:
        repl.buffer.cancel_completion()
        repl.buffer.insert_text("\n")

    @kb.add("c-c", eager=True, filter=~is_searching)
    def _interrupt(event: KeyPressEvent) -> None:
        repl.on_ctrl_c()

    @kb.add("c-d", filter=input_focused & empty_input)
    def _quit(event: KeyPressEvent) -> None:
        repl.quit()

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
