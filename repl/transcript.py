"""The transcript: the lines printed above the prompt, and the streams that feed them.

Every printed line belongs to one task, and a task's answer is never cut by another's
lines (issue 19):

- **This window's runs.** Streamed text is printed a whole line at a time, rendered as
  Markdown (`agentrio.repl.markdown`, whose open code fence is the one state kept per run); the
  line not finished yet waits in `RunView.partial`, which the screen shows live under
  the transcript. A tool call, a result or the run's end ends the message: its unfinished
  line is printed then.
- **Notices** — a leg started, reported or finished — are printed at once, above
  (a job's settling prints nothing: its legs' ends were shown, and a follow-up task
  announces itself). They end no one's line: a partial line stays where it is, live, and
  goes on when the next piece of text comes.
- **Tasks this window did not request** (a background job's follow-up, R26; late leg
  events of an ended run): their notices show at once, without a task tag (the leg
  id says what they are about). Their text is held until its message ends and then
  printed as one block under a single ``⧗ follow-up on the background work:`` header,
  so nothing lands inside it; a ``done`` does not repeat text that streamed. The
  header names no task id: the person sees none elsewhere.

`ReplState` owns one `Transcript`; the UI prints ``output`` past ``flushed``.
"""

from __future__ import annotations

from typing import Any, Final

import attrs

from agentrio.protocol.events import (
    Canceled,
    Done,
    Failed,
    JobSettled,
    LegFinished,
    LegReport,
    LegStarted,
    Pending,
    Text,
    ToolOutput,
    ToolResult,
)
from agentrio.repl.markdown import Fence, render_line
from agentrio.repl.render import Line, folded_text, markdown_line, render_event
from agentrio.repl.views import FOREIGN_VIEWS_KEPT, RunView

__all__ = ["FOLLOWUP_HEADER", "NOTICES", "Transcript"]

#: The header over a follow-up task's answer (R26).
FOLLOWUP_HEADER: Final = "⧗ follow-up on the background work:"

#: Events that are notices: printed at once, never ending a task's unfinished line.
NOTICES: Final = (LegStarted, LegReport, LegFinished, JobSettled)
#: Events after which a task shown here without a request of this window is over.
_FINAL: Final = (Done, Failed, Canceled, Pending)


@attrs.define
class _Held:
    """A task this window did not request: its text held until the message ends."""

    text: str = ""
    streamed: bool = False
    introduced: bool = False


class Transcript:
    """See the module docstring."""

    def __init__(self) -> None:
        #: Printed lines; the UI prints those past `flushed` and advances it.
        self.output: list[Line] = []
        self.flushed = 0
        #: The open code fence of each run's streamed text, by request id.
        self._fences: dict[str, Fence] = {}
        self._foreign: dict[str, _Held] = {}
        #: The whole text of the output shown folded last, for ``/expand``.
        self.folded: str | None = None

    def _keep_fold(self, event: Any) -> None:
        text = folded_text(event)
        if text is not None:
            self.folded = text

    def write(self, text: str, style: str = "") -> None:
        for line in text.split("\n"):
            self.output.append((style, line))

    def lines(self, lines: list[Line]) -> None:
        self.output.extend(lines)

    # ------------------------------------------------------------ this window's runs

    def run_event(self, run: RunView, event: Any) -> None:
        """An event of ``run``, a request of this window."""
        if isinstance(event, ToolOutput):  # shown live, never printed (issue 33 item 6)
            run.shown = True
            run.live_lines, run.live_total = list(event.lines), event.total_lines
            return
        if isinstance(event, ToolResult):
            run.live_lines, run.live_total = [], 0
        self._keep_fold(event)
        if isinstance(event, Text):
            run.shown = run.shown or bool(event.text)
            run.streamed = True
            run.partial += event.text
            *complete, run.partial = run.partial.split("\n")
            self._markdown(run.request_id, complete)
            return
        if isinstance(event, NOTICES):
            lines = render_event(event)
            run.shown = run.shown or bool(lines)
            self.lines(lines)
            return
        if isinstance(event, Done):
            if not run.streamed and event.text:
                run.shown = True
                self._markdown(run.request_id, event.text.rstrip("\n").split("\n"))
            elif run.streamed:
                self._split_last_turn(run, event.text.rstrip("\n"))
            return
        lines = render_event(event)
        if lines:
            self.end_message(run)
            run.shown = True
            self.lines(lines)
        if isinstance(event, Canceled | Failed):
            run.end_shown = True

    def _split_last_turn(self, run: RunView, final: str) -> None:
        """No event marks a new model turn, so the text of a turn that a report gave the
        run (R26) streams on after the last line of the turn before. A ``done`` names
        the last turn's text: when the unfinished line ends with it but holds more,
        the part before was the earlier turn's last line — print it on its own."""
        if final and "\n" not in final and run.partial.endswith(final) and run.partial != final:
            self._markdown(run.request_id, [run.partial[: -len(final)]])
            run.partial = final

    def end_message(self, run: RunView) -> None:
        """Print ``run``'s unfinished line, if any: its message ended."""
        if run.partial:
            self._markdown(run.request_id, [run.partial])
            run.partial = ""
        self._fences.pop(run.request_id, None)

    def _markdown(self, key: str, lines: list[str]) -> None:
        fence = self._fences.pop(key, None)
        for line in lines:
            fragments, fence = render_line(line, fence)
            self.output.append(markdown_line(fragments))
        if fence is not None:
            self._fences[key] = fence

    # ------------------------------------------------------------ other tasks

    def foreign_event(self, task_hash: str, event: Any) -> None:
        """An event of a task this window did not request (see the module docstring)."""
        if isinstance(event, ToolOutput):
            return  # live output is for the window that watches the command
        self._keep_fold(event)
        if isinstance(event, NOTICES):
            self.lines(render_event(event))
            return
        held = self._foreign.get(task_hash)
        if held is None:
            if len(self._foreign) >= FOREIGN_VIEWS_KEPT:
                self._foreign.pop(next(iter(self._foreign)))
            held = self._foreign[task_hash] = _Held()
        if isinstance(event, Text):
            held.streamed = True
            held.text += event.text
            return
        if isinstance(event, Done):
            lines = []
            if not held.streamed:
                held.text = event.text
        else:
            lines = render_event(event)
        self._print_held(task_hash, held, more=bool(lines))
        self.lines(lines)
        if isinstance(event, _FINAL):
            self._foreign.pop(task_hash, None)

    def _print_held(self, task_hash: str, held: _Held, *, more: bool) -> None:
        """The held text of a foreign task as one block, under its header (printed
        before its first lines)."""
        text = held.text.rstrip("\n")
        held.text = ""
        if (text or more) and not held.introduced:
            held.introduced = True
            self.output.append(("class:leg", FOLLOWUP_HEADER))
        if text:
            self._markdown(f"task {task_hash}", text.split("\n"))
            self._fences.pop(f"task {task_hash}", None)
