"""The key decisions of `agentrio.repl.keys` as plain transitions: Esc in a dialog, Esc with
nothing to do, double Ctrl+C, quitting with tasks running, the echo of commands.

R47, R43, R77 (issue 19). Frames go to a list; every test asserts the exact frames.
"""

from __future__ import annotations

from agentrio.protocol import wording
from agentrio.protocol.causes import Cause
from agentrio.protocol.events import Question, Text
from agentrio.protocol.frames import Cancel, Reply, Run
from agentrio.repl.hints import ARMING, confirm_hint, popup_hint, question_hint
from agentrio.repl.keys import NOTHING_TO_STOP, QUIT_WINDOW_S, quit_line
from agentrio.repl.state import ReplState
from agentrio.repl.views import EscAction, elapsed_text
from tests.repl.helpers import HASH, SESSION, accepted, ask_confirm, connected_state, event

STOP_CHOICES = (wording.ESC_KEEP_RUNNING, wording.STOP_KEEP, wording.STOP_DISCARD)


def _run(state: ReplState, sent: list[object], text: str = "run: sleep 30") -> str:
    state.submit(text)
    frame = sent.pop()
    assert isinstance(frame, Run)
    state.handle(accepted(frame.request_id))
    return frame.request_id


def test_esc_in_a_dialog_opens_the_stop_popup_of_its_task() -> None:
    """R47: Esc in a confirmation opens Keep running / Stop, keep to resume / Stop and
    discard for the asking task (even one that showed nothing); it answers nothing."""
    state, sent = connected_state()
    rid = _run(state, sent)
    state.handle(ask_confirm("k1"))
    assert state.esc_dialog() is EscAction.CANCEL_POPUP
    assert state.popup is not None
    assert (state.popup.kind, state.popup.choices, state.popup.target) == (
        "cancel",
        STOP_CHOICES,
        rid,
    )
    state.choose(0)  # Keep running: back to the dialog, still open
    assert state.popup is None
    assert "k1" in state.asks
    assert sent == []
    state.esc_dialog()
    state.choose(1)
    assert sent == [Cancel(task_hash=HASH, cause=Cause.PAUSED)]


def test_esc_at_the_prompt_with_a_dialog_open_stops_its_task_only_by_popup() -> None:
    """R47, R77: Esc from the input line while a dialog waits (not armed yet) opens the
    stop popup too: never a cancel at once, never an answer."""
    state, sent = connected_state()
    _run(state, sent)
    state.handle(ask_confirm("k1"))
    assert state.esc(picker_open=False, input_text="typed") is EscAction.CANCEL_POPUP
    assert sent == []


def test_esc_in_a_dialog_of_a_task_started_elsewhere() -> None:
    """R47, R46, R84: an ask of a task this window did not start (a job's follow-up
    asking here): the popup stops it through the ask's own stop choice, which this
    connection may send (a cancel frame from it would be refused)."""
    for index, stop in [(2, Cause.USER_CANCELED), (1, Cause.USER_ABORTED)]:
        state, sent = connected_state()
        state.handle(ask_confirm("k1"))
        assert state.esc_dialog() is EscAction.CANCEL_POPUP
        assert state.popup is not None
        assert state.popup.task_hash == HASH
        state.choose(index)
        assert sent == [Reply(id="k1", stop=stop)]
        assert state.asks == {}


def test_esc_in_a_dialog_of_a_stopping_task_says_so() -> None:
    """R47: once the asking task is stopping, Esc opens nothing and says why."""
    state, sent = connected_state()
    _run(state, sent)
    state.handle(ask_confirm("k1"))
    state.ctrl_c(input_text="", now=0.0)
    sent.clear()
    assert state.esc_dialog(now=0.0) is EscAction.NOTHING
    assert state.popup is None
    assert state.hint is not None
    assert "already stopping" in state.hint[0]


def test_esc_with_nothing_to_do_says_so() -> None:
    """R47: no task, no legs, empty input: a brief hint, not silence."""
    state, sent = connected_state()
    assert state.esc(picker_open=False, input_text="", now=10.0) is EscAction.NOTHING
    assert state.hint is not None
    assert state.hint[0] == NOTHING_TO_STOP
    assert state.hint[1] > 10.0
    assert sent == []


def test_double_ctrl_c_quits_within_the_window_only() -> None:
    """Issue 19: a lone Ctrl+C asks for a second; one within QUIT_WINDOW_S quits, a
    later one asks again."""
    state, _ = connected_state()
    assert state.ctrl_c(input_text="", now=0.0) is EscAction.NOTHING
    assert state.ctrl_c(input_text="", now=QUIT_WINDOW_S + 0.5) is EscAction.NOTHING
    assert not state.quit_requested
    assert state.ctrl_c(input_text="", now=QUIT_WINDOW_S + 1.0) is EscAction.QUIT
    assert state.quit_requested


def test_ctrl_c_with_a_run_cancels_first() -> None:
    """R40: with a task running, the first Ctrl+C stops it; it does not count toward
    quitting."""
    state, sent = connected_state()
    _run(state, sent)
    assert state.ctrl_c(input_text="", now=0.0) is EscAction.CANCEL_NOW
    assert sent == [Cancel(task_hash=HASH, cause=Cause.USER_CANCELED)]
    assert state.ctrl_c(input_text="", now=0.5) is EscAction.NOTHING
    assert not state.quit_requested


def test_ctrl_c_closes_a_popup() -> None:
    """R47: Ctrl+C with a popup open and no task closes it, like its first choice."""
    state, _ = connected_state()
    state.open_leg_menu()
    assert state.ctrl_c(input_text="", now=0.0) is EscAction.CLOSE_POPUP
    assert state.popup is None


def test_quit_says_what_becomes_of_running_tasks() -> None:
    """R43: quitting with tasks running says each is kept and where to find it."""
    state, sent = connected_state()
    _run(state, sent, "run: sleep 30")
    state.submit("/quit")
    assert state.quit_requested
    assert state.output[-2:] == [
        ("class:user", "> /quit"),
        ("class:warn", quit_line("run: sleep 30", SESSION)),
    ]
    assert f"agentrio --session {SESSION}" in state.output[-1][1]
    assert "/pending" in state.output[-1][1]


def test_quit_with_nothing_running_says_nothing_more() -> None:
    state, _ = connected_state()
    before = len(state.output)
    state.quit()
    assert state.quit_requested
    assert state.output[before:] == []


def test_slash_commands_are_echoed() -> None:
    """Issue 19: a command is echoed into the transcript before its output."""
    state, _ = connected_state()
    state.submit("  /session ")
    assert state.output[-2] == ("class:user", "> /session")
    assert state.output[-1][1].startswith(f"session {SESSION}")


def test_a_message_of_several_lines_is_echoed_whole() -> None:
    """Issue 19: a message typed over several lines (Alt+Enter) is sent and shown whole."""
    state, sent = connected_state()
    state.submit("first line\nsecond line")
    (frame,) = sent
    assert isinstance(frame, Run)
    assert frame.input == "first line\nsecond line"
    assert state.output[-2:] == [("class:user", "> first line"), ("class:user", "  second line")]


def test_elapsed_text() -> None:
    assert [elapsed_text(s) for s in (0, 12.7, 65, 3725)] == ["0s", "12s", "1m 05s", "1h 02m"]


def test_hints_name_each_dialogs_keys() -> None:
    """R77: each dialog says which keys it takes; an unarmed one says it takes none."""
    assert confirm_hint(armed=False) == ARMING
    assert confirm_hint(armed=True).startswith("↑↓ choose · Enter or 1–6 picks · Esc: stop menu")
    assert "Enter or 1–7 picks" in confirm_hint(armed=True, entries=7)  # a rule offered
    assert "Esc back to the choices" in confirm_hint(armed=True, asking_reason=True)
    assert "password" in confirm_hint(armed=True, in_password=True)
    pick = Question(text="q", options=["a", "b", "c"])
    assert question_hint(pick, armed=True).startswith("↑↓ choose · Enter or 1–4 picks")  # Other…
    many = Question(text="q", options=["a", "b"], multi=True)
    assert "Space or 1–3 ticks · Enter confirms" in question_hint(many, armed=True)
    assert "Enter or 1–3 picks · PgUp: back to question 1 · Esc" in question_hint(
        Question(text="q", options=["a", "b"]), armed=True, back_to=1
    )
    assert question_hint(pick, armed=True, typing_other=True).startswith(
        "type your answer · Enter answers · Esc back to the choices"
    )
    assert question_hint(Question(text="q", secret=True), armed=True).startswith("typing is hidden")
    assert popup_hint(STOP_CHOICES) == f"↑↓ choose · Enter or 1–3 picks · Esc: {STOP_CHOICES[0]}"


def test_steered_text_is_not_a_command_echo() -> None:
    """A message while a task runs steers it and is shown once, with ↪."""
    state, sent = connected_state()
    _run(state, sent)
    state.handle(event(Text(seq=2, at=0.0, text="working\n")))
    state.submit("use staging")
    assert state.output[-1] == ("class:user", "↪ use staging")
