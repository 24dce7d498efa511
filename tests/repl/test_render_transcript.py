"""The transcript (repl/transcript.py through `ReplState`): each printed line belongs to
one task, notices never cut a line, model text is rendered Markdown, background output
is written for the person (issue 19)."""

from __future__ import annotations

import pytest

from agentrio.protocol.events import (
    Done,
    JobSettled,
    LegFinished,
    LegReport,
    LegStarted,
    StartedLeg,
    TaskStarted,
    Text,
    ToolCall,
    ToolDetails,
    ToolResult,
)
from agentrio.repl.markdown import BOLD, CODE_BLOCK
from agentrio.repl.render import line_fragments, line_text
from agentrio.repl.state import ReplState
from tests.repl.helpers import accepted, connected_state, done, event

OTHER = "ab" * 16
FOLLOWUP = "cd" * 16


def start(state: ReplState, sent: list[object]) -> str:
    state.submit("bg: echo one")
    request_id: str = sent.pop().request_id  # type: ignore[attr-defined]
    state.handle(accepted(request_id))
    return request_id


def texts(state: ReplState, since: int = 0) -> list[str]:
    return [line_text(line) for line in state.output[since:]]


def leg_finished(seq: int, leg: str = "cmd_0000000a") -> LegFinished:
    return LegFinished(seq=seq, at=0.0, job_id="job_1", leg_id=leg, status="finished", result="")


def test_a_notice_never_cuts_a_runs_unfinished_line() -> None:
    """Issue 19: a leg's end arriving while the run streams a line is printed above;
    the line stays whole (live until its newline), never split around the notice."""
    state, sent = connected_state()
    rid = start(state, sent)
    mark = len(state.output)
    state.handle(event(Text(seq=2, at=0.0, text="Started the leg, and it")))
    state.handle(event(leg_finished(3)))
    state.handle(event(JobSettled(seq=4, at=0.0, job_id="job_1", followup_task=None)))
    assert state.runs[rid].partial == "Started the leg, and it"
    state.handle(event(Text(seq=5, at=0.0, text=" runs.\nDone.")))
    state.handle(event(Done(seq=6, at=0.0, text="Started the leg, and it runs.\nDone.")))
    state.handle(done(rid))
    assert texts(state, mark) == [
        "⧗ background cmd_0000000a finished",
        "Started the leg, and it runs.",
        "Done.",
    ]


def test_a_turn_given_by_a_report_starts_its_own_line() -> None:
    """Issue 19: a report gives the run one more turn; its text, streamed straight after
    the earlier turn's last line, is printed on a line of its own."""
    state, sent = connected_state()
    rid = start(state, sent)
    mark = len(state.output)
    state.handle(event(Text(seq=2, at=0.0, text="Line one.\nThat is all.")))
    state.handle(event(leg_finished(3)))
    state.handle(event(Text(seq=4, at=0.0, text="Noted the report.")))
    state.handle(event(Done(seq=5, at=0.0, text="Noted the report.")))
    state.handle(done(rid))
    assert texts(state, mark) == [
        "Line one.",
        "⧗ background cmd_0000000a finished",
        "That is all.",
        "Noted the report.",
    ]


@pytest.mark.parametrize("settled_at", [0, 1, 2, 3])
def test_a_follow_up_answer_prints_the_same_whenever_its_job_settles(settled_at: int) -> None:
    """Issue 19: a follow-up's answer prints as one block under one header naming no
    id, and the job's settling (an event of another task, arriving before, during or
    after the answer) adds nothing, so the transcript reads the same in every order;
    a notice arriving while the answer streams goes above it."""
    state, _ = connected_state()
    mark = len(state.output)
    follow_up = [
        TaskStarted(seq=1, at=0.0, input="[Resumed …]", origin="cli-"),
        Text(seq=2, at=0.0, text="The work finished.\nLeg cmd_0"),
        Text(seq=3, at=0.0, text="000000a: exit 0"),
        Done(seq=4, at=0.0, text="x"),
    ]
    settled = JobSettled(seq=9, at=0.0, job_id="job_1", followup_task=FOLLOWUP)
    for index, step in enumerate(follow_up):
        if index == settled_at + 1:
            state.handle(event(settled, OTHER))
        if index == 2:
            state.handle(event(leg_finished(5, "cmd_0000000b"), OTHER))
        state.handle(event(step, FOLLOWUP))
    if settled_at == 3:
        state.handle(event(settled, OTHER))
    assert texts(state, mark) == [
        "⧗ background cmd_0000000b finished",
        "⧗ follow-up on the background work:",
        "The work finished.",
        "Leg cmd_0000000a: exit 0",
    ]


def test_late_leg_events_of_an_ended_run_carry_no_task_tag() -> None:
    """Issue 19: a leg report or end after the run ended names the leg, not the task."""
    state, _ = connected_state()
    mark = len(state.output)
    state.handle(event(LegReport(seq=5, at=0.0, job_id="job_1", leg_id="cmd_0000000a", text="hi")))
    state.handle(event(leg_finished(6), OTHER))
    assert texts(state, mark) == [
        "⧗ report from cmd_0000000a:",
        "  hi",
        "⧗ background cmd_0000000a finished",
    ]
    assert not any(text.startswith("[") for text in texts(state))


def test_a_background_start_is_announced_once() -> None:
    """Issue 19: a background call shows its commands one per line (not its JSON with
    the model's ``objective``/``next`` notes), each leg's start is announced once, and
    the tool's result, written for the model (where reports arrive), adds nothing."""
    state, sent = connected_state()
    start(state, sent)
    mark = len(state.output)
    args = {"commands": ["echo one", "echo two"], "objective": "o", "next": "n"}
    state.handle(
        event(ToolCall(seq=2, at=0.0, call_id="c", tool_name="background_command", args=args))
    )
    for seq, leg, label in ((3, "cmd_0000000a", "echo one"), (4, "cmd_0000000b", "echo two")):
        state.handle(
            event(
                LegStarted(seq=seq, at=0.0, job_id="job_1", leg_id=leg, label=label, queued=False)
            )
        )
    output = (
        "Started 2 background leg(s) in job job_1:\n- cmd_0000000a: echo one\n"
        "- cmd_0000000b: echo two\nThey keep running after this task ends. Their reports "
        "arrive as messages starting with [Background Report — …]; …"
    )
    state.handle(
        event(
            ToolResult(
                seq=5,
                at=0.0,
                call_id="c",
                tool_name="background_command",
                ok=True,
                output=output,
                details=ToolDetails(
                    job_id="job_1",
                    legs=[
                        StartedLeg(leg_id="cmd_0000000a", label="echo one"),
                        StartedLeg(leg_id="cmd_0000000b", label="echo two"),
                    ],
                ),
            )
        )
    )
    assert texts(state, mark) == [
        "⚙ background_command:",
        "    echo one",
        "    echo two",
        "⧗ background cmd_0000000a started: echo one",
        "⧗ background cmd_0000000b started: echo two",
    ]


def test_model_text_is_rendered_markdown() -> None:
    """Issue 19: streamed text is Markdown: a fence opened in one piece colours the
    lines of the next; styles reach prompt_toolkit as fragments."""
    state, sent = connected_state()
    rid = start(state, sent)
    mark = len(state.output)
    for seq, piece in enumerate(["Here is **it**:\n```py", "thon\nx = 1\n", "```\nok"], start=2):
        state.handle(event(Text(seq=seq, at=0.0, text=piece)))
    state.handle(done(rid))
    lines = state.output[mark:]
    shown = [line_text(line) for line in lines]
    assert shown == ["Here is it:", "─── python", "x = 1", "───", "ok"]
    assert (BOLD, "it") in lines[0][1]
    assert all(style.startswith(CODE_BLOCK) for style, _ in lines[2][1])
    assert ("", "ok") == lines[-1]
    fragments = line_fragments(lines)
    assert (BOLD, "it") in fragments
    assert fragments.count(("", "\n")) == len(lines)


def test_a_run_cut_inside_a_fence_prints_its_last_line_as_code() -> None:
    """Issue 19: a half-streamed code block still renders as code when the run ends."""
    state, sent = connected_state()
    rid = start(state, sent)
    mark = len(state.output)
    state.handle(event(Text(seq=2, at=0.0, text="```\nrm -rf **x**")))
    state.handle(done(rid, "canceled"))
    assert texts(state, mark)[:2] == ["───", "rm -rf **x**"]
