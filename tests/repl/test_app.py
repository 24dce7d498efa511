"""The prompt_toolkit application driven by keys: `create_pipe_input` + `DummyOutput`.

SPEC §11, R7, R40–R47, R77. Each test runs the real `ReplApp` on an asyncio loop, feeds key
presses through a pipe, hands frames to `deliver` as the Trio side would, and asserts
the exact frames the state sent (a list stands in for the socket). Waits poll for the
expected effect; they never sleep for a fixed time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager

import pytest
from prompt_toolkit.application import create_app_session
from prompt_toolkit.input import PipeInput, create_pipe_input
from prompt_toolkit.output import DummyOutput

from agentrio.protocol import wording
from agentrio.protocol.causes import Cause
from agentrio.protocol.events import Question, Text
from agentrio.protocol.frames import (
    Ack,
    BackgroundCancel,
    Cancel,
    ListLegs,
    ListPending,
    OpenWindow,
    Reply,
    Run,
    Withdrawn,
)
from agentrio.repl.app import ReplApp
from agentrio.repl.dialogs import ConfirmDialog, PopupDialog, QuestionDialog
from agentrio.repl.messages import Connected, Outgoing
from agentrio.repl.state import ReplState
from tests.repl.helpers import (
    HASH,
    SESSION,
    accepted,
    ask_confirm,
    ask_questions,
    done,
    event,
    leg_list,
)

ESC = "\x1b"
ENTER = "\r"
DOWN = "\x1b[B"
CTRL_C = "\x03"
CTRL_D = "\x04"
#: The arming delay of these tests: short, but the same code path as the real one.
TEST_ARM_DELAY_S = 0.02


class Harness:
    def __init__(self, pipe: PipeInput, app: ReplApp, sent: list[Outgoing]) -> None:
        self.pipe = pipe
        self.app = app
        self.state = app.state
        self.sent = sent
        #: The ``ack`` frames `frames` set aside (issue 34).
        self.acks: list[Ack] = []
        self.keys_done = 0

        def count(_: object) -> None:
            self.keys_done += 1

        app.application.key_processor.after_key_press += count

    async def until(self, condition: Callable[[], object], what: str = "") -> None:
        """Wait for ``condition`` (the app processes keys asynchronously)."""
        for _ in range(400):
            if condition():
                return
            await asyncio.sleep(0.005)
        raise AssertionError(f"timed out waiting for {what or condition}")

    async def press(self, keys: str) -> None:
        self.pipe.send_text(keys)
        await asyncio.sleep(0)

    async def esc(self) -> None:
        """A lone Esc is recognised after the app's short escape timeout, and acts once
        no second key made it Alt+<key> (`agentrio.repl.app.KEY_TIMEOUT_S`); wait until the key
        processor has handled it."""
        before = self.keys_done
        processor = self.app.application.key_processor
        self.pipe.send_text(ESC)
        await self.until(
            lambda: self.keys_done > before and not processor.key_buffer, "Esc to be handled"
        )

    async def armed(self) -> None:
        """Wait until the ask's dialog is armed and has the focus (R77)."""

        def ready() -> bool:
            dialog = self.app.dialog
            return (
                dialog is not None
                and dialog.armed
                and self.app.application.layout.has_focus(dialog.focus_target())
            )

        await self.until(ready, "the dialog to be armed")

    def sent_any(self) -> bool:
        """Whether a frame other than an ``ack`` was sent (what `frames` returns)."""
        return any(not isinstance(frame, Ack) for frame in self.sent)

    def frames(self) -> list[Outgoing]:
        """Frames sent since the last call, but the ``ack`` of each dialog drawn (issue
        34: `test_a_dialog_drawn_is_acknowledged_once` covers those)."""
        out = [frame for frame in self.sent if not isinstance(frame, Ack)]
        self.acks += [frame for frame in self.sent if isinstance(frame, Ack)]
        self.sent.clear()
        return out

    async def start_run(self, text: str = "run: echo hello") -> str:
        await self.press(text + ENTER)
        await self.until(lambda: any(isinstance(f, Run) for f in self.sent), "run frame")
        (frame,) = self.frames()
        assert isinstance(frame, Run)
        return frame.request_id


@contextmanager
def pipe_session() -> Iterator[PipeInput]:
    with create_pipe_input() as pipe, create_app_session(input=pipe, output=DummyOutput()):
        yield pipe


def run_app(
    scenario: Callable[[Harness], Awaitable[None]], *, arm_delay_s: float = TEST_ARM_DELAY_S
) -> None:
    """Run ``scenario`` against a connected app; the app must have exited at the end."""

    async def main() -> None:
        with pipe_session() as pipe:
            sent: list[Outgoing] = []
            state = ReplState(session_id=SESSION, window_hash="w1", send=sent.append)
            app = ReplApp(state, arm_delay_s=arm_delay_s)
            task = asyncio.ensure_future(app.run())
            h = Harness(pipe, app, sent)
            await h.until(lambda: app.application.is_running, "app start")
            app.deliver(Connected(url="http://127.0.0.1:1", daemon_version="0.1.0"))
            assert h.frames() == [
                OpenWindow(session_id=SESSION, window_hash="w1"),
                ListLegs(session_id=SESSION),
                ListPending(origin="cli-"),
            ]
            try:
                await scenario(h)
            finally:
                app.exit()
                await asyncio.wait_for(task, 5)
            assert state.flushed == len(state.output)

    asyncio.run(main())


# ---------------------------------------------------------------- Esc chain (R47)


def test_esc_closes_the_picker() -> None:
    """R47: typing / opens the command picker; Esc closes it and keeps the text."""

    async def scenario(h: Harness) -> None:
        await h.press("/")
        await h.until(lambda: h.app.buffer.complete_state is not None, "picker")
        await h.esc()
        assert h.app.buffer.complete_state is None
        assert h.app.buffer.text == "/"
        assert h.frames() == []

    run_app(scenario)


def test_esc_closes_the_notice() -> None:
    """R47: with a notice shown, Esc closes it and nothing else."""

    async def scenario(h: Harness) -> None:
        await h.press("/nope" + ENTER)
        await h.until(lambda: h.state.notice is not None, "notice")
        await h.press("abc")
        await h.until(lambda: h.app.buffer.text == "abc")
        await h.esc()
        assert h.state.notice is None
        assert h.app.buffer.text == "abc"

    run_app(scenario)


def test_esc_cancels_at_once_and_holds_before_accepted() -> None:
    """R47, R46: Esc on a run that showed nothing cancels at once; before its task hash
    is known the cancel is held and sent when accepted arrives."""

    async def scenario(h: Harness) -> None:
        rid = await h.start_run()
        await h.esc()
        assert h.frames() == []
        assert h.app.dialog is None
        h.app.deliver(accepted(rid))
        assert h.frames() == [Cancel(task_hash=HASH, cause=Cause.USER_CANCELED)]

    run_app(scenario)


async def shown_run(h: Harness) -> str:
    rid = await h.start_run()
    h.app.deliver(accepted(rid))
    h.app.deliver(event(Text(seq=2, at=0.0, text="Running `echo hello`.\n")))
    return rid


@pytest.mark.parametrize(
    ("keys", "frames"),
    [
        (ESC, []),
        ("1", []),
        (DOWN + ENTER, [Cancel(task_hash=HASH, cause=Cause.PAUSED)]),
        ("2", [Cancel(task_hash=HASH, cause=Cause.PAUSED)]),
        (DOWN + DOWN + ENTER, [Cancel(task_hash=HASH, cause=Cause.USER_CANCELED)]),
        ("3", [Cancel(task_hash=HASH, cause=Cause.USER_CANCELED)]),
    ],
)
def test_cancel_popup_choices(keys: str, frames: list[Outgoing]) -> None:
    """R47, R40, R41: after output, Esc opens the stop menu; "Keep running" (or Esc)
    sends nothing, "Stop, keep to resume" sends cancel{pause:true}, "Stop and discard"
    cancel{pause:false}."""

    async def scenario(h: Harness) -> None:
        await shown_run(h)
        await h.esc()
        assert isinstance(h.app.dialog, PopupDialog)
        assert h.app.dialog.popup.choices == (
            wording.ESC_KEEP_RUNNING,
            wording.STOP_KEEP,
            wording.STOP_DISCARD,
        )
        assert h.app.application.layout.has_focus(h.app.dialog.menu)
        await h.press(keys)
        await h.until(lambda: h.state.popup is None, "popup closed")
        assert h.frames() == frames
        await h.until(lambda: h.app.application.layout.has_focus(h.app.buffer), "focus back")

    run_app(scenario)


def test_esc_clears_the_input() -> None:
    """R47: with no run, Esc clears the input."""

    async def scenario(h: Harness) -> None:
        await h.press("half a thought")
        await h.until(lambda: h.app.buffer.text == "half a thought")
        await h.esc()
        assert h.app.buffer.text == ""
        assert h.frames() == []

    run_app(scenario)


@pytest.mark.parametrize(
    ("legs", "keys", "frames"),
    [
        (
            (("cmd_00000001", "make"),),
            "2" + "2",
            [BackgroundCancel(session_id=SESSION, leg_id="cmd_00000001")],
        ),
        ((("cmd_00000001", "make"),), "2" + "1", []),
        ((("cmd_00000001", "make"),), "1", []),
        (
            (("cmd_00000001", "make"), ("sub_00000002", "docs")),
            "3" + DOWN + ENTER,
            [BackgroundCancel(session_id=SESSION, leg_id="sub_00000002")],
        ),
        (
            (("cmd_00000001", "make"), ("sub_00000002", "docs")),
            "4" + "2",
            [BackgroundCancel(session_id=SESSION, leg_id="all")],
        ),
    ],
)
def test_background_menu(
    legs: tuple[tuple[str, str], ...], keys: str, frames: list[Outgoing]
) -> None:
    """R47, R44: Esc on an empty line with legs running opens No, each leg, All (two or
    more), then a No / Yes confirmation; Yes sends background_cancel."""

    async def scenario(h: Harness) -> None:
        h.app.deliver(leg_list(*legs))
        await h.esc()
        assert isinstance(h.app.dialog, PopupDialog)
        assert h.app.dialog.popup.kind == "legs"
        assert len(h.app.dialog.popup.choices) == 1 + len(legs) + (len(legs) >= 2)
        for key in [keys[0], keys[1:]] if len(keys) > 1 else [keys]:
            await h.press(key)
            await h.until(
                lambda: h.state.popup is None or h.state.popup.kind == "leg_confirm", "menu step"
            )
            if h.state.popup is not None:
                await h.until(
                    lambda: (
                        h.app.dialog is not None
                        and h.app.application.layout.has_focus(h.app.dialog.menu)
                    )
                )  # type: ignore[union-attr]
        await h.until(lambda: h.state.popup is None, "menu closed")
        assert h.frames() == frames

    run_app(scenario)


def test_esc_with_nothing_to_do() -> None:
    """R47: with nothing open, no run, empty input and no legs, Esc changes nothing but
    says so in a hint, which the next key clears."""

    async def scenario(h: Harness) -> None:
        await h.esc()
        assert h.state.hint is not None
        assert h.state.hint[0] == "nothing to stop: no task running, no background legs"
        await h.press("x")
        await h.until(lambda: h.app.buffer.text == "x", "key after Esc")
        assert h.state.hint is None
        assert h.state.popup is None
        assert h.frames() == []

    run_app(scenario)


def test_ctrl_c_cancels_at_once() -> None:
    """R40: Ctrl+C cancels the running task at once (user_canceled), with no popup."""

    async def scenario(h: Harness) -> None:
        await shown_run(h)
        await h.press(CTRL_C)
        await h.until(h.sent_any, "cancel")
        assert h.frames() == [Cancel(task_hash=HASH, cause=Cause.USER_CANCELED)]
        assert h.state.popup is None

    run_app(scenario)


# ---------------------------------------------------------------- dialogs


@pytest.mark.parametrize(
    ("keys", "reply"),
    [
        (ENTER, Reply(id="k1", approve=True)),
        ("1", Reply(id="k1", approve=True)),
        (
            DOWN + ENTER + "not on a Friday" + ENTER,
            Reply(id="k1", approve=False, reason="not on a Friday"),
        ),
        ("3", Reply(id="k1", approve=True, remember=True)),
        ("4", Reply(id="k1", approve=True, allow_turn=True)),
        ("5", Reply(id="k1", stop=Cause.USER_CANCELED)),
        ("6", Reply(id="k1", stop=Cause.USER_ABORTED)),
    ],
)
def test_confirmation_choices(keys: str, reply: Reply) -> None:
    """SPEC §11, R40, R41: each confirmation choice sends its exact reply frame and
    closes the dialog."""

    async def scenario(h: Harness) -> None:
        await shown_run(h)
        h.app.deliver(ask_confirm("k1"))
        assert isinstance(h.app.dialog, ConfirmDialog)
        await h.armed()
        assert h.app.application.layout.has_focus(h.app.dialog.menu)
        await h.press(keys)
        await h.until(h.sent_any, "reply")
        assert h.frames() == [reply]
        await h.until(lambda: h.app.dialog is None, "dialog closed")
        assert h.app.application.layout.has_focus(h.app.buffer)

    run_app(scenario)


def test_deny_reason_esc_goes_back() -> None:
    """SPEC §11: Esc in the deny-reason field returns to the choices; nothing is sent."""

    async def scenario(h: Harness) -> None:
        h.app.deliver(ask_confirm("k1"))
        dialog = h.app.dialog
        assert isinstance(dialog, ConfirmDialog)
        await h.armed()
        await h.press("2")
        await h.until(lambda: h.app.application.layout.has_focus(dialog.reason), "reason field")
        await h.esc()
        assert h.app.application.layout.has_focus(dialog.menu)
        assert h.frames() == []
        await h.press("1")
        await h.until(h.sent_any, "reply")
        assert h.frames() == [Reply(id="k1", approve=True)]

    run_app(scenario)


def test_password_confirmation() -> None:
    """R7: a restricted confirmation asks for the system password first; approving
    without one is refused locally; the password rides with the approval."""

    async def scenario(h: Harness) -> None:
        h.app.deliver(ask_confirm("k1", need_password=True))
        dialog = h.app.dialog
        assert isinstance(dialog, ConfirmDialog)
        await h.armed()
        assert h.app.application.layout.has_focus(dialog.password)
        await h.press(ENTER)
        await h.until(lambda: h.app.application.layout.has_focus(dialog.menu), "menu")
        await h.press(ENTER)
        await h.until(lambda: dialog.error != "", "error")
        assert dialog.error == "enter the system password first"
        assert h.frames() == []
        await h.until(lambda: h.app.application.layout.has_focus(dialog.password), "password")
        await h.press("hunter2" + ENTER)
        await h.until(lambda: h.app.application.layout.has_focus(dialog.menu), "menu again")
        await h.press(ENTER)
        await h.until(h.sent_any, "reply")
        assert h.frames() == [Reply(id="k1", approve=True, password="hunter2")]
        assert all("hunter2" not in text for _, text in h.state.output)

    run_app(scenario)


def test_question_form() -> None:
    """SPEC §11, R10: options, multi-select, free text and secret questions in turn,
    answered with one reply carrying every answer in order."""

    async def scenario(h: Harness) -> None:
        questions = [
            Question(text="Which branch?", options=["main", "release"]),
            Question(text="Which targets?", options=["lint", "test", "docs"], multi=True),
            Question(text="Release note?"),
            Question(text="API token?", secret=True),
        ]
        h.app.deliver(ask_questions(questions))
        dialog = h.app.dialog
        assert isinstance(dialog, QuestionDialog)
        await h.armed()
        await h.press("2")
        await h.until(lambda: len(dialog.answers) == 1, "first answer")
        await h.press(" " + DOWN + DOWN + " " + ENTER)
        await h.until(lambda: len(dialog.answers) == 2, "second answer")
        await h.until(lambda: h.app.application.layout.has_focus(dialog.element), "text focus")
        await h.press("ship it" + ENTER)
        await h.until(lambda: len(dialog.answers) == 3, "third answer")
        await h.until(lambda: h.app.application.layout.has_focus(dialog.element), "secret focus")
        await h.press("s3cret" + ENTER)
        await h.until(h.sent_any, "reply")
        assert h.frames() == [
            Reply(id="q1", answers=["release", "lint, docs", "ship it", "s3cret"])
        ]
        assert all("s3cret" not in text for _, text in h.state.output)
        await h.until(lambda: h.app.dialog is None, "dialog closed")

    run_app(scenario)


def test_withdrawn_closes_the_dialog_and_shows_the_next() -> None:
    """R3: a withdrawn ask closes its dialog; the next queued ask is shown."""

    async def scenario(h: Harness) -> None:
        h.app.deliver(ask_confirm("k1"))
        h.app.deliver(ask_questions([Question(text="Name?")], ask_id="q2"))
        assert isinstance(h.app.dialog, ConfirmDialog)
        h.app.deliver(Withdrawn(id="k1", reason="task canceled"))
        assert isinstance(h.app.dialog, QuestionDialog)
        h.app.deliver(Withdrawn(id="q2", reason="task canceled"))
        assert h.app.dialog is None
        await h.until(lambda: h.app.application.layout.has_focus(h.app.buffer), "focus back")
        assert h.frames() == []

    run_app(scenario)


# ---------------------------------------------------------------- leaving


def test_picker_enter_takes_the_command() -> None:
    """SPEC §11: Enter with the / picker open runs the first matching command."""

    async def scenario(h: Harness) -> None:
        await h.press("/qu")
        await h.until(lambda: h.app.buffer.complete_state is not None, "picker")
        await h.press(ENTER)
        await h.until(lambda: h.state.quit_requested, "quit")

    run_app(scenario)


def test_ctrl_d_quits_on_empty_line() -> None:
    """SPEC §11: Ctrl+D on an empty line leaves the REPL."""

    async def scenario(h: Harness) -> None:
        await h.press(CTRL_D)
        await h.until(lambda: h.state.quit_requested, "quit")
        await h.until(lambda: not h.app.application.is_running, "exit")

    run_app(scenario)


# ---------------------------------------------------------------- issue 19: keys


def test_a_dialog_drawn_is_acknowledged_once() -> None:
    """R97: the REPL tells the daemon it has drawn an ask (an ``ack`` of its id) when
    the dialog appears, once, even when a popup covered it meanwhile; a second ask is
    acknowledged when it is drawn in turn, not before."""

    async def scenario(h: Harness) -> None:
        await shown_run(h)
        h.app.deliver(ask_confirm("k1"))
        h.app.deliver(ask_confirm("k2"))
        await h.until(lambda: isinstance(h.app.dialog, ConfirmDialog), "dialog")
        assert h.frames() == []
        assert h.acks == [Ack(id="k1")]
        await h.armed()
        await h.esc()
        await h.until(lambda: isinstance(h.app.dialog, PopupDialog), "popup")
        await h.press(ESC)
        await h.until(lambda: isinstance(h.app.dialog, ConfirmDialog), "dialog back")
        await h.press("1")
        await h.until(lambda: any(isinstance(f, Reply) for f in h.sent), "reply")
        assert h.frames() == [Reply(id="k1", approve=True)]
        assert h.acks == [Ack(id="k1"), Ack(id="k2")]

    run_app(scenario)


@pytest.mark.parametrize("back", ["1", ESC])
def test_esc_in_a_confirmation_opens_the_stop_popup_and_comes_back(back: str) -> None:
    """R47, R77: Esc in an armed confirmation opens the stop popup (armed at once) and
    answers nothing; Keep running (or Esc) returns to the same dialog, its selection
    and focus untouched; it still takes its own keys."""

    async def scenario(h: Harness) -> None:
        await shown_run(h)
        h.app.deliver(ask_confirm("k1"))
        dialog = h.app.dialog
        assert isinstance(dialog, ConfirmDialog)
        await h.armed()
        await h.press(DOWN)
        await h.until(lambda: dialog.menu.selected == 1, "selection moved")
        await h.esc()
        popup = h.app.dialog
        assert isinstance(popup, PopupDialog)
        assert popup.popup.choices == (
            wording.ESC_KEEP_RUNNING,
            wording.STOP_KEEP,
            wording.STOP_DISCARD,
        )
        await h.until(lambda: h.app.application.layout.has_focus(popup.menu), "popup focus")
        await h.press(back)
        await h.until(lambda: h.app.dialog is dialog, "the same dialog back")
        await h.until(lambda: h.app.application.layout.has_focus(dialog.menu), "dialog focus")
        assert dialog.armed
        assert dialog.menu.selected == 1
        assert h.frames() == []
        await h.press("1")
        await h.until(h.sent_any, "reply")
        assert h.frames() == [Reply(id="k1", approve=True)]

    run_app(scenario)


def test_esc_in_a_question_keeps_the_typed_answer() -> None:
    """R47: Esc in a question's text field opens the stop popup; Keep running returns
    to the field with its text; Stop, keep to resume pauses the task."""

    async def scenario(h: Harness) -> None:
        await shown_run(h)
        h.app.deliver(ask_questions([Question(text="Name?")]))
        dialog = h.app.dialog
        assert isinstance(dialog, QuestionDialog)
        await h.armed()
        await h.press("half")
        await h.until(lambda: dialog.element.text == "half", "typed")  # type: ignore[attr-defined]
        await h.esc()
        assert isinstance(h.app.dialog, PopupDialog)
        await h.press("1")
        await h.until(lambda: h.app.dialog is dialog, "the same dialog back")
        await h.until(lambda: h.app.application.layout.has_focus(dialog.element), "field focus")
        await h.press(" done")
        await h.until(lambda: dialog.element.text == "half done", "typed")  # type: ignore[attr-defined]
        await h.esc()
        await h.until(lambda: isinstance(h.app.dialog, PopupDialog), "the popup again")
        await h.press("2")
        await h.until(h.sent_any, "cancel")
        assert h.frames() == [Cancel(task_hash=HASH, cause=Cause.PAUSED)]
        assert dialog.element.text == "half done"  # type: ignore[attr-defined]

    run_app(scenario)


def test_alt_enter_and_ctrl_j_insert_new_lines() -> None:
    """Issue 19: Alt+Enter (Esc, Enter) and Ctrl+J add a line; Enter sends it all; a
    lone Esc still clears the input."""

    async def scenario(h: Harness) -> None:
        await h.press("one" + ESC + ENTER + "two" + "\n" + "three")
        await h.until(lambda: h.app.buffer.text == "one\ntwo\nthree", "three lines")
        await h.press(ENTER)
        await h.until(h.sent_any, "run")
        (frame,) = h.frames()
        assert isinstance(frame, Run)
        assert frame.input == "one\ntwo\nthree"
        await h.press("x")
        await h.until(lambda: h.app.buffer.text == "x")
        h.app.deliver(done(frame.request_id))
        await h.esc()
        assert h.app.buffer.text == ""

    run_app(scenario)


def test_double_ctrl_c_quits_and_says_what_is_kept() -> None:
    """Issue 19, R43: Ctrl+C on an idle empty line asks for a second, which quits; a
    task still running (its cancel not asked) is named as kept."""

    async def scenario(h: Harness) -> None:
        await h.press(CTRL_C)
        await h.until(lambda: h.state.hint is not None, "the hint")
        assert not h.state.quit_requested
        await h.press(CTRL_C)
        await h.until(lambda: h.state.quit_requested, "quit")
        await h.until(lambda: not h.app.application.is_running, "exit")

    run_app(scenario)


def test_ctrl_d_with_a_task_running_says_it_is_kept() -> None:
    """R43: Ctrl+D while a task runs quits and says the task is kept, and where."""

    async def scenario(h: Harness) -> None:
        rid = await h.start_run("run: sleep 30")
        h.app.deliver(accepted(rid))
        await h.press(CTRL_D)
        await h.until(lambda: not h.app.application.is_running, "exit")
        assert any(
            text.startswith("‖ run: sleep 30 — stopped (window closed), kept")
            and f"agentrio --session {SESSION}" in text
            for _, text in h.state.output
        )

    run_app(scenario)


def test_ctrl_r_searches_the_history() -> None:
    """Issue 19: Ctrl+R searches earlier inputs; Enter takes the match into the line."""

    async def scenario(h: Harness) -> None:
        for line in ("/session", "/legs"):
            await h.press(line + ENTER)
            await h.until(lambda line=line: ("class:user", f"> {line}") in h.state.output)
        await h.press("\x12" + "sess")
        await h.until(lambda: not h.app.application.layout.has_focus(h.app.buffer), "search")
        await h.press(ENTER)
        await h.until(lambda: h.app.application.layout.has_focus(h.app.buffer), "back")
        assert h.app.buffer.text == "/session"

    run_app(scenario)


class _RecordingOutput(DummyOutput):
    """A `DummyOutput` that records the cursor moves and erases the app makes."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

    def cursor_up(self, amount: int) -> None:
        self.calls.append(("up", amount))

    def cursor_down(self, amount: int) -> None:
        self.calls.append(("down", amount))

    def erase_down(self) -> None:
        self.calls.append(("erase_down", 0))

    def erase_end_of_line(self) -> None:
        self.calls.append(("erase_line", 0))


def test_printing_above_the_prompt_never_clears_from_its_first_cell() -> None:
    """Issue 19: the first line printed above a freshly drawn prompt (the ``connected``
    line) must not leave a stale ``>`` and toolbar in the scrollback. Erasing down from
    the live area's first cell is a clear screen to tmux when that cell is the top-left,
    which pushes the area into the scrollback; the area's first row is erased alone."""

    async def main() -> None:
        output = _RecordingOutput()
        with create_pipe_input() as pipe, create_app_session(input=pipe, output=output):
            state = ReplState(session_id=SESSION, window_hash="w1", send=lambda _: None)
            app = ReplApp(state, arm_delay_s=TEST_ARM_DELAY_S)
            task = asyncio.ensure_future(app.run())
            h = Harness(pipe, app, [])
            await h.until(lambda: app.application.renderer.last_rendered_screen is not None)
            output.calls.clear()
            app.deliver(Connected(url="http://127.0.0.1:1", daemon_version="0.1.0"))
            app.exit()
            await asyncio.wait_for(task, 5)
        moves = output.calls[: output.calls.index(("erase_down", 0)) + 1]
        assert moves[-3:] == [("erase_line", 0), ("down", 1), ("erase_down", 0)], moves

    asyncio.run(main())
