"""The question form's own answer and its way back (issue 33 item 8), in the real
`ReplApp` driven by keys (`create_pipe_input` + `DummyOutput`, as tests/repl/test_app.py):
a closed question ends with "Other…", which opens a line for the person's own words;
PgUp goes back to the question before and its answer is given again. The frames the
state sends are asserted exactly; waits poll, nothing sleeps.
"""

from __future__ import annotations

from agentrio.protocol.events import Question
from agentrio.protocol.frames import Reply
from agentrio.repl.forms import OTHER, ChoiceField, QuestionDialog, TextField
from tests.repl.helpers import ask_questions
from tests.repl.test_app import DOWN, ENTER, ESC, Harness, run_app

PAGE_UP = "\x1b[5~"


def _form(h: Harness, *questions: Question) -> QuestionDialog:
    h.app.deliver(ask_questions(list(questions)))
    dialog = h.app.dialog
    assert isinstance(dialog, QuestionDialog)
    return dialog


def test_other_opens_a_line_whose_text_is_the_answer() -> None:
    """Issue 33 item 8: "Other…" is the last entry (its digit picks it); it opens a
    line that takes the focus; Esc there goes back to the choices (no stop popup, no
    answer); Other… again keeps the typed text; Enter sends it as the answer. An empty
    line answers nothing."""

    async def scenario(h: Harness) -> None:
        dialog = _form(h, Question(text="Which colour?", options=["red", "blue"]))
        field = dialog.field
        assert isinstance(field, ChoiceField)
        assert field.menu.choices == ["red", "blue", OTHER]
        await h.armed()
        await h.press("3")
        await h.until(lambda: h.app.application.layout.has_focus(field.other), "the line")
        await h.press(ENTER)  # empty: nothing answered
        await h.press("gre")
        await h.until(lambda: field.other.text == "gre", "typed")
        await h.esc()
        assert not field.typing
        assert h.state.popup is None
        assert h.app.application.layout.has_focus(field.menu)
        await h.press("3")
        await h.until(lambda: h.app.application.layout.has_focus(field.other), "the line again")
        await h.press("en" + ENTER)
        await h.until(h.sent_any, "the reply")
        assert h.frames() == [Reply(id="q1", answers=["green"])]

    run_app(scenario)


def test_other_in_a_multi_select_follows_the_ticked_options() -> None:
    """Issue 33 item 8: in a multi-select, Other… ticked with options opens the line on
    Enter; the answer is the ticked options, then the typed text, joined by ", "."""

    async def scenario(h: Harness) -> None:
        dialog = _form(h, Question(text="Which targets?", options=["lint", "test"], multi=True))
        field = dialog.field
        assert isinstance(field, ChoiceField)
        await h.armed()
        await h.press("1" + "3" + ENTER)
        await h.until(lambda: field.typing, "the line")
        await h.press("bench" + ENTER)
        await h.until(h.sent_any, "the reply")
        assert h.frames() == [Reply(id="q1", answers=["lint, bench"])]

    run_app(scenario)


def test_pgup_goes_back_and_the_answer_is_given_again() -> None:
    """Issue 33 item 8: PgUp in the second question goes back to the first, as it was
    left (its choice), and the first is answered again; the reply carries the new
    answer. PgUp on the first question does nothing; a text question keeps its text
    when gone back to."""

    async def scenario(h: Harness) -> None:
        dialog = _form(
            h,
            Question(text="Which colour?", options=["red", "blue"]),
            Question(text="Name?"),
            Question(text="Which size?", options=["small", "large"]),
        )
        await h.armed()
        await h.press(PAGE_UP)  # nothing before the first question
        await h.until(lambda: h.keys_done >= 1, "PgUp handled")
        assert dialog.index == 0
        await h.press("1")
        await h.until(lambda: dialog.index == 1, "the second question")
        await h.press("ada" + ENTER)
        await h.until(lambda: dialog.index == 2, "the third question")
        await h.press(PAGE_UP)
        await h.until(lambda: dialog.index == 1, "back to the second")
        text = dialog.field
        assert isinstance(text, TextField)
        assert text.area.text == "ada"
        await h.press(PAGE_UP)
        await h.until(lambda: dialog.index == 0, "back to the first")
        await h.until(lambda: h.app.application.layout.has_focus(dialog.element), "its menu")
        await h.press(DOWN + ENTER)  # blue
        await h.until(lambda: dialog.index == 1, "the second again")
        await h.press(" lovelace" + ENTER)
        await h.until(lambda: dialog.index == 2, "the third again")
        await h.press("2")
        await h.until(h.sent_any, "the reply")
        assert h.frames() == [Reply(id="q1", answers=["blue", "ada lovelace", "large"])]

    run_app(scenario)


def test_esc_outside_the_other_line_still_opens_the_stop_popup() -> None:
    """R47: in a closed question's menu Esc opens the stop popup as before."""

    async def scenario(h: Harness) -> None:
        _form(h, Question(text="Which colour?", options=["red", "blue"]))
        await h.armed()
        await h.esc()
        assert h.state.popup is not None
        assert h.frames() == []
        await h.press(ESC)

    run_app(scenario)
