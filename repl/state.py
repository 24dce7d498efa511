"""The REPL's state: a plain object the UI reads and the two halves feed.

`ReplState` owns everything a screen is drawn from (transcript lines, runs, open asks,
legs, popup, notice, connection) and every decision: what Esc, Ctrl+C and quitting do
(R47, made by its `agentrio.repl.keys.KeyChain`), when a cancel is held (R46), which frame a
choice sends. It imports no prompt_toolkit and does no I/O: outgoing frames go to the
``send`` callable it was given, so tests hand it a list's ``append`` and assert the
exact frames.

It is driven from one thread (the asyncio side of `agentrio.repl.bridge`); nothing here locks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import attrs

from agentrio.protocol.events import Done, LegFinished, LegStarted, Workdir
from agentrio.protocol.frames import (
    KEPT_STATUSES,
    Accepted,
    AllowedList,
    Ask,
    Compact,
    CompactedSession,
    DoneFrame,
    ErrorFrame,
    EventFrame,
    LegInfo,
    LegList,
    ListLegs,
    ListMcp,
    McpList,
    ModelInfo,
    OpenWindow,
    PendingFrame,
    PendingList,
    PendingTaskInfo,
    Run,
    SetModel,
    Steer,
    Verify,
    Welcome,
    Withdrawn,
)
from agentrio.protocol.wording import compacted_line, plural, stop_receipt_line
from agentrio.repl.commands import (
    AllowedCmd,
    CancelChoice,
    CompactCmd,
    ConfirmChoice,
    DropPending,
    Empty,
    Expand,
    ForgetAllowedCmd,
    Help,
    History,
    HistoryRecordCmd,
    Input,
    Legs,
    ListPendingCmd,
    McpCmd,
    ModelCmd,
    NewSession,
    Quit,
    ResumePending,
    SessionInfo,
    Unknown,
    UsageCmd,
    cancel_frame,
    confirm_choices,
    confirm_reply,
    help_text,
    new_request_id,
    new_session_id,
    parse_line,
    question_reply,
    verbs_text,
)
from agentrio.repl.keys import KeyChain
from agentrio.repl.lists import SessionLists
from agentrio.repl.messages import (
    Connected,
    Disconnected,
    HttpResult,
    Incoming,
    Outgoing,
    Status,
)
from agentrio.repl.parts_view import mcp_lines
from agentrio.repl.recent import recent_call
from agentrio.repl.render import Line, clip, render_done_status, unfold
from agentrio.repl.transcript import Transcript
from agentrio.repl.usage import UsageBook
from agentrio.repl.views import EscAction, Popup, RunView

__all__ = ["ReplState"]

#: ``no daemon``: none answered and starting one failed (the reason is printed above;
#: the REPL keeps trying), so the toolbar does not say "connecting" forever (issue 30).
ConnectionState = Literal["connecting", "connected", "reconnecting", "no daemon"]


class ReplState:
    """Everything the REPL shows and decides. See the module docstring."""

    def __init__(
        self,
        *,
        session_id: str,
        window_hash: str,
        send: Callable[[Outgoing], None],
        model: str = "",
        home: str = "",
        workdir: str = "",
        reopened: bool = False,
    ) -> None:
        self.session_id = session_id
        #: Opened on an existing session (``--session``): its last exchanges are
        #: printed once connected (`agentrio.repl.recent`).
        self.reopened = reopened
        #: Where the session's commands run (R86): the REPL's own directory, sent as
        #: every task's ``cwd``, moved by the session's ``workdir`` events (a ``cd``);
        #: the toolbar shows it. Empty: none sent (the session's own stays).
        self.workdir = self.own_workdir = workdir
        self.window_hash = window_hash
        self.model = model
        self.home = home
        self._send = send
        self.connection: ConnectionState = "connecting"
        self.url = ""
        self.daemon_version = ""
        #: What is printed above the prompt (`agentrio.repl.transcript`).
        self.transcript = Transcript()
        self.notice: str | None = None
        self.popup: Popup | None = None
        self.runs: dict[str, RunView] = {}
        self._by_hash: dict[str, str] = {}
        #: Open asks in arrival order; the first is shown, the rest wait (toolbar count).
        self.asks: dict[str, Ask] = {}
        #: The session's pending tasks, legs and remembered commands (`agentrio.repl.lists`).
        self.lists = SessionLists(self)
        #: The session's token usage from ``done`` events (status bar, ``/usage``).
        self.usage = UsageBook()
        self.quit_requested = False
        self._cut_runs = 0
        #: A one-line key hint under the input and when it expires (`flash`).
        self.hint: tuple[str, float] | None = None
        self.keys = KeyChain(self)

    # ------------------------------------------------------------ output

    @property
    def output(self) -> list[Line]:
        """Transcript lines; the UI prints those past `flushed` and advances it."""
        return self.transcript.output

    @property
    def flushed(self) -> int:
        return self.transcript.flushed

    @flushed.setter
    def flushed(self, value: int) -> None:
        self.transcript.flushed = value

    def write(self, text: str, style: str = "") -> None:
        self.transcript.write(text, style)

    def _lines(self, lines: list[Line]) -> None:
        self.transcript.lines(lines)

    def set_notice(self, text: str) -> None:
        self.notice = text

    def send(self, item: Outgoing) -> bool:
        """Send ``item`` if connected; otherwise say it was not sent (never queue it:
        a frame for an old connection would reach a daemon that knows nothing of it)."""
        if self.connection != "connected":
            self.set_notice("not connected to the daemon: not sent (it reconnects by itself)")
            return False
        self._send(item)
        return True

    # ------------------------------------------------------------ queries

    @property
    def legs(self) -> dict[str, LegInfo]:
        return self.lists.legs

    @property
    def pending_tasks(self) -> list[PendingTaskInfo]:
        return self.lists.pending_tasks

    @property
    def active_runs(self) -> list[RunView]:
        return list(self.runs.values())

    def current_run(self) -> RunView | None:
        """The newest run Esc/Ctrl+C would cancel: one with no cancel requested yet."""
        for run in reversed(self.runs.values()):
            if not run.cancel_requested:
                return run
        return None

    def current_ask(self) -> Ask | None:
        return next(iter(self.asks.values()), None)

    def run_for_hash(self, task_hash: str) -> RunView | None:
        request_id = self._by_hash.get(task_hash)
        return self.runs.get(request_id) if request_id else None

    # ------------------------------------------------------------ input

    def submit(self, line: str) -> None:
        """Act on one submitted line (sets `quit_requested` for ``/quit``)."""
        command = parse_line(line)
        if not isinstance(command, Empty | Input):  # echoed like a message is
            self.write(f"> {line.strip()}", "class:user")
        match command:
            case Empty():
                return
            case Input(text=text):
                self._submit_input(text)
            case ListPendingCmd():
                self.lists.ask_pending()
            case ResumePending(ref=ref):
                self._resume(ref)
            case DropPending(ref=ref):
                self.lists.drop_pending(ref)
            case Legs():
                self.lists.ask_legs()
            case AllowedCmd():
                self.lists.ask_allowed()
            case ForgetAllowedCmd(ref=ref):
                self.lists.forget_allowed(ref)
            case History(keyword=keyword):
                self.lists.ask_history(keyword)
            case ModelCmd(name=name):
                self.send(SetModel(session_id=self.session_id, name=name))
            case HistoryRecordCmd(ref=ref):
                self.lists.ask_record(ref)
            case Expand():
                folded = self.transcript.folded
                if folded is None:
                    self.set_notice("nothing folded yet: long output shows its first lines")
                else:
                    self._lines(unfold(folded))
            case McpCmd():
                self.send(ListMcp())
            case CompactCmd():
                self.send(Compact(session_id=self.session_id))
            case UsageCmd():
                for text, style in self.usage.report():
                    self.write(text, style)
            case SessionInfo():
                self.write(
                    f"session {self.session_id} · window {self.window_hash} · "
                    f"model {self.model or '?'} · daemon {self.url or '-'} "
                    f"v{self.daemon_version or '?'} ({self.connection})",
                    "class:dim",
                )
            case NewSession():
                self.session_id = new_session_id()
                self.workdir = self.own_workdir  # a new session starts where the REPL is
                self.lists.clear()
                self.usage.clear()
                self.write(f"new session {self.session_id}", "class:dim")
                self.send(ListLegs(session_id=self.session_id))
            case Help():
                self.write(help_text(), "class:dim")
                if self.model.partition(":")[0] in ("builtin", ""):
                    self.write(verbs_text(), "class:dim")
            case Quit():
                self.quit()
            case Unknown(message=message):
                self.set_notice(message)

    def _submit_input(self, text: str) -> None:
        run = self.current_run()
        if run is not None and run.task_hash is not None:
            frame = Steer(session_id=self.session_id, task_hash=run.task_hash, input=text)
            if self.send(frame):
                self.write("↪ " + text.replace("\n", "\n  "), "class:user")
            return
        request_id = new_request_id()
        frame_run = Run(
            request_id=request_id,
            session_id=self.session_id,
            input=text,
            window_hash=self.window_hash,
            cwd=self.workdir,
        )
        if self.send(frame_run):  # further lines of a message line up under its first
            self.write("> " + text.replace("\n", "\n  "), "class:user")
            self.runs[request_id] = RunView(request_id=request_id, input=text)

    def _resume(self, ref: str) -> None:
        task = self.lists.find_pending(ref)
        if task is None:
            return
        session_id = task.session_id or self.session_id
        if session_id != self.session_id and not self._switch_session(session_id):
            return
        request_id = new_request_id()
        frame = PendingFrame(
            request_id=request_id,
            session_id=session_id,
            task_hash=task.task_hash,
            window_hash=self.window_hash,
        )
        if self.send(frame):
            self.write(f"↻ resuming {task.task_hash[:8]}: {clip(task.objective, 80)}", "class:user")
            self.runs[request_id] = RunView(request_id=request_id, input=task.objective)
            self.lists.forget_pending(task)

    def _switch_session(self, session_id: str) -> bool:
        """Continue in ``session_id``, the session of a task being resumed: what is typed
        next, its legs and remembered commands belong to it. Refused while a run of
        this session is shown (its steers and cancels name this session)."""
        if self.runs:
            self.set_notice(
                "a task is running here: wait for it (or cancel it) before resuming "
                "a task of another session"
            )
            return False
        self.session_id = session_id
        self.legs.clear()
        self.lists.allowed_rules = []
        self.write(f"continuing in session {session_id}", "class:dim")
        self.send(ListLegs(session_id=session_id))
        return True

    # ------------------------------------------------------------ Esc, Ctrl+C, popups

    # The decisions live in `agentrio.repl.keys.KeyChain` (``self.keys``); these name them.

    def esc(self, *, picker_open: bool, input_text: str, now: float | None = None) -> EscAction:
        """The Esc chain of R47 at the input line (`agentrio.repl.keys.KeyChain.esc`)."""
        return self.keys.esc(picker_open=picker_open, input_text=input_text, now=now)

    def esc_dialog(self, *, now: float | None = None) -> EscAction:
        """Esc in a confirmation or question: the stop popup, never an answer."""
        return self.keys.esc_dialog(now=now)

    def ctrl_c(self, *, input_text: str, now: float | None = None) -> EscAction:
        """Ctrl+C: stop the task at once, or close, clear, or quit on a second press."""
        return self.keys.ctrl_c(input_text=input_text, now=now)

    def quit(self) -> None:
        """Leave, saying what happens to each task still running here."""
        self.keys.quit()

    def open_leg_menu(self) -> None:
        self.keys.open_leg_menu()

    def choose(self, index: int) -> None:
        """Pick choice ``index`` of the open popup (0 = the harmless one)."""
        self.keys.choose(index)

    def flash(self, text: str, until: float) -> None:
        """Show ``text`` dim under the input until ``until`` (monotonic) or a key."""
        self.hint = (text, until)

    def request_cancel(self, run: RunView, *, pause: bool) -> None:
        """Cancel (or pause) ``run``; before its task hash is known the cancel is held
        and sent when ``accepted`` arrives (R46)."""
        run.cancel_requested = True
        verb = "pausing" if pause else "canceling"
        if run.task_hash is None:
            run.held_cancel = pause
            self.write(f"{verb} (sent as soon as the task starts)…", "class:dim")
            return
        choice = CancelChoice.PAUSE if pause else CancelChoice.YES
        frame = cancel_frame(run.task_hash, choice)
        assert frame is not None
        if self.send(frame):
            self.write(f"{verb}…", "class:dim")

    # ------------------------------------------------------------ answers

    def answer_confirm(
        self,
        ask_id: str,
        choice: ConfirmChoice,
        *,
        reason: str = "",
        password: str | None = None,
        rule: str = "",
    ) -> None:
        """Send the reply for ``choice`` (``rule``: the kind of the offered rule chosen,
        with `ConfirmChoice.RULE`) and say in the transcript what was chosen."""
        ask = self.asks.pop(ask_id, None)
        if ask is None:
            return
        self.send(confirm_reply(ask_id, choice, reason=reason, password=password, rule=rule))
        label = next(
            (text for c, text, kind in confirm_choices(ask) if c is choice and kind == rule),
            choice.value,
        )
        tail = f": {clip(reason, 80)}" if choice is ConfirmChoice.DENY and reason else ""
        self.write(f"  → {clip(label, 200)}{tail} ({ask.tool_name}{_asker(ask)})", "class:dim")

    def answer_questions(self, ask_id: str, answers: list[str]) -> None:
        ask = self.asks.pop(ask_id, None)
        if ask is None:
            return
        self.send(question_reply(ask_id, answers))
        for question, answer in zip(ask.questions, answers, strict=False):
            shown = "••••" if question.secret or ask.kind == "secret" else clip(answer, 80)
            asker = f" ({_asker(ask)[2:]})" if ask.subagent else ""
            self.write(f"  → {clip(question.text, 60)}: {shown}{asker}", "class:dim")

    # ------------------------------------------------------------ from the Trio side

    def handle(self, message: Incoming) -> None:
        """Apply one message from the Trio side (a frame or a connection change)."""
        match message:
            case Connected():
                self._connected(message)
            case Disconnected(reason=reason):
                self._disconnected(reason)
            case Status(text=text, error=error):
                self.write(text, "class:error" if error else "class:dim")
                if error and self.connection == "connecting":
                    self.connection = "no daemon"
            case HttpResult():
                self.lists.http_result(message)
            case Welcome():
                return
            case Accepted():
                self._accepted(message)
            case EventFrame():
                self._event(message)
            case Ask():
                self.asks[message.id] = message
            case Withdrawn(id=ask_id, reason=reason):
                if self.asks.pop(ask_id, None) is not None:
                    self.write(f"  question withdrawn: {reason}", "class:dim")
            case Verify(ok=ok, error=error):
                if ok:
                    self.write("  ✓ password accepted", "class:ok")
                else:
                    text = f"password check failed: {error or 'wrong password'} — call denied"
                    self.write(f"  ✗ {text}", "class:error")
                    self.set_notice(text)
            case DoneFrame():
                self._done(message)
            case ErrorFrame(code=code, message=text, ref=ref):
                self.set_notice(f"daemon error ({code}): {text}")
                if ref in self.runs:  # a refused run/pending: no done will come (§8)
                    self._done(DoneFrame(request_id=ref, task_hash="", status="failed", error=text))
            case PendingList():
                self.lists.pending_list(message)
            case LegList():
                self.lists.leg_list(message)
            case McpList(servers=servers):
                self.write("MCP servers:", "class:dim")
                for line in mcp_lines([attrs.asdict(server) for server in servers]):
                    self.write(f"  {line}", "class:dim")
            case AllowedList():
                self.lists.allowed_list(message)
            case ModelInfo():
                self._model_info(message)
            case CompactedSession(session_id=session_id, summarised=summarised):
                if session_id == self.session_id:
                    self.write(compacted_line(summarised, 0), "class:dim")

    def _model_info(self, frame: ModelInfo) -> None:
        """The answer to ``/model``: the toolbar names the chosen model, the transcript
        lists the choices, the chosen one marked."""
        if frame.session_id != self.session_id:
            return
        self.model = frame.model if frame.name == "default" else f"{frame.name}: {frame.model}"
        lines = [f"model {self.model} for this session's next tasks; the choices:"]
        for choice in frame.choices:
            mark = "●" if choice.name == frame.name else " "
            lines.append(f"  {mark} {choice.name}  {choice.model}")
        if len(frame.choices) == 1:
            lines.append("  (add [models.NAME] tables to config.toml for more)")
        self.write("\n".join(lines), "class:dim")

    def _connected(self, message: Connected) -> None:
        self.connection = "connected"
        self.url = message.url
        self.daemon_version = message.daemon_version
        if message.reconnect:
            tail = (
                " — the tasks cut off were cancelled (disconnected) and kept: see /pending"
                if self._cut_runs
                else ""
            )
            self._cut_runs = 0
            self.write(f"reconnected to the daemon at {message.url}{tail}", "class:warn")
        else:
            self.write(
                f"connected to agentrio daemon {message.daemon_version} at {message.url} · "
                f"session {self.session_id} · /help for commands",
                "class:dim",
            )
        # Legs a closed REPL left in this session end in this window (`agentrio --session`).
        self._send(OpenWindow(session_id=self.session_id, window_hash=self.window_hash))
        if self.reopened and not message.reconnect:  # where its conversation stood
            self._send(recent_call(self.session_id))
        self._send(ListLegs(session_id=self.session_id))
        # Across this origin's sessions: a reopened REPL is a new session (issue 17).
        lists = self.lists
        self._send(lists.pending_query() if message.reconnect else lists.announce_pending())

    def _disconnected(self, reason: str) -> None:
        was = self.connection
        self.connection = "reconnecting"
        if was != "connected":
            return
        for run in self.runs.values():
            self.transcript.end_message(run)
        cut = len(self.runs)
        self._cut_runs += cut
        tail = f"; {plural(cut, 'running task')} kept in /pending" if cut else ""
        self.write(f"lost the daemon connection ({reason}){tail} — reconnecting…", "class:error")
        self.runs.clear()
        self._by_hash.clear()
        self.asks.clear()
        self.legs.clear()
        self.popup = None

    def _accepted(self, frame: Accepted) -> None:
        run = self.runs.get(frame.request_id)
        if run is None:
            return
        run.task_hash = frame.task_hash
        self._by_hash[frame.task_hash] = frame.request_id
        if run.held_cancel is not None:
            pause, run.held_cancel = run.held_cancel, None
            frame_cancel = cancel_frame(
                frame.task_hash, CancelChoice.PAUSE if pause else CancelChoice.YES
            )
            assert frame_cancel is not None
            self.send(frame_cancel)

    def _event(self, frame: EventFrame) -> None:
        event = frame.event
        run = self.run_for_hash(frame.task_hash)
        match event:
            case LegStarted():
                self.legs[event.leg_id] = LegInfo(
                    leg_id=event.leg_id,
                    job_id=event.job_id,
                    task_hash=frame.task_hash,
                    label=event.label,
                    state="queued" if event.queued else "running",
                    started_at=event.at,
                )
            case LegFinished():
                self.legs.pop(event.leg_id, None)
            case Done():
                self.usage.record(frame.task_hash, event)
            case Workdir() if frame.session_id == self.session_id:
                self.workdir = event.path
        if run is None:
            self.transcript.foreign_event(frame.task_hash, event)
        else:
            self.transcript.run_event(run, event)

    def _done(self, frame: DoneFrame) -> None:
        run = self.runs.pop(frame.request_id, None)
        if run is None:
            return
        self._by_hash.pop(frame.task_hash, None)
        if run.task_hash is not None:
            self._by_hash.pop(run.task_hash, None)
        self.transcript.end_message(run)
        if not run.end_shown:
            self._lines(render_done_status(frame.status, frame.error))
        if frame.stopped is not None:  # what the stop ended (issue 34)
            self._lines([("class:dim", stop_receipt_line(frame.stopped))])
        if self.popup is not None and self.popup.kind == "cancel":
            if self.popup.target == frame.request_id:
                self.popup = None
        for ask_id in [i for i, a in self.asks.items() if a.task_hash == run.task_hash]:
            del self.asks[ask_id]
        self.send(ListLegs(session_id=self.session_id))
        if frame.status in KEPT_STATUSES or frame.status == "failed":  # failed: maybe kept
            self.send(self.lists.pending_query())


def _asker(ask: Ask) -> str:
    """``, sub-agent 1/2: <objective>`` when a sub-agent asks (R80), else empty: which
    of the task's sub-agents the answer went to."""
    return f", {clip(ask.subagent, 80)}" if ask.subagent else ""
