"""engine/messages.py: the messages the engine writes for the model, tied to the SPEC
(R11, R12, R24, R26, R28-R30, R37).

The SPEC fixes the headers word for word; the sentences below are quoted from it, and
the headers are read out of their backquotes, so a change on either side fails here.
A second test makes sure no other engine module spells a header itself: they all
import them from `agentrio.engine.messages`.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import attrs

from agentrio.engine import messages
from agentrio.engine.messages import (
    ASK_RESUME_HEADER,
    CONFLICT_RUNNING,
    ELIDED_SENTENCE,
    FOLLOWUP_HEADER,
    INTERRUPTED_RESUME_HEADER,
    REPORT_FINISHED_HEADER,
    REPORT_UPDATE_HEADER,
    followup_message,
    leg_finished_report,
    leg_stopped_report,
    leg_update_report,
    legs_started,
    resume_message,
    resume_said,
)
from agentrio.engine.models.base import Message
from agentrio.engine.snapshot import (
    QA,
    RESULT_LIMIT,
    CompletedCall,
    InterruptedCall,
    Snapshot,
    make_snapshot,
)
from agentrio.protocol.events import Question

ENGINE = Path(__file__).resolve().parents[2] / "engine"

#: SPEC R12, second sentence, as written there.
SPEC_R12 = (
    "The resume message is structured (objective, completed tool results, interrupted "
    "calls, previous and current answers, remaining steps) and starts with "
    "`[Resumed Task — ask_user response received]` or "
    "`[Resumed Task — interrupted execution recovered]`."
)
#: SPEC R26, the "running" and "ended" cases, as written there.
SPEC_R26_RUNNING = (
    "running: added at the start of its next turn as a message beginning "
    "`[Background Report — background task finished]` (or `… update]` for watch reports)"
)
SPEC_R26_ENDED = (
    "then the job runs **once** as a new task whose hidden input starts "
    "`[Resumed Task — background group finished]` and carries objective, next, every "
    "report and the starting task's hash"
)
#: SPEC R37, as written there.
SPEC_R37 = (
    "A resume that finds the task already claimed by a run fails with "
    "`[Conflict] pending task: running` (HTTP 409)."
)


def _quoted(sentence: str) -> list[str]:
    return re.findall(r"`([^`]+)`", sentence)


@attrs.frozen
class _Leg:
    """A leg as reports see it (`messages.LegRecord`)."""

    state: str
    result: str
    reports: list[str] = attrs.field(factory=list)

    def describe(self) -> str:
        return messages.leg_description("cmd_0123abcd", "cmd", "make test")

    def kept_reports(self) -> list[str]:
        return list(self.reports)


def test_headers_are_the_spec_texts() -> None:
    """R12, R26, R37: each header is the SPEC's text, character for character."""
    assert _quoted(SPEC_R12) == [ASK_RESUME_HEADER, INTERRUPTED_RESUME_HEADER]
    finished, update_tail = _quoted(SPEC_R26_RUNNING)
    assert finished == REPORT_FINISHED_HEADER
    assert update_tail == "… update]"
    assert REPORT_UPDATE_HEADER == finished.removesuffix("finished]") + "update]"
    assert _quoted(SPEC_R26_ENDED) == [FOLLOWUP_HEADER]
    assert _quoted(SPEC_R37) == [CONFLICT_RUNNING]
    assert all("\u2014" in header for header in (ASK_RESUME_HEADER, FOLLOWUP_HEADER))


def test_every_message_starts_with_its_header() -> None:
    """R12, R26: what the engine writes starts with the header the SPEC names."""
    snap = Snapshot(objective="o", messages=[])
    leg = _Leg(state="finished", result="exit 0")
    assert resume_message(snap, answers=["x"], reason="ask_user").startswith(ASK_RESUME_HEADER)
    assert resume_message(snap, answers=None, reason="interrupted").startswith(
        INTERRUPTED_RESUME_HEADER
    )
    assert leg_finished_report("job_1", "o", leg).startswith(REPORT_FINISHED_HEADER + "\n")
    assert leg_stopped_report("job_1", "o", leg).startswith(REPORT_FINISHED_HEADER + "\n")
    update = leg_update_report("job_1", "o", leg, hit_line="error: x", note="", output="x")
    assert update.startswith(REPORT_UPDATE_HEADER + "\n")
    follow = followup_message(objective="o", next_step="n", task_hash="f" * 32, legs=[leg])
    assert follow.startswith(FOLLOWUP_HEADER + "\n")


def _spelled_headers(path: Path) -> list[str]:
    """String constants (docstrings aside) in ``path`` that spell a message header."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    }
    starts = ("[Resumed Task —", "[Background Report —", "[Conflict] pending task")
    return [
        f"{path.relative_to(ENGINE.parent)}:{node.lineno}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
        and any(start in node.value for start in starts)
    ]


def test_no_other_engine_module_spells_a_header() -> None:
    """R12, R26, R37: engine/messages.py is the one place the headers are written;
    every other module (the offline model reading them included) imports them."""
    found = [
        where
        for path in sorted(ENGINE.rglob("*.py"))
        if path.name != "messages.py" or path.parent != ENGINE
        for where in _spelled_headers(path)
    ]
    assert found == []


# -- reports and follow-ups (R24, R26, R28-R30) -------------------------------------------


def test_reports_name_job_leg_and_result() -> None:
    """R26: a finished leg's report names its job, objective, leg and result; an update
    carries the matched line, an unchecked note (R29) and the latest output (R28)."""
    leg = _Leg(state="failed", result="exit 2\nboom")
    assert leg_finished_report("job_1", "Build", leg) == (
        f"{REPORT_FINISHED_HEADER}\nJob job_1: Build\n"
        "Leg cmd_0123abcd (command: make test) failed.\nexit 2\nboom"
    )
    update = leg_update_report(
        "job_1", "Build", leg, hit_line="error: x", note="decision check failed", output="tail"
    )
    assert update == (
        f"{REPORT_UPDATE_HEADER}\nJob job_1: Build\n"
        "Leg cmd_0123abcd (command: make test) is still running; a line matched an error "
        "keyword: error: x\nNote: decision check failed; reported unchecked.\n"
        "Latest output:\ntail"
    )


def test_followup_carries_objective_next_hash_and_every_report() -> None:
    """R26: the follow-up's input holds objective, next, the starting task's hash (for
    chat_history mode=read) and every report and result of every leg, in leg order."""
    legs = [_Leg(state="finished", result="exit 0", reports=["update one"])]
    text = followup_message(objective="Build", next_step="Tell me", task_hash="a" * 32, legs=legs)
    assert text == (
        f"{FOLLOWUP_HEADER}\n\n## Objective\nBuild\n\n## Next\nTell me\n\n"
        f"## Starting task\n{'a' * 32} (its full record: chat_history with mode=read and "
        f"task_hash={'a' * 32})\n\n## Background reports\n"
        "Leg cmd_0123abcd (command: make test): finished\nupdate:\nupdate one\nresult:\nexit 0"
    )


def test_legs_started_says_where_reports_come() -> None:
    """R20-R22, R26: the tool result lists the legs (queued ones marked) and names the
    report header the model will see."""
    text = legs_started("job_1", [("cmd_1", "make", False), ("cmd_2", "make docs", True)])
    assert text.splitlines()[:3] == [
        "Started 2 background leg(s) in job job_1:",
        "- cmd_1: make",
        "- cmd_2: make docs (queued: the session's leg limit is reached)",
    ]
    assert "starting with [Background Report — …];" in text


def test_subagent_needs_approval_starts_with_the_marker() -> None:
    """R30: a sub-agent's skipped call starts with the marker its leg's report looks for."""
    assert messages.subagent_needs_approval("rm x").startswith(messages.NEEDS_APPROVAL)


# -- resume_message (R11, R12) ------------------------------------------------------------
def test_resume_message_headers_exact() -> None:
    """R12: the first line is exactly one of the two headers (with an em dash)."""
    snap = Snapshot(objective="o", messages=[])
    asked = resume_message(snap, answers=["x"], reason="ask_user")
    recovered = resume_message(snap, answers=None, reason="interrupted")
    assert asked.splitlines()[0] == "[Resumed Task \u2014 ask_user response received]"
    assert recovered.splitlines()[0] == "[Resumed Task \u2014 interrupted execution recovered]"


def test_resume_message_full_structure() -> None:
    """R12: sections in order, answers paired with their questions, interrupted calls
    flagged for repetition, reports and remaining steps carried."""
    snap = Snapshot(
        objective="deploy the site",
        messages=[],
        completed=[
            CompletedCall(
                call_id="c1", tool_name="run_command", args={"cmd": "make"}, output="built"
            )
        ],
        interrupted=[InterruptedCall(call_id="c2", tool_name="run_command", args={"cmd": "rsync"})],
        questions=[
            Question(text="Which host?"),
            Question(text="Token?", secret=True),
            Question(text="Notify?"),
        ],
        previous_answers=[QA(question="Branch?", answer="main")],
        remaining_steps="upload, then notify",
        reports=["report one", "report two"],
    )
    text = resume_message(snap, answers=["web1", "s3cr3t"], reason="ask_user")
    assert text == (
        "[Resumed Task — ask_user response received]\n\n"
        "## Objective\ndeploy the site\n\n"
        "## Completed tool results\nThese calls ran to completion; their results stand.\n\n"
        '1. run_command (call c1)\nargs: {"cmd":"make"}\noutput:\nbuilt\n\n'
        "## Interrupted calls\nThese calls did not complete; their effects are unknown. "
        "Repeat a call if it is still needed.\n\n"
        '1. run_command (call c2)\nargs: {"cmd":"rsync"}\n\n'
        "## Previous answers\nQ: Branch?\nA: main\n\n"
        "## Current answers\nQ: Which host?\nA: web1\n\n"
        "Q: Token?\nA: (a secret value was given; it is not shown)\n\n"
        "Q: Notify?\nA: (no answer given)\n\n"
        "## Background reports\nreport one\n\nreport two\n\n"
        "## Remaining steps\nupload, then notify"
    )
    assert "s3cr3t" not in text
    assert ELIDED_SENTENCE not in text


def test_resume_message_leaves_empty_sections_out() -> None:
    """R12: sections with nothing in them are not written; extra answers are kept."""
    snap = Snapshot(objective="o", messages=[])
    assert resume_message(snap, answers=None, reason="interrupted") == (
        "[Resumed Task — interrupted execution recovered]\n\n## Objective\no"
    )
    assert resume_message(snap, answers=["late"], reason="ask_user") == (
        "[Resumed Task — ask_user response received]\n\n## Objective\no\n\n"
        "## Current answers\nAdditional answer: late"
    )


def test_resume_message_elided_sentence() -> None:
    """R11: the model is told to fetch elided values again when (and only when) the
    snapshot holds one, wherever it is (here: only inside a tool message)."""
    clamped = make_snapshot(
        "o", [Message(role="tool", content="q" * (RESULT_LIMIT + 1), tool_call_id="c")]
    )
    text = resume_message(clamped, answers=None, reason="interrupted")
    assert text.endswith("\n\n" + ELIDED_SENTENCE)
    assert ELIDED_SENTENCE == (
        "Some values above were elided; if an elided value matters, fetch it again by "
        "repeating the call — do not guess it."
    )
    whole = make_snapshot("o", [Message(role="tool", content="q" * RESULT_LIMIT, tool_call_id="c")])
    assert ELIDED_SENTENCE not in resume_message(whole, answers=None, reason="interrupted")


def test_resume_said_is_what_the_person_did() -> None:
    """R12, R73: a resumed run's ``task_started.said``: the answers joined by " | ", a
    secret answer masked, or "resumed" when none were given."""
    questions = [Question(text="Where?", options=["a", "b"]), Question(text="Key", secret=True)]
    assert resume_said(questions, ["b", "sk-123"]) == "b | (secret)"
    assert resume_said(questions, None) == "resumed"
    assert resume_said([], []) == "resumed"
