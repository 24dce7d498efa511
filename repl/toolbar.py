"""The bottom toolbar: session, model, connection, running tasks, legs, questions.

`toolbar_fragments` is a pure function of the state and a clock, so what the toolbar
says is tested without drawing it; `make_toolbar` wraps it as ptpython does, a
`ConditionalContainer` around a `FormattedTextControl(callable)`.
"""

from __future__ import annotations

import os
import time
from typing import Final

from prompt_toolkit.filters import Condition
from prompt_toolkit.formatted_text import StyleAndTextTuples
from prompt_toolkit.layout import ConditionalContainer, FormattedTextControl, Window

from agentrio.protocol.wording import plural
from agentrio.repl.state import ReplState
from agentrio.repl.usage import reported, toolbar_usage

__all__ = ["SPINNER", "make_toolbar", "shown_workdir", "spinner_frame", "toolbar_fragments"]

SPINNER: Final = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
#: The most characters of the session's directory the toolbar shows.
WORKDIR_WIDTH: Final = 48


def spinner_frame(now: float) -> str:
    return SPINNER[int(now * 8) % len(SPINNER)]


def toolbar_fragments(state: ReplState, now: float | None = None) -> StyleAndTextTuples:
    now = time.monotonic() if now is None else now
    spin = spinner_frame(now)
    connection = {
        "connected": ("class:toolbar.ok", "● connected"),
        "connecting": ("class:toolbar.warn", "○ connecting"),
        "reconnecting": ("class:toolbar.warn", f"{spin} reconnecting"),
        "no daemon": ("class:toolbar.warn", "✕ no daemon (see above)"),
    }[state.connection]
    sep = ("class:toolbar", " │ ")
    parts: StyleAndTextTuples = [
        ("class:toolbar", f" {state.session_id}"),
        sep,
        ("class:toolbar", state.model or "model ?"),
        sep,
        connection,
    ]
    if reported(state.usage.session):  # a model reporting no tokens shows none
        parts += [sep, ("class:toolbar", toolbar_usage(state.usage.session))]
    if state.workdir:
        parts += [sep, ("class:toolbar", shown_workdir(state.workdir))]
    runs = len(state.runs)
    if runs:
        parts += [sep, ("class:toolbar.busy", f"{spin} {runs} running")]
    if state.legs:
        queued = sum(1 for leg in state.legs.values() if leg.state == "queued")
        extra = f" ({queued} queued)" if queued else ""
        parts += [sep, ("class:toolbar.busy", f"{spin} legs {len(state.legs)}{extra}")]
    if state.asks:
        parts += [sep, ("class:toolbar.warn", f"? {plural(len(state.asks), 'question')}")]
    if state.pending_tasks:
        parts += [sep, ("class:toolbar", f"{len(state.pending_tasks)} pending")]
    parts.append(("class:toolbar", " "))
    return parts


def shown_workdir(path: str, home: str | None = None, width: int = WORKDIR_WIDTH) -> str:
    """The session's directory as the toolbar shows it: ``~`` for the home, and past
    ``width`` characters its end (the part that tells directories apart)."""
    home = os.path.expanduser("~") if home is None else home
    if home not in ("", "/") and (path == home or path.startswith(home + "/")):
        path = "~" + path[len(home) :]
    return path if len(path) <= width else "…" + path[-(width - 1) :]


def make_toolbar(state: ReplState) -> ConditionalContainer:
    control = FormattedTextControl(lambda: toolbar_fragments(state))
    return ConditionalContainer(
        Window(control, height=1, style="class:toolbar"), filter=Condition(lambda: True)
    )
