"""The REPL's state: a plain object the UI reads and the two halves feed.

`ReplState` owns everything a screen is drawn from (transcript lines, runs, open asks,
legs, popup, notice, connection) and every decision: what Esc does (R47), when a cancel
is held (R46), which frame a choice sends. It imports no prompt_toolkit and does no
I/O: outgoing frames go to the ``send`` callable it was given, so tests hand it a list's
``append`` and assert the exact frames.

It is driven from one thread (the asyncio side of `repl.bridge`); nothing here locks.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable
from typing import Any, Final, Literal

import attrs

from protocol.codec import structure
from protocol.errors import FrameDecodeError
from protocol.events import (
    Canceled,
    Done,
    Failed,
    LegFinished,
    LegStarted,
    Pending,
    Text,
)
from protocol.frames import (
    Accepted,
    AllowedList,
    AllowedRule,
    Ask,
    DoneFrame,
    ErrorFrame,
    EventFrame,
    ForgetAllowed,
    LegInfo,
    LegList,
    ListAllowed,
    ListLegs,
    ListPending,
    PendingFrame,
    PendingList,
    PendingTaskInfo,
    Run,
    Steer,
    Verify,
    Welcome,
    Withdrawn,
)
from protocol.http import ErrorBody, HistoryList
from repl.commands import (
    AllowedCmd,
    CancelChoice,
    ConfirmChoice,
    DropPending,
    Empty,
    ForgetAllowedCmd,
    Help,
    History,
    Input,
    Legs,
    ListPendingCmd,
    NewSession,
    Quit,
    ResumePending,
    SessionInfo,
    Unknown,
    background_cancel_frame,
    cancel_frame,
    confirm_reply,
    help_text,
    new_request_id,
    new_session_id,
    parse_line,
    question_reply,
)
from repl.faithful import line_pieces
from repl.messages import (
    Connected,
    Disconnected,
    HttpCall,
    HttpResult,
    Incoming,
    Outgoing,
    Status,
)
from repl.render import Line, clip, render_done_status, render_event

__all__ = ["EscAction", "Popup", "ReplState", "RunView"]

ConnectionState = Literal["connecting", "connected", "reconnecting"]


class EscAction(enum.Enum):
    """What one Esc (or Ctrl+C) did; the UI carries out the two it owns."""

    CLOSE_PICKER = "close_picker"  # UI: close the completion menu
    CLOSE_NOTICE = "close_notice"
    CANCEL_NOW = "cancel_now"
    CANCEL_POPUP = "cancel_popup"
    CLEAR_INPUT = "clear_input"  # UI: empty the input buffer
    LEG_MENU = "leg_menu"
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
    ) -> None:
        self.session_id = session_id
        self.window_hash = window_hash
        self.model = model
        self.home = home
        self._send = send
        self.connection: ConnectionState = "connecting"
        self.url = ""
        self.daemon_version = ""
        #: Transcript lines; the UI prints those past `flushed` and advances it.
        self.output: list[Line] = []
        self.flushed = 0
        self.notice: str | None = None
        self.popup: Popup | None = None
        self.runs: dict[str, RunView] = {}
        self._by_hash: dict[str, str] = {}
        #: Streaming state of tasks shown here that this window did not request.
        self._foreign: dict[str, RunView] = {}
        #: Open asks in arrival order; the first is shown, the rest wait (toolbar count).
        self.asks: dict[str, Ask] = {}
        self.legs: dict[str, LegInfo] = {}
        #: The last ``pending_list`` of this session; ``/pending N`` indexes it.
        self.pending_tasks: list[PendingTaskInfo] = []
        self._show_pending = False
        self._show_legs = False
        #: The last ``allowed`` list of this session; ``/allowed forget N`` indexes it.
        self.allowed_rules: list[AllowedRule] = []
        self._show_allowed = False
        self.quit_requested = False
        self._cut_runs = 0

    # ------------------------------------------------------------ output

    def write(self, text: str, style: str = "") -> None:
        for line in text.split("\n"):
            self.output.append((style, line))

    def _lines(self, lines: list[Line]) -> None:
        self.output.extend(lines)

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
        match command:
            case Empty():
                return
            case Input(text=text):
                self._submit_input(text)
            case ListPendingCmd():
                self._show_pending = self.send(ListPending(session_id=self.session_id))
            case ResumePending(ref=ref):
                self._resume(ref)
            case DropPending(ref=ref):
                self._drop(ref)
            case Legs():
                self._show_legs = self.send(ListLegs(session_id=self.session_id))
            case AllowedCmd():
                self._show_allowed = self.send(ListAllowed(session_id=self.session_id))
            case ForgetAllowedCmd(ref=ref):
                self._forget_allowed(ref)
            case History(keyword=keyword):
                params = {"limit": "20"}
                if keyword:
                    params["keyword"] = keyword
                self.send(
                    HttpCall(
                        method="GET",
                        path=f"/v1/session/{self.session_id}/task/history",
                        params=params,
                        purpose="history",
                        ref=keyword,
                    )
                )
            case SessionInfo():
                self.write(
                    f"session {self.session_id} · window {self.window_hash} · "
                    f"model {self.model or '?'} · daemon {self.url or '-'} "
                    f"v{self.daemon_version or '?'} ({self.connection})",
                    "class:dim",
                )
            case NewSession():
                self.session_id = new_session_id()
                self.legs.clear()
                self.pending_tasks = []
                self.write(f"new session {self.session_id}", "class:dim")
                self.send(ListLegs(session_id=self.session_id))
            case Help():
                self.write(help_text(), "class:dim")
            case Quit():
                self.quit_requested = True
            case Unknown(message=message):
                self.set_notice(message)

    def _submit_input(self, text: str) -> None:
        run = self.current_run()
        if run is not None and run.task_hash is not None:
            frame = Steer(session_id=self.session_id, task_hash=run.task_hash, input=text)
            if self.send(frame):
                self.write(f"↪ {text}", "class:user")
            return
        request_id = new_request_id()
        frame_run = Run(
            request_id=request_id,
            session_id=self.session_id,
            input=text,
            window_hash=self.window_hash,
        )
        if self.send(frame_run):
            self.write(f"> {text}", "class:user")
            self.runs[request_id] = RunView(request_id=request_id, input=text)

    def _find_pending(self, ref: str) -> PendingTaskInfo | None:
        if not self.pending_tasks:
            self.set_notice("no pending tasks listed: type /pending first")
            return None
        if ref.isdigit():
            index = int(ref) - 1
            if 0 <= index < len(self.pending_tasks):
                return self.pending_tasks[index]
            self.set_notice(f"no pending task {ref}: choose 1-{len(self.pending_tasks)}")
            return None
        matches = [t for t in self.pending_tasks if t.task_hash.startswith(ref.lower())]
        if len(matches) == 1:
            return matches[0]
        self.set_notice(f"{'no' if not matches else 'more than one'} pending task matches {ref}")
        return None

    def _resume(self, ref: str) -> None:
        task = self._find_pending(ref)
        if task is None:
            return
        request_id = new_request_id()
        frame = PendingFrame(
            request_id=request_id,
            session_id=self.session_id,
            task_hash=task.task_hash,
            window_hash=self.window_hash,
        )
        if self.send(frame):
            self.write(f"↻ resuming {task.task_hash[:8]}: {clip(task.objective, 80)}", "class:user")
            self.runs[request_id] = RunView(request_id=request_id, input=task.objective)
            self.pending_tasks = [t for t in self.pending_tasks if t is not task]

    def _drop(self, ref: str) -> None:
        task = self._find_pending(ref)
        if task is None:
            return
        self.send(
            HttpCall(
                method="DELETE",
                path=f"/v1/session/{self.session_id}/task/{task.task_hash}",
                purpose="drop",
                ref=task.task_hash,
            )
        )

    # ------------------------------------------------------------ Esc, Ctrl+C, popups

    def esc(self, *, picker_open: bool, input_text: str) -> EscAction:
        """The Esc chain of R47, outside popups and dialogs: the first that applies."""
        if picker_open:
            return EscAction.CLOSE_PICKER
        if self.notice is not None:
            self.notice = None
            return EscAction.CLOSE_NOTICE
        run = self.current_run()
        if run is not None:
            if not run.shown:
                self.request_cancel(run, pause=False)
                return EscAction.CANCEL_NOW
            self.popup = Popup(
                kind="cancel",
                title=f"Cancel the running task ({clip(run.input, 40)})?",
                choices=tuple(c.value for c in CancelChoice),
                target=run.request_id,
            )
            return EscAction.CANCEL_POPUP
        if input_text:
            return EscAction.CLEAR_INPUT
        if self.legs:
            self.open_leg_menu()
            return EscAction.LEG_MENU
        return EscAction.NOTHING

    def ctrl_c(self, *, input_text: str) -> EscAction:
        """Ctrl+C cancels the current run at once (``user_canceled``), no popup; with no
        run it clears the input, and on an empty line it says how to leave."""
        run = self.current_run()
        if run is not None:
            self.popup = None
            self.request_cancel(run, pause=False)
            return EscAction.CANCEL_NOW
        if input_text:
            return EscAction.CLEAR_INPUT
        self.set_notice("nothing to cancel — /quit or Ctrl+D leaves")
        return EscAction.NOTHING

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

    def open_leg_menu(self) -> None:
        legs = list(self.legs.values())
        choices = ["No", *(f"{leg.leg_id}  {clip(leg.label, 50)} ({leg.state})" for leg in legs)]
        targets = [leg.leg_id for leg in legs]
        if len(legs) >= 2:
            choices.append(f"All ({len(legs)} legs)")
            targets.append("all")
        self.popup = Popup(
            kind="legs",
            title="Cancel a background task?",
            choices=tuple(choices),
            targets=tuple(targets),
        )

    def choose(self, index: int) -> None:
        """Pick choice ``index`` of the open popup (0 = No, which just closes it)."""
        popup = self.popup
        if popup is None:
            return
        self.popup = None
        if index <= 0 or index >= len(popup.choices):
            return
        match popup.kind:
            case "cancel":
                run = self.runs.get(popup.target)
                if run is None or run.cancel_requested:
                    return
                choice = CancelChoice(popup.choices[index])
                self.request_cancel(run, pause=choice is CancelChoice.PAUSE)
            case "legs":
                target = popup.targets[index - 1]
                if target == "all":
                    title = f"Cancel all {len(popup.targets) - 1} background legs?"
                else:
                    leg = self.legs.get(target)
                    label = f" ({clip(leg.label, 40)})" if leg else ""
                    title = f"Cancel background leg {target}{label}?"
                self.popup = Popup(
                    kind="leg_confirm", title=title, choices=("No", "Yes"), target=target
                )
            case "leg_confirm":
                if self.send(background_cancel_frame(self.session_id, popup.target)):
                    what = "all background legs" if popup.target == "all" else popup.target
                    self.write(f"canceling {what}…", "class:dim")

    # ------------------------------------------------------------ answers

    def answer_confirm(
        self,
        ask_id: str,
        choice: ConfirmChoice,
        *,
        reason: str = "",
        password: str | None = None,
    ) -> None:
        ask = self.asks.pop(ask_id, None)
        if ask is None:
            return
        self.send(confirm_reply(ask_id, choice, reason=reason, password=password))
        tail = f": {clip(reason, 80)}" if choice is ConfirmChoice.DENY and reason else ""
        self.write(f"  → {choice.value}{tail} ({ask.tool_name})", "class:dim")

    def answer_questions(self, ask_id: str, answers: list[str]) -> None:
        ask = self.asks.pop(ask_id, None)
        if ask is None:
            return
        self.send(question_reply(ask_id, answers))
        for question, answer in zip(ask.questions, answers, strict=False):
            shown = "••••" if question.secret or ask.kind == "secret" else clip(answer, 80)
            self.write(f"  → {clip(question.text, 60)}: {shown}", "class:dim")

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
            case HttpResult():
                self._http_result(message)
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
            case ErrorFrame(code=code, message=text):
                self.set_notice(f"daemon error ({code}): {text}")
            case PendingList():
                self._pending_list(message)
            case LegList():
                self._leg_list(message)
            case AllowedList():
                self._allowed_list(message)

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
        self._send(ListLegs(session_id=self.session_id))
        self._send(ListPending(session_id=self.session_id))

    def _disconnected(self, reason: str) -> None:
        was = self.connection
        self.connection = "reconnecting"
        if was != "connected":
            return
        for run in self.runs.values():
            self._flush_partial(run)
        cut = len(self.runs)
        self._cut_runs += cut
        tail = f"; {cut} running task(s) kept in /pending" if cut else ""
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
        if run is None:
            self._foreign_event(frame.task_hash, event)
            return
        if isinstance(event, Text):
            run.shown = run.shown or bool(event.text)
            run.streamed = True
            run.partial += event.text
            *complete, run.partial = run.partial.split("\n")
            self._lines([("", clip(line)) for line in complete])
            return
        if isinstance(event, Done) and run.streamed:
            return
        lines = render_event(event)
        if lines:
            self._flush_partial(run)
            run.shown = True
            self._lines(lines)
        if isinstance(event, Canceled | Failed):
            run.end_shown = True

    def _foreign_event(self, task_hash: str, event: Any) -> None:
        """An event of a task this window did not request (a background job's
        follow-up, a late leg report): shown with its task hash, text streamed whole."""
        view = self._foreign.get(task_hash)
        if view is None:
            if len(self._foreign) >= FOREIGN_VIEWS_KEPT:
                self._foreign.pop(next(iter(self._foreign)))
            view = self._foreign[task_hash] = RunView(request_id="", input="", task_hash=task_hash)
        prefix = f"[{task_hash[:8]}] "
        if isinstance(event, Text):
            view.streamed = True
            view.partial += event.text
            *complete, view.partial = view.partial.split("\n")
            self._lines([("", prefix + clip(line)) for line in complete])
            return
        final = isinstance(event, Done | Failed | Canceled | Pending)
        lines = [] if isinstance(event, Done) and view.streamed else render_event(event)
        if view.partial and (lines or final):
            self._lines([("", prefix + clip(view.partial))])
            view.partial = ""
        self._lines([(style, prefix + text) for style, text in lines])
        if final:
            self._foreign.pop(task_hash, None)

    def _flush_partial(self, run: RunView) -> None:
        if run.partial:
            self._lines([("", clip(run.partial))])
            run.partial = ""

    def _done(self, frame: DoneFrame) -> None:
        run = self.runs.pop(frame.request_id, None)
        if run is None:
            return
        self._by_hash.pop(frame.task_hash, None)
        if run.task_hash is not None:
            self._by_hash.pop(run.task_hash, None)
        self._flush_partial(run)
        if not run.end_shown:
            self._lines(render_done_status(frame.status, frame.error))
        if self.popup is not None and self.popup.kind == "cancel":
            if self.popup.target == frame.request_id:
                self.popup = None
        for ask_id in [i for i, a in self.asks.items() if a.task_hash == run.task_hash]:
            del self.asks[ask_id]
        self.send(ListLegs(session_id=self.session_id))
        if frame.status in ("paused", "parked", "aborted"):
            self.send(ListPending(session_id=self.session_id))

    def _pending_list(self, frame: PendingList) -> None:
        if frame.session_id != self.session_id:
            return
        self.pending_tasks = list(frame.tasks)
        if not self._show_pending:
            return
        self._show_pending = False
        if not frame.tasks:
            self.write("no pending tasks in this session", "class:dim")
            return
        self.write("pending tasks (/pending N resumes, /pending drop N drops):", "class:dim")
        for number, task in enumerate(frame.tasks, 1):
            flags = " [question]" if task.has_questions else ""
            flags += " [background]" if task.has_jobs else ""
            self.write(f"  {number}. {task.task_hash[:8]}  {clip(task.objective, 80)}{flags}")

    def _forget_allowed(self, ref: str) -> None:
        """``/allowed forget N``: N of the last ``/allowed`` list, a rule id, or all."""
        rule_id = ref
        if ref.isdigit():
            index = int(ref) - 1
            if not 0 <= index < len(self.allowed_rules):
                self.set_notice(f"no remembered command {ref}: see /allowed")
                return
            rule_id = self.allowed_rules[index].id
        self._show_allowed = self.send(ForgetAllowed(session_id=self.session_id, rule_id=rule_id))

    def _allowed_list(self, frame: AllowedList) -> None:
        """The session's remembered commands (R76), each shown as the confirmation
        showed it: newlines and invisible characters escaped (`repl.faithful`)."""
        if frame.session_id != self.session_id:
            return
        self.allowed_rules = list(frame.rules)
        if not self._show_allowed:
            return
        self._show_allowed = False
        if not frame.rules:
            self.write("no remembered commands: every command that needs one asks", "class:dim")
            return
        self.write(
            "always allowed in this session (exactly these commands; "
            "/allowed forget N removes one, /allowed forget all every one):",
            "class:dim",
        )
        for number, rule in enumerate(frame.rules, 1):
            shown = "".join(p.text for p in line_pieces(rule.command, escape_newlines=True))
            self.write(f"  {number}. {shown}")

    def _leg_list(self, frame: LegList) -> None:
        if frame.session_id != self.session_id:
            return
        self.legs = {leg.leg_id: leg for leg in frame.legs}
        if not self._show_legs:
            return
        self._show_legs = False
        if not frame.legs:
            self.write("no background legs running", "class:dim")
            return
        self.write("background legs (Esc on an empty line opens the cancel menu):", "class:dim")
        now = time.time()
        for leg in frame.legs:
            age = max(0, int(now - leg.started_at))
            self.write(f"  {leg.leg_id}  {leg.state:<7} {age:>5}s  {clip(leg.label, 80)}")

    def _http_result(self, result: HttpResult) -> None:
        if result.status == 0:
            self.set_notice(f"request failed: {result.error}")
            return
        if result.status >= 400:
            try:
                body: ErrorBody = structure(result.body, ErrorBody)
                message = body.error.message
            except FrameDecodeError:
                message = f"HTTP {result.status}"
            self.set_notice(message)
            return
        match result.call.purpose:
            case "drop":
                self.pending_tasks = [
                    t for t in self.pending_tasks if t.task_hash != result.call.ref
                ]
                self.write(f"dropped pending task {result.call.ref[:8]}", "class:dim")
            case "history":
                try:
                    history: HistoryList = structure(result.body, HistoryList)
                except FrameDecodeError as exc:
                    self.set_notice(f"unexpected history reply: {exc}")
                    return
                keyword = f" matching {result.call.ref!r}" if result.call.ref else ""
                if not history.tasks:
                    self.write(f"no finished tasks{keyword}", "class:dim")
                    return
                self.write(f"recent tasks{keyword}:", "class:dim")
                for entry in history.tasks:
                    when = time.strftime("%m-%d %H:%M", time.localtime(entry.end_at))
                    self.write(
                        f"  {when}  {entry.task_hash[:8]}  {entry.status:<8} "
                        f"{clip(entry.objective, 80)}"
                    )
