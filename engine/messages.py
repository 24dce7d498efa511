"""Every message the engine writes for the model or a person to read, in one place.

The engine talks to the model through a few messages of its own: the input of a
resumed task (R12), a background report (R26), the input of a job's follow-up task
(R26), and the fixed texts that other parts recognise by their start -- the offline
model (`agentrio.engine.models.builtin`) reads the headers to know what it is answering, the
front-ends show ``[Conflict] pending task: running`` as it is (R37). The SPEC fixes
the headers word for word, so they are defined here once and imported wherever they
are written or read; ``tests/engine/test_messages.py`` ties them to the SPEC's texts
and fails when a header is spelled anywhere else in the engine.

What is *not* here: a tool's own result text (``exit 0``, ``denied: …``) stays with its
tool, where the decision it reports is made.

Each message is a pure function of plain values, so it is tested without an engine.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Final, Literal, Protocol

from agentrio.engine.snapshot import Snapshot, has_elided
from agentrio.protocol.events import Question

__all__ = [
    "ASK_RESUME_HEADER",
    "CANCELED_REPLY",
    "CONFLICT_RUNNING",
    "ELIDED_SENTENCE",
    "FOLLOWUP_HEADER",
    "INTERRUPTED_RESUME_HEADER",
    "NEEDS_APPROVAL",
    "PROPOSALS_TITLE",
    "REPORT_FINISHED_HEADER",
    "REPORT_UPDATE_HEADER",
    "SUBAGENTS_RESULT_HEADER",
    "SUBAGENTS_TOOL",
    "SUBAGENT_CANNOT_PARK",
    "LegRecord",
    "followup_message",
    "leg_description",
    "leg_finished_report",
    "leg_stopped_report",
    "leg_update_report",
    "legs_started",
    "proposals_label",
    "proposals_section",
    "reoffer_label",
    "resume_message",
    "resume_said",
    "subagent_label",
    "subagent_needs_approval",
    "subagent_report",
    "subagent_result",
    "subagent_section",
    "subagent_system_prompt",
]

#: The first line of a resumed task's input when it resumes with answers (R12).
ASK_RESUME_HEADER: Final = "[Resumed Task — ask_user response received]"
#: The first line of a resumed task's input when it was interrupted (R12).
INTERRUPTED_RESUME_HEADER: Final = "[Resumed Task — interrupted execution recovered]"
#: What the confirmation of a call met again after a stop says (issue 34 item 5): the
#: call was running when its task stopped, so some of it may have happened already.
INTERRUPTED_CALL_NOTE: Final = (
    "this call was already running when the task stopped: it may have partly run. "
    "Approve only if running it again is safe."
)
#: The first line of a job's follow-up task's hidden input (R26).
FOLLOWUP_HEADER: Final = "[Resumed Task — background group finished]"
#: The first line of a report of a leg that ended (R26).
REPORT_FINISHED_HEADER: Final = "[Background Report — background task finished]"
#: The first line of a watcher's report while a leg still runs (R26, R28).
REPORT_UPDATE_HEADER: Final = "[Background Report — background task update]"
#: The last line of a resume message whose snapshot lost values to clamping (R11).
ELIDED_SENTENCE: Final = (
    "Some values above were elided; if an elided value matters, fetch it again by "
    "repeating the call — do not guess it."
)
#: The message of every lost resume claim, word for word (R37).
CONFLICT_RUNNING: Final = "[Conflict] pending task: running"
#: How the history record of a task cancelled by the user ends (R40).
CANCELED_REPLY: Final = "[Canceled]"
#: How the skipped call of a background sub-agent starts (R30); its leg's report lists
#: the calls whose result starts ``not run: needs approval:``.
NEEDS_APPROVAL: Final = "needs approval:"

#: The title of the follow-up's section on the commands its sub-agents could not run,
#: offered to the user in one confirmation (R84).
PROPOSALS_TITLE: Final = "Commands offered for approval"

#: The common start of both report headers, as the legs' tool result quotes it.
_REPORT_PREFIX: Final = "[Background Report — …]"


# ------------------------------------------------------------------ resume (R12)


def _args_text(args: dict[str, Any]) -> str:
    return json.dumps(args, ensure_ascii=False, separators=(",", ":"))


def _answer_text(question: Question, answer: str) -> str:
    # A secret answer must not reach the model's messages: they end up in snapshots
    # and history (R73). The model learns only that one was given.
    return "(a secret value was given; it is not shown)" if question.secret else answer


def resume_message(
    snapshot: Snapshot,
    *,
    answers: Sequence[str] | None,
    reason: Literal["ask_user", "interrupted"],
) -> str:
    """The hidden input that starts the resumed turn (R12).

    It begins with `ASK_RESUME_HEADER` or `INTERRUPTED_RESUME_HEADER`, then ``## ``
    sections in this order, each left out when it has nothing in it: Objective,
    Completed tool results, Interrupted calls, Previous answers, Current answers,
    Background reports, Remaining steps. Current answers pair ``snapshot.questions[i]``
    with ``answers[i]``; a question with no answer says so, and answers beyond the
    questions are listed as additional. When the snapshot holds any elided value, it
    ends with `ELIDED_SENTENCE` (R11).
    """
    header = ASK_RESUME_HEADER if reason == "ask_user" else INTERRUPTED_RESUME_HEADER
    sections: list[str] = [header]

    def section(title: str, body: str) -> None:
        sections.append(f"## {title}\n{body}")

    if snapshot.objective:
        section("Objective", snapshot.objective)
    if snapshot.completed:
        items = [
            f"{i}. {c.tool_name} (call {c.call_id})\n"
            f"args: {_args_text(c.args)}\n"
            f"output:\n{c.output}"
            for i, c in enumerate(snapshot.completed, 1)
        ]
        section(
            "Completed tool results",
            "These calls ran to completion; their results stand.\n\n" + "\n\n".join(items),
        )
    if snapshot.interrupted:
        items = [
            f"{i}. {c.tool_name} (call {c.call_id})\nargs: {_args_text(c.args)}"
            for i, c in enumerate(snapshot.interrupted, 1)
        ]
        note = (
            _SUBAGENTS_INTERRUPTED
            if any(c.tool_name == SUBAGENTS_TOOL for c in snapshot.interrupted)
            else ""
        )
        section(
            "Interrupted calls",
            "These calls did not complete; their effects are unknown. Repeat a call if it "
            f"is still needed.{note}\n\n" + "\n\n".join(items),
        )
    if snapshot.previous_answers:
        section(
            "Previous answers",
            "\n\n".join(f"Q: {qa.question}\nA: {qa.answer}" for qa in snapshot.previous_answers),
        )
    if answers is not None and (answers or snapshot.questions):
        pairs: list[str] = []
        for i, question in enumerate(snapshot.questions):
            answer = _answer_text(question, answers[i]) if i < len(answers) else "(no answer given)"
            pairs.append(f"Q: {question.text}\nA: {answer}")
        pairs.extend(f"Additional answer: {extra}" for extra in answers[len(snapshot.questions) :])
        section("Current answers", "\n\n".join(pairs))
    if snapshot.reports:
        section("Background reports", "\n\n".join(snapshot.reports))
    if snapshot.remaining_steps:
        section("Remaining steps", snapshot.remaining_steps)
    if has_elided(snapshot):
        sections.append(ELIDED_SENTENCE)
    return "\n\n".join(sections)


# ------------------------------------------------------------------ background (R26)


class LegRecord(Protocol):
    """What a report or a follow-up says about one leg (`agentrio.engine.background.Leg` is one)."""

    @property
    def state(self) -> str: ...

    @property
    def result(self) -> str: ...

    def describe(self) -> str: ...

    def kept_reports(self) -> list[str]: ...


def leg_description(leg_id: str, kind: Literal["cmd", "sub"], label: str) -> str:
    """How reports name a leg: ``cmd_0123abcd (command: make test)``."""
    return f"{leg_id} ({'command' if kind == 'cmd' else 'sub-agent'}: {label})"


def leg_finished_report(job_id: str, objective: str, leg: LegRecord) -> str:
    """The report of a leg that ended on its own, with its clamped result (R24, R26)."""
    return (
        f"{REPORT_FINISHED_HEADER}\nJob {job_id}: {objective}\n"
        f"Leg {leg.describe()} {leg.state}.\n{leg.result}"
    )


def leg_stopped_report(job_id: str, objective: str, leg: LegRecord) -> str:
    """The report of a leg its task's pause stopped (R44): kept for the resume."""
    return (
        f"{REPORT_FINISHED_HEADER}\nJob {job_id}: {objective}\n"
        f"Leg {leg.describe()} was stopped when the task was paused; it did "
        "not finish. Start it again if it is still needed."
    )


def leg_update_report(
    job_id: str, objective: str, leg: LegRecord, *, hit_line: str, note: str, output: str
) -> str:
    """A watcher's report while the leg runs on (R28); ``note`` says why it went out
    unchecked (R29), empty when it was checked or there is no check."""
    noted = f"\nNote: {note}; reported unchecked." if note else ""
    return (
        f"{REPORT_UPDATE_HEADER}\nJob {job_id}: {objective}\n"
        f"Leg {leg.describe()} is still running; a line matched an error keyword: "
        f"{hit_line}{noted}\nLatest output:\n{output}"
    )


def followup_message(
    *, objective: str, next_step: str, task_hash: str, legs: Sequence[LegRecord]
) -> str:
    """The hidden input of a job's follow-up task (R26): header, objective, next, the
    starting task's hash and every report of every leg, in leg order."""
    blocks: list[str] = []
    for leg in legs:
        parts = [f"Leg {leg.describe()}: {leg.state}"]
        parts.extend(f"update:\n{report}" for report in leg.kept_reports())
        if leg.result:
            parts.append(f"result:\n{leg.result}")
        blocks.append("\n".join(parts))
    sections = [FOLLOWUP_HEADER]
    if objective:
        sections.append(f"## Objective\n{objective}")
    if next_step:
        sections.append(f"## Next\n{next_step}")
    sections.append(
        f"## Starting task\n{task_hash} (its full record: chat_history with mode=read "
        f"and task_hash={task_hash})"
    )
    sections.append("## Background reports\n" + "\n\n".join(blocks))
    return "\n\n".join(sections)


def legs_started(job_id: str, legs: Sequence[tuple[str, str, bool]]) -> str:
    """The result of a background tool call: the legs ``(id, label, queued)`` it
    started in job ``job_id``, and where their reports will come (R20-R22, R26)."""
    lines = [f"Started {len(legs)} background leg(s) in job {job_id}:"]
    lines.extend(
        f"- {leg_id}: {label}" + (" (queued: the session's leg limit is reached)" if queued else "")
        for leg_id, label, queued in legs
    )
    lines.append(
        "They keep running after this task ends. Their reports arrive as messages "
        f"starting with {_REPORT_PREFIX}; if this task has ended by then, the "
        "job runs once more as a new task with every report."
    )
    return "\n".join(lines)


def subagent_needs_approval(shown: str) -> str:
    """Why a background sub-agent's call did not run (R30); starts `NEEDS_APPROVAL`."""
    return (
        f"{NEEDS_APPROVAL} {shown!r} — background sub-agents never ask for "
        "confirmation, so it was not run"
    )


def subagent_report(
    *,
    leg_id: str,
    objective: str,
    child_session: str,
    child_task: str,
    status: str,
    final: str,
    needs: Sequence[str],
    record: Sequence[str],
) -> str:
    """A sub-agent's saved report file (R30): what it was asked, how it ended, its
    final answer, the calls that still need approval, and its whole action record."""
    return "\n\n".join(
        part
        for part in (
            f"# Sub-agent report {leg_id}",
            f"Objective: {objective}\nChild session: {child_session}\n"
            f"Child task: {child_task}\nStatus: {status}",
            f"## Final answer\n{final or '(none)'}",
            "## Still needs approval\n" + "\n".join(needs) if needs else "",
            "## Action record\n" + "\n".join(record),
        )
        if part
    )


def subagent_result(*, path: str, status: str, error: str, final: str, needs: Sequence[str]) -> str:
    """A sub-agent leg's result, as its report carries it (R30): where the report file
    is, how the sub-agent ended, and which calls still need approval."""
    lines = [f"report saved to {path}", f"sub-agent {status}"]
    if error:
        lines.append(f"error: {error}")
    if final:
        lines.append(f"final answer:\n{final}")
    if needs:
        lines.append(
            "still needs approval (not run: background legs never ask for "
            "confirmation; once the job's legs are done its follow-up offers the "
            "commands to the user in one confirmation, so do not propose them "
            "again):\n" + "\n".join(needs)
        )
    return "\n".join(lines)


def proposals_label(job_id: str, legs: Sequence[tuple[str, str]]) -> str:
    """Whose commands a follow-up's ``run_commands`` confirmation offers (R84), shown
    as its ``subagent`` label: ``background sub-agent sub_…: <objective>`` for one
    leg ``(id, objective)``, else the legs' ids and the job."""
    if len(legs) == 1:
        leg_id, objective = legs[0]
        return f"background sub-agent {leg_id}: {_one_line(objective)}"
    return f"background sub-agents {', '.join(leg_id for leg_id, _ in legs)} of job {job_id}"


def reoffer_label(job_id: str) -> str:
    """The ``subagent`` label of an offer made again when its follow-up is resumed
    (R84): the legs are gone by then, the job's id is kept in the call's id."""
    return f"background sub-agents of job {job_id} (offered again on resume)"


def proposals_section(result: str, *, offered: int, left_out: int) -> str:
    """The follow-up's section on its sub-agents' commands (R84): that ``offered``
    commands were put to the user in one confirmation, and its result (each command's
    end, or why none ran); ``left_out`` commands beyond the limit are only named as
    left out."""
    lines = [
        f"## {PROPOSALS_TITLE}",
        f"The {offered} command(s) the sub-agents could not run were offered to the user "
        "in one confirmation (run_commands). Its result:",
        result,
    ]
    if left_out:
        lines.append(
            f"{left_out} more command(s) were not offered (too many for one "
            "confirmation); call run_command for each one still needed."
        )
    return "\n".join(lines)


# ------------------------------------------------------------------ in-process sub-agents (R80)

#: The foreground tool that runs in-process sub-agents (R80).
SUBAGENTS_TOOL: Final = "subagents"
#: The first line of a ``subagents`` call's result.
SUBAGENTS_RESULT_HEADER: Final = "[Sub-agent results]"
#: What a sub-agent's ``ask_user`` becomes when nobody can answer inline: a sub-agent
#: cannot park its parent (R11 parks a whole task, and the parent is still running).
SUBAGENT_CANNOT_PARK: Final = (
    "no front-end can answer this question now, and a sub-agent cannot park its "
    "parent task to wait for one; decide without the answer, or put the question in "
    "your final answer"
)
#: Added to the resume message's interrupted calls when one was ``subagents``.
_SUBAGENTS_INTERRUPTED: Final = (
    " An interrupted subagents call stopped all of its sub-agents: their partial work "
    "is not kept and the confirmations they waited on were withdrawn, so call "
    "subagents again with the objectives still needed."
)
_LABEL_OBJECTIVE_CHARS: Final = 200


def subagent_label(index: int, count: int, objective: str) -> str:
    """How a sub-agent is named on its asks and ``confirm`` events (R80):
    ``sub-agent 2/3: <objective>``, the objective on one line, cut at 200 characters."""
    return f"sub-agent {index + 1}/{count}: {_one_line(objective)}"


def _one_line(objective: str) -> str:
    """An objective on one line, cut at 200 characters (a label's part)."""
    flat = " ".join(objective.split())
    if len(flat) > _LABEL_OBJECTIVE_CHARS:
        flat = flat[: _LABEL_OBJECTIVE_CHARS - 1] + "…"
    return flat


def subagent_system_prompt(label: str) -> str:
    """The system message of an in-process sub-agent: who it is and what it may not do
    (R20, R80); its objective follows as its only user message."""
    return (
        f"You are {label}, one of several sub-agents started by another agent's "
        "subagents call. Work on your objective alone and end with a final answer: it "
        "is returned to that agent, not shown to the user. Your confirmations and "
        "questions reach the user labelled with your name. You cannot start background "
        "work or further sub-agents: your result goes to the agent that started you."
    )


def subagent_section(
    *, label: str, status: str, error: str, final: str, calls: Sequence[str]
) -> str:
    """One sub-agent's part of the ``subagents`` result: its label and how it ended,
    the calls it made (one line each), and its final answer."""
    lines = [f"## {label}", f"status: {status}"]
    if error:
        lines.append(f"error: {error}")
    if calls:
        lines.append("calls:\n" + "\n".join(f"- {call}" for call in calls))
    lines.append(f"final answer:\n{final}" if final else "final answer: (none)")
    return "\n".join(lines)


def resume_said(questions: Sequence[Question], answers: Sequence[str] | None) -> str:
    """What the person did to resume a task, in the words front-ends show for it
    (``task_started.said``): the answers, a secret one as ``(secret)`` (R73), or
    ``resumed`` when none were given."""
    if not answers:
        return "resumed"
    secret = [q.secret for q in questions]
    return " | ".join(
        "(secret)" if index < len(secret) and secret[index] else answer
        for index, answer in enumerate(answers)
    )
