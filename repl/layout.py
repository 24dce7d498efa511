"""The screen, as functions of the state (ptpython's ``layout.py``).

Top to bottom, under the scrollback the transcript is printed into: the live area
(streamed text of a line not finished yet, or a spinner with the time the task has
run), the open popup or dialog, the notice box, the input line (it grows with the
lines typed, up to `INPUT_ROWS`), the history search line (Ctrl+R), a one-line key
hint that any key clears, the ``/`` picker, the toolbar.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from prompt_toolkit.buffer import Buffer
from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document
from prompt_toolkit.filters import Condition, has_completions
from prompt_toolkit.formatted_text import StyleAndTextTuples
from prompt_toolkit.layout import (
    AnyContainer,
    BufferControl,
    ConditionalContainer,
    Dimension,
    DynamicContainer,
    FormattedTextControl,
    HSplit,
    Layout,
    Window,
)
from prompt_toolkit.layout.menus import CompletionsMenu
from prompt_toolkit.layout.processors import BeforeInput
from prompt_toolkit.styles import Style
from prompt_toolkit.widgets import Frame, SearchToolbar

from agentrio.repl.anchor import DialogAnchor
from agentrio.repl.commands import complete_command
from agentrio.repl.render import clip, line_fragments, output_line
from agentrio.repl.state import ReplState
from agentrio.repl.toolbar import make_toolbar, spinner_frame
from agentrio.repl.views import elapsed_text

__all__ = [
    "INPUT_ROWS",
    "PROMPT",
    "STYLE",
    "SlashCompleter",
    "hint_fragments",
    "live_fragments",
    "make_layout",
]

PROMPT = "> "
#: Most rows the input line grows to; a longer text scrolls inside it.
INPUT_ROWS = 10

STYLE = Style.from_dict(
    {
        "user": "bold",
        "dim": "#888888",
        "tool": "#5f87d7",
        "result": "#9e9e9e",
        "ok": "#5faf5f",
        "warn": "#d7af00",
        "error": "#d75f5f bold",
        "leg": "#af87d7",
        "live": "",
        "notice": "#d7af00",
        # Dialogs draw their own background and text colours, so what they show is
        # readable on any terminal theme (the command's contrast is >= 4.5:1, WCAG AA:
        # R77, tests/repl/test_contrast.py computes it from this table). They replace
        # prompt_toolkit's default blue dialog, on which the command was unreadable.
        "dialog": "bg:#262626 #e4e4e4",
        "dialog frame.border": "#8a8a8a",
        "dialog frame.label": "bold #ffffff",
        "dialog.title": "bold #ffffff",
        "dialog.warn": "bold #ffd75f",
        "dialog.hint": "#bcbcbc",
        "dialog error": "bg:#262626 #ff8787 bold",
        "command": "bg:#000000 #ffffff",
        "command.gutter": "bg:#000000 #a8a8a8",
        # A diff's line markers in a file change's confirmation (issue 32).
        "diff.add": "bg:#000000 #5fd75f bold",
        "diff.remove": "bg:#000000 #ff5f5f bold",
        "diff.hunk": "bg:#000000 #5fafff",
        "command.escape": "bg:#ffd75f #000000",
        "command.mark": "bg:#000000 #87d7ff",
        "command.key": "bg:#000000 #d7afff",
        "command.more": "bg:#262626 #ffd75f",
        "menu": "bg:#262626 #e4e4e4",
        "menu.selected": "bg:#e4e4e4 #000000",
        "toolbar": "bg:#303030 #d0d0d0",
        "toolbar.ok": "bg:#303030 #5faf5f",
        "toolbar.warn": "bg:#303030 #d7af00",
        "toolbar.busy": "bg:#303030 #87afd7",
        "prompt": "bold #5f87d7",
        # Where typing goes in a dialog's line (agentrio.repl.anchor: the terminal's
        # own cursor rests at the live area's first cell while a dialog is open).
        "drawn-cursor": "reverse",
    }
)


class SlashCompleter(Completer):
    """The ``/`` command picker: commands matching the first word, with their help."""

    def get_completions(self, document: Document, complete_event: CompleteEvent):  # type: ignore[no-untyped-def]
        text = document.text_before_cursor
        for name, doc in complete_command(text):
            yield Completion(name, start_position=-len(text), display_meta=doc)


def live_fragments(state: ReplState, now: float | None = None) -> StyleAndTextTuples:
    """The unfinished streamed line of each run, or a spinner and the time it has run
    while it works: ``⠴ working… 12s (Esc or Ctrl+C stops)``."""
    now = time.monotonic() if now is None else now
    spin = spinner_frame(now)
    out: StyleAndTextTuples = []
    for run in state.runs.values():
        took = elapsed_text(now - run.started_at)
        if run.partial:
            out.append(("class:live", run.partial + "\n"))
        elif run.cancel_requested:
            out.append(("class:dim", f"{spin} stopping… {took}\n"))
        else:
            out.append(("class:dim", f"{spin} working… {took} (Esc or Ctrl+C stops)\n"))
        if run.live_lines:  # the running command's newest lines (issue 33 item 6)
            out.append(("class:dim", f"  ┊ output so far: {run.live_total} lines\n"))
            shown = [output_line("class:result", "  ┊ " + clip(line)) for line in run.live_lines]
            out += line_fragments(shown)
    if out:
        last = out[-1]
        out[-1] = (last[0], last[1].removesuffix("\n"))
    return out


def hint_fragments(state: ReplState, now: float | None = None) -> StyleAndTextTuples:
    """The one-line key hint (`ReplState.flash`) until it expires."""
    hint = state.hint
    if hint is None or (time.monotonic() if now is None else now) >= hint[1]:
        return []
    return [("class:dim", hint[0])]


def make_layout(
    state: ReplState, buffer: Buffer, dialog: Callable[[], AnyContainer | None]
) -> Layout:
    search = SearchToolbar(ignore_case=True)
    input_window = Window(
        BufferControl(
            buffer,
            input_processors=[BeforeInput(PROMPT, style="class:prompt")],
            search_buffer_control=search.control,
            preview_search=True,
        ),
        height=Dimension(min=1, max=INPUT_ROWS),
        # Lines after the first (and wrapped rows) line up under the text, not the prompt.
        get_line_prefix=lambda line, wrap: "" if line == 0 and wrap == 0 else " " * len(PROMPT),
        wrap_lines=True,
        dont_extend_height=True,
    )
    empty = Window(height=0)
    body = HSplit(
        [
            ConditionalContainer(
                Window(
                    FormattedTextControl(lambda: live_fragments(state)),
                    wrap_lines=True,
                    dont_extend_height=True,
                ),
                filter=Condition(lambda: bool(state.runs)),
            ),
            DynamicContainer(lambda: dialog() or empty),
            ConditionalContainer(
                Frame(
                    Window(
                        FormattedTextControl(lambda: [("class:notice", state.notice or "")]),
                        wrap_lines=True,
                        dont_extend_height=True,
                    ),
                    title="notice (Esc closes)",
                ),
                filter=Condition(lambda: state.notice is not None),
            ),
            input_window,
            search,
            ConditionalContainer(
                Window(FormattedTextControl(lambda: hint_fragments(state)), height=1),
                filter=Condition(lambda: bool(hint_fragments(state))),
            ),
            ConditionalContainer(
                CompletionsMenu(max_height=8, scroll_offset=1), filter=has_completions
            ),
            make_toolbar(state),
        ]
    )
    # While a dialog is open: drawn at the bottom, the cursor on its first row (issue 33 item 7).
    return Layout(DialogAnchor(body, lambda: dialog() is not None), focused_element=input_window)
