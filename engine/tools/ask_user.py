"""The ``ask_user`` tool: inline for REPL tasks, parked for everything else (R10–R13).

From a ``cli-`` task with a connected window the question goes through the registry
and the same run continues with the answer. From any other origin — or a ``cli-`` task
whose window is gone — the tool asks the loop to *park*: the turn's other calls run,
a snapshot is written, the run ends, and an answer resumes it as a new turn.
A front-end that cannot ask anyone (``agentrio exec``) may decline the question with
a reason (a reply with ``approve`` false): the model reads that as the call's result.
"""

from __future__ import annotations

from typing import Any

from agentrio.engine.asks import AskReply
from agentrio.engine.models.base import ToolCallRequest, ToolSpec
from agentrio.engine.snapshot import QA
from agentrio.engine.tools.base import (
    Reach,
    Refused,
    ServiceTool,
    ToolContext,
    ToolOutcome,
    declined,
)
from agentrio.protocol.events import Question

__all__ = ["AskUserTool", "ask_inline", "format_answers", "parse_questions"]


class AskUserTool(ServiceTool):
    name = "ask_user"
    reach = Reach(unasked=False, in_subagents=True, in_legs=False)  # it is the asking

    def spec(self) -> ToolSpec:
        question = {
            "type": "object",
            "properties": {
                "text": {"type": "string"},
                "options": {"type": "array", "items": {"type": "string"}},
                "multi": {"type": "boolean"},
            },
            "required": ["text"],
        }
        return ToolSpec(
            name=self.name,
            description=(
                "Ask the user one or more questions and wait for the answers. Give options "
                "when the choice is closed."
            ),
            parameters={
                "type": "object",
                "properties": {"questions": {"type": "array", "items": question}},
                "required": ["questions"],
            },
        )

    async def execute(self, ctx: ToolContext, call: ToolCallRequest) -> ToolOutcome:
        questions = parse_questions(call.args)
        if ctx.origin != "cli-" and ctx.parent_task is None:
            # A sub-agent cannot park its parent: it asks inline whatever the origin
            # (R80) and is told "not run" when nobody can answer.
            return ToolOutcome(output="", park=questions)
        reply = await _ask(ctx, questions)
        if reply is None:
            return ToolOutcome(output="", park=questions)
        if reply.approve is False:
            return ToolOutcome(ok=False, output="", skipped=declined(reply.reason))
        answers = list(reply.answers or [])
        ctx.add_answers(
            [QA(question=q.text, answer=a) for q, a in zip(questions, answers, strict=False)]
        )
        return ToolOutcome(output=format_answers(questions, answers))


async def ask_inline(ctx: ToolContext, questions: list[Question]) -> list[str] | None:
    """Ask ``questions`` in the run's window and return the answers, or None when the
    task should park instead: nobody can take the question (R10), or the reply failed
    for a reason other than user cancellation (R13). A reply choosing "Cancel task" or
    "Abort task" cancels the run with that cause. A declined question (a reply with
    ``approve`` false) stays unanswered: None too."""
    reply = await _ask(ctx, questions)
    if reply is None or reply.approve is False:
        return None
    return list(reply.answers or [])


async def _ask(ctx: ToolContext, questions: list[Question]) -> AskReply | None:
    """The reply to ``questions``, or None when nobody could take them or the ask
    failed (the caller parks)."""
    try:
        return await ctx.ask("ask_user", questions=questions)
    except Refused:
        return None


def parse_questions(args: dict[str, Any]) -> list[Question]:
    """Questions from ``{"questions": [...]}`` or a single ``{"question", "options"}``."""
    raw = args.get("questions")
    if raw is None and "question" in args:
        raw = [{"text": args["question"], "options": args.get("options", [])}]
    if not isinstance(raw, list) or not raw:
        raise ValueError("argument 'questions' must be a non-empty list")
    questions: list[Question] = []
    for index, item in enumerate(raw):
        if isinstance(item, str):
            item = {"text": item}
        if not isinstance(item, dict) or not isinstance(item.get("text"), str):
            raise ValueError(f"questions[{index}] needs a 'text' string")
        options = item.get("options", [])
        if not isinstance(options, list) or not all(isinstance(o, str) for o in options):
            raise ValueError(f"questions[{index}].options must be a list of strings")
        questions.append(
            Question(text=item["text"], options=options, multi=bool(item.get("multi", False)))
        )
    return questions


def format_answers(questions: list[Question], answers: list[str]) -> str:
    """``Q: …`` / ``A: …`` pairs; a question left unanswered says so."""
    lines: list[str] = []
    for index, question in enumerate(questions):
        answer = answers[index] if index < len(answers) else "(no answer)"
        lines.append(f"Q: {question.text}\nA: {answer}")
    return "\n".join(lines)
