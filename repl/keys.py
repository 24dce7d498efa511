"""What Esc, Ctrl+C, a popup choice and quitting do: the REPL's key decisions (R47).

`KeyChain` belongs to one `agentrio.repl.state.ReplState` (``state.keys``) and decides from its
runs, asks, legs and notice; it imports no prompt_toolkit, so every decision is tested
without a terminal. `agentrio.repl.app.ReplApp` carries out the two the UI owns (close the
picker, clear the input).

- Esc at the prompt runs the chain of R47: close the picker, close the notice, stop
  the task (the popup of `agentrio.repl.views.stop_popup` once it has shown output), clear the
  input, open the background-leg menu; with none of these it says so briefly.
- Esc in (or over) a confirmation or question opens the same stop popup for the task
  that asks: it never answers or approves anything, and the popup's first choice (or
  Esc again) goes back to the dialog untouched.
- Ctrl+C stops the current task at once (``user_canceled``), closes a popup, clears
  the input; with nothing of that to do it asks for a second Ctrl+C within
  `QUIT_WINDOW_S`, which quits.
- Quitting with tasks running says, per task, that it is kept and where to find it
  (R43: closing the window cancels them with cause ``disconnected``, which keeps them).
"""

from __future__ import annotations

import time
from typing import Final, Protocol

from agentrio.protocol.frames import Ask, LegInfo
from agentrio.repl.commands import (
    CancelChoice,
    ConfirmChoice,
    background_cancel_frame,
    cancel_frame,
)
from agentrio.repl.launch import agentrio_command
from agentrio.repl.messages import Outgoing
from agentrio.repl.render import clip
from agentrio.repl.views import EscAction, Popup, RunView, stop_popup

__all__ = ["HINT_S", "NOTHING_TO_STOP", "QUIT_WINDOW_S", "KeyChain", "KeysHost", "quit_line"]

#: A second Ctrl+C within this many seconds of the first quits.
QUIT_WINDOW_S: Final = 2.0
#: How long a one-line key hint stays under the input (any key clears it sooner).
HINT_S: Final = 4.0
NOTHING_TO_STOP: Final = "nothing to stop: no task running, no background legs"
PRESS_AGAIN: Final = "press Ctrl+C again to quit"


def quit_line(task_input: str, session_id: str) -> str:
    """What quitting does to one running task, and where it waits afterwards."""
    return (
        f"‖ {clip(task_input, 60)} — stopped (window closed), kept: it waits in /pending; "
        f"reopen with `{agentrio_command()} --session {session_id}`"
    )


class KeysHost(Protocol):
    """What the key decisions need of the state that owns them (`agentrio.repl.state.ReplState`)."""

    session_id: str
    notice: str | None
    popup: Popup | None
    quit_requested: bool
    runs: dict[str, RunView]
    asks: dict[str, Ask]

    @property
    def legs(self) -> dict[str, LegInfo]: ...

    def current_ask(self) -> Ask | None: ...

    def current_run(self) -> RunView | None: ...

    def run_for_hash(self, task_hash: str) -> RunView | None: ...

    def request_cancel(self, run: RunView, *, pause: bool) -> None: ...

    def send(self, item: Outgoing) -> bool: ...

    def write(self, text: str, style: str = "") -> None: ...

    def flash(self, text: str, until: float) -> None: ...

    def answer_confirm(self, ask_id: str, choice: ConfirmChoice) -> None: ...


class KeyChain:
    """The key decisions of one state. See the module docstring."""

    def __init__(self, state: KeysHost) -> None:
        self.state = state
        #: When the last lone Ctrl+C asked for a second one (monotonic seconds).
        self._ctrl_c_at: float | None = None

    def esc(self, *, picker_open: bool, input_text: str, now: float | None = None) -> EscAction:
        """The Esc chain of R47 from the input line: the first that applies."""
        state = self.state
        if picker_open:
            return EscAction.CLOSE_PICKER
        if state.notice is not None:
            state.notice = None
            return EscAction.CLOSE_NOTICE
        if state.current_ask() is not None:
            return self.esc_dialog(now=now)
        run = state.current_run()
        if run is not None:
            if not run.shown:
                state.request_cancel(run, pause=False)
                return EscAction.CANCEL_NOW
            state.popup = stop_popup(run.input, target=run.request_id)
            return EscAction.CANCEL_POPUP
        if input_text:
            return EscAction.CLEAR_INPUT
        if state.legs:
            self.open_leg_menu()
            return EscAction.LEG_MENU
        state.flash(NOTHING_TO_STOP, _now(now) + HINT_S)
        return EscAction.NOTHING

    def esc_dialog(self, *, now: float | None = None) -> EscAction:
        """Esc in a confirmation or question: the stop popup for the task that asks.
        It never answers: "Keep running" (or Esc) goes back to the dialog."""
        state = self.state
        ask = state.current_ask()
        if ask is None:
            return EscAction.NOTHING
        run = state.run_for_hash(ask.task_hash)
        if run is not None and run.cancel_requested:
            state.flash("this task is already stopping…", _now(now) + HINT_S)
            return EscAction.NOTHING
        if run is not None:
            state.popup = stop_popup(run.input, target=run.request_id)
        else:  # a task this window did not start (a follow-up asks here)
            state.popup = stop_popup(ask.task_hash[:8], task_hash=ask.task_hash)
        return EscAction.CANCEL_POPUP

    def ctrl_c(self, *, input_text: str, now: float | None = None) -> EscAction:
        """Ctrl+C stops the current run at once (``user_canceled``), no popup; else it
        closes a popup, clears the input, or asks for a second Ctrl+C, which quits."""
        state = self.state
        at = _now(now)
        run = state.current_run()
        if run is not None:
            self._ctrl_c_at = None
            state.popup = None
            state.request_cancel(run, pause=False)
            return EscAction.CANCEL_NOW
        if state.popup is not None:
            state.popup = None
            return EscAction.CLOSE_POPUP
        if input_text:
            self._ctrl_c_at = None
            return EscAction.CLEAR_INPUT
        if self._ctrl_c_at is not None and at - self._ctrl_c_at <= QUIT_WINDOW_S:
            self.quit()
            return EscAction.QUIT
        self._ctrl_c_at = at
        state.flash(PRESS_AGAIN, at + QUIT_WINDOW_S)
        return EscAction.NOTHING

    def quit(self) -> None:
        """Leave the REPL (``/quit``, Ctrl+D, a second Ctrl+C), first saying what
        happens to each task still running here."""
        state = self.state
        for run in state.runs.values():
            if not run.cancel_requested:
                state.write(quit_line(run.input, state.session_id), "class:warn")
        state.quit_requested = True

    def open_leg_menu(self) -> None:
        state = self.state
        legs = list(state.legs.values())
        choices = ["No", *(f"{leg.leg_id}  {clip(leg.label, 50)} ({leg.state})" for leg in legs)]
        targets = [leg.leg_id for leg in legs]
        if len(legs) >= 2:
            choices.append(f"All ({len(legs)} legs)")
            targets.append("all")
        state.popup = Popup(
            kind="legs",
            title="Cancel a background task?",
            choices=tuple(choices),
            targets=tuple(targets),
        )

    def choose(self, index: int) -> None:
        """Pick choice ``index`` of the open popup (0 = No, which just closes it)."""
        state = self.state
        popup = state.popup
        if popup is None:
            return
        state.popup = None
        if index <= 0 or index >= len(popup.choices):
            return
        match popup.kind:
            case "cancel":
                self._stop(popup, CancelChoice(popup.choices[index]))
            case "legs":
                target = popup.targets[index - 1]
                if target == "all":
                    title = f"Cancel all {len(popup.targets) - 1} background legs?"
                else:
                    leg = state.legs.get(target)
                    label = f" ({clip(leg.label, 40)})" if leg else ""
                    title = f"Cancel background leg {target}{label}?"
                state.popup = Popup(
                    kind="leg_confirm", title=title, choices=("No", "Yes"), target=target
                )
            case "leg_confirm":
                if state.send(background_cancel_frame(state.session_id, popup.target)):
                    what = "all background legs" if popup.target == "all" else popup.target
                    state.write(f"canceling {what}…", "class:dim")

    def _stop(self, popup: Popup, choice: CancelChoice) -> None:
        """Stop the popup's task: a run of this window, or by hash one it did not start."""
        state = self.state
        pause = choice is CancelChoice.PAUSE
        if popup.target:
            run = state.runs.get(popup.target)
            if run is not None and not run.cancel_requested:
                state.request_cancel(run, pause=pause)
            return
        asking = [ask for ask in state.asks.values() if ask.task_hash == popup.task_hash]
        if asking:
            # A task this window did not start (a follow-up asking here) can only be
            # stopped by its ask's own stop choice: a cancel frame from this connection
            # is refused (R46).
            stop = ConfirmChoice.ABORT_TASK if pause else ConfirmChoice.CANCEL_TASK
            state.answer_confirm(asking[0].id, stop)
            return
        frame = cancel_frame(popup.task_hash, choice)
        if frame is not None and state.send(frame):
            state.write("pausing…" if pause else "canceling…", "class:dim")


def _now(now: float | None) -> float:
    return time.monotonic() if now is None else now
