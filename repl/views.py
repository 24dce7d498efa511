"""The small values the REPL's state hands its screen: a run of this window, a popup,
and what one Esc did (`agentrio.repl.state.ReplState` makes and changes them)."""

from __future__ import annotations

import enum
import time
from typing import Final, Literal

import attrs

from agentrio.repl.commands import CancelChoice
from agentrio.repl.render import clip

__all__ = ["FOREIGN_VIEWS_KEPT", "EscAction", "Popup", "RunView", "elapsed_text", "stop_popup"]


class EscAction(enum.Enum):
    """What one Esc (or Ctrl+C) did; the UI carries out the two it owns."""

    CLOSE_PICKER = "close_picker"  # UI: close the completion menu
    CLOSE_NOTICE = "close_notice"
    CANCEL_NOW = "cancel_now"
    CANCEL_POPUP = "cancel_popup"
    CLEAR_INPUT = "clear_input"  # UI: empty the input buffer
    LEG_MENU = "leg_menu"
    CLOSE_POPUP = "close_popup"  # Ctrl+C: a popup closes as its first choice would
    QUIT = "quit"  # a second Ctrl+C in time
    NOTHING = "nothing"


#: Tasks shown without a request of this window whose streaming state is kept.
FOREIGN_VIEWS_KEPT: Final = 64


@attrs.define
class RunView:
    """One ``run`` or ``pending`` request of this window, from send to ``done``."""

    request_id: str
    input: str
    task_hash: str | None = None
    #: Something of this run reached the screen (text, a tool call…): Esc then asks first.
    shown: bool = False
    #: A cancel was sent or is held; Esc no longer targets this run.
    cancel_requested: bool = False
    #: ``pause`` of a cancel requested before ``accepted`` (R46), sent when it arrives.
    held_cancel: bool | None = None
    #: Streamed text after the last newline, shown live under the transcript.
    partial: str = ""
    streamed: bool = False
    #: The newest lines of the command running now (``tool_output``), shown live
    #: under the spinner, and how many it has printed; emptied by its result.
    live_lines: list[str] = attrs.field(factory=list)
    live_total: int = 0
    #: A ``canceled``/``failed`` event already said how it ended.
    end_shown: bool = False
    started_at: float = attrs.field(factory=time.monotonic)


@attrs.frozen(kw_only=True)
class Popup:
    """A small menu over the input: the cancel popup, the leg menu, or its confirmation.

    Choice 0 is always the harmless one (No); Esc inside a popup picks it.
    """

    kind: Literal["cancel", "legs", "leg_confirm"]
    title: str
    choices: tuple[str, ...]
    #: ``cancel``: the run's request id; ``leg_confirm``: the leg id or ``"all"``.
    target: str = ""
    #: ``legs``: the leg id behind each choice after "No" (and "all" for All).
    targets: tuple[str, ...] = ()
    #: ``cancel`` of a task this window did not start (no ``target``): its hash.
    task_hash: str = ""


def stop_popup(what: str, *, target: str = "", task_hash: str = "") -> Popup:
    """The stop popup of R47 for one task: Keep running / Stop, keep to resume / Stop
    and discard (`agentrio.repl.commands.CancelChoice`, words of `agentrio.protocol.wording`)."""
    return Popup(
        kind="cancel",
        title=f"Stop the running task ({clip(what, 40)})?",
        choices=tuple(c.value for c in CancelChoice),
        target=target,
        task_hash=task_hash,
    )


def elapsed_text(seconds: float) -> str:
    """A running time as the spinner shows it: ``7s``, ``2m 05s``, ``1h 03m``."""
    total = max(0, int(seconds))
    if total < 60:
        return f"{total}s"
    if total < 3600:
        return f"{total // 60}m {total % 60:02d}s"
    return f"{total // 3600}h {total % 3600 // 60:02d}m"
