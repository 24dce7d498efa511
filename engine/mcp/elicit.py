"""A server's request for the person's input (MCP elicitation) as an ask of the task
whose call it belongs to (docs/mcp.md).

The SDK hands the request to a callback in its own receive task; the request itself
names no call (over stdio nothing ties it to one). `McpCalls` knows the calls in
flight per server: with exactly one, the request is that call's; with none or several
it is refused with an error (never guessed, never answered for the person). It is
asked in the SDK's task for as long as the call runs (the call's end cancels an ask
still open), like ``ask_user`` does (R10-R13):

* a ``cli-`` task with its window listening (or an in-process sub-agent's) is asked
  **inline**; the answers go back to the server as the form's content;
* any other origin (``chat-``, ``tg-``, ``dc-``), or a window that cannot take it,
  **parks** the task on the questions: the MCP request is cancelled and the model,
  resumed with the answers, can call the tool again with them;
* a stop choice in the dialog cancels the task with its cause, which cancels the
  MCP request with that cause;
* once a parked task is resumed with the person's answers (the page's, a bot's),
  the first request of the resumed task asking exactly the questions it parked on
  is answered with those answers, not asked again (`KeptForms`): the model calls the
  tool again and the server gets what the person typed for its form.

The engine never answers for the person: it accepts only with what was typed, and
on refusal sends an error, not a ``decline``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Final

import attrs
import trio

from agentrio.engine.nursery_tasks import cancel_scope
from agentrio.engine.snapshot import QA
from agentrio.engine.tools.base import Refused, ToolContext
from agentrio.protocol.causes import Cause
from agentrio.protocol.events import Question

__all__ = ["Elicitation", "KeptForms", "McpCalls", "answer_forms", "content_of", "questions_of"]

#: The options of a yes/no field.
YES_NO: Final = ["yes", "no"]


@attrs.define(eq=False)
class Elicitation:
    """One call in flight as elicitation sees it: whose it is, the call's cancel scope
    (cancelled when the task parks instead) and the asks open for it."""

    ctx: ToolContext
    server: str
    tool: str
    #: The scope of the ``tools/call`` request, set while it is being made.
    scope: trio.CancelScope | None = None
    #: The questions the task parked on (the call was cancelled for them), or None.
    parked: list[Question] | None = None
    _asking: set[trio.CancelScope] = attrs.field(factory=set)

    async def request(self, params: Any, kept: KeptForms) -> Any:
        """Answer one request of the server (in the SDK's task, for as long as the
        call runs: `end` cancels what is still open)."""
        with trio.CancelScope() as asking:
            self._asking.add(asking)
            try:
                return await _answer(self, params, kept)
            finally:
                self._asking.discard(asking)
        return _error("the call ended")

    def end(self) -> None:
        """The call is over: an ask still open for it goes."""
        for asking in list(self._asking):
            cancel_scope(asking, Cause.SUPERSEDED)


class KeptForms:
    """Which resumes' answers already answered a form (module docstring): each
    resume's answers answer one request, the first asking exactly its questions."""

    #: Spent resumes kept at most; older ones are forgotten (their tasks are long over).
    LIMIT: Final = 1024

    def __init__(self) -> None:
        self._spent: dict[tuple[str, str, int], None] = {}

    def take(self, ctx: ToolContext, questions: Sequence[Question]) -> list[str] | None:
        """The person's answers to exactly ``questions`` when they are this task's
        latest answers and no request took them yet; None otherwise."""
        answers = latest_answers(ctx.answered, questions)
        key = (ctx.session_id, ctx.task_hash, len(ctx.answered))
        if answers is None or key in self._spent:
            return None
        self._spent[key] = None
        while len(self._spent) > self.LIMIT:
            del self._spent[next(iter(self._spent))]
        return answers


def latest_answers(answered: Sequence[QA], questions: Sequence[Question]) -> list[str] | None:
    """The answers of ``answered``'s last ``len(questions)`` entries when those were
    asked exactly ``questions``, in order; None otherwise."""
    count = len(questions)
    latest = list(answered[-count:]) if count else []
    if not count or len(latest) != count:
        return None
    if [qa.question for qa in latest] != [question.text for question in questions]:
        return None
    return [qa.answer for qa in latest]


class McpCalls:
    """The calls in flight, per server (module docstring)."""

    def __init__(self) -> None:
        self._by_server: dict[str, list[Elicitation]] = {}
        self.kept = KeptForms()

    @contextmanager
    def track(self, server: str, call: Elicitation) -> Iterator[None]:
        calls = self._by_server.setdefault(server, [])
        calls.append(call)
        try:
            yield
        finally:
            calls.remove(call)
            call.end()

    def elicitation_for(self, server: str) -> Any:
        """The SDK's ``elicitation_callback`` for ``server``'s session."""

        async def elicit(context: Any, params: Any) -> Any:
            calls = self._by_server.get(server, [])
            if len(calls) != 1:
                which = "no call is running" if not calls else "several calls are running"
                return _error(f"agentrio cannot tell which call asks: {which}")
            return await calls[0].request(params, self.kept)

        return elicit


async def _answer(call: Elicitation, params: Any, kept: KeptForms) -> Any:
    """One ``elicitation/create`` request's answer (2025 protocol): its `ElicitResult`,
    or an error."""
    answered = await answer_forms(call, [params], kept)
    return answered[0] if isinstance(answered, list) else answered


async def answer_forms(call: Elicitation, forms: Sequence[Any], kept: KeptForms) -> Any:
    """The person's answers to ``forms`` (each an elicitation's params), asked as one
    ``ask_user`` ask whose questions are every form's in order: one `ElicitResult` per
    form, or an error (``ErrorData``) when nobody answered -- the task parked
    (``call.parked`` set, the call's scope cancelled), or the person stopped it, or an
    answer does not fit its form. The engine never answers for the person."""
    ctx = call.ctx
    each = [questions_of(call.server, params) for params in forms]
    questions = [question for asked in each for question in asked]
    answers = kept.take(ctx, questions)
    if answers is None and (ctx.origin == "cli-" or ctx.parent_task is not None):
        try:
            reply = await ctx.ask("ask_user", questions=questions)
        except Refused:
            pass  # nobody can take it now: the task parks on it
        else:
            if reply.stop is not None:  # the task is being stopped with its cause
                return _error("the person stopped the task")
            answers = list(reply.answers or [])
    if answers is None:
        call.parked = questions
        if call.scope is not None:  # the request is no longer wanted
            cancel_scope(call.scope, Cause.SUPERSEDED)
        return _error("the person answers later: the task parked")
    results: list[Any] = []
    for params, asked in zip(forms, each, strict=True):
        mine, answers = answers[: len(asked)], answers[len(asked) :]
        try:
            results.append(_result_of(params, mine))
        except ValueError as exc:  # a number field answered with words
            return _error(f"an answer does not fit the form: {exc}")
    return results


def _result_of(params: Any, answers: list[str]) -> Any:
    from mcp_types import ElicitResult

    if getattr(params, "mode", "form") == "url":
        accepted = bool(answers) and answers[0] == URL_OPTIONS[0]
        return ElicitResult(action="accept" if accepted else "decline")
    return ElicitResult(action="accept", content=content_of(params, answers))


#: The choices of a URL elicitation (the person opens the address themselves).
URL_OPTIONS: Final = ["I opened it", "Decline"]


def questions_of(server: str, params: Any) -> list[Question]:
    """The questions of a request: a URL request's one (open it or not), a form's one
    per field (its title and description; an enum's values or yes/no as options, an
    array of enum values as a multiple choice). The first says which server asks and
    its message."""
    head = f"MCP server {server} asks: {params.message}"
    if getattr(params, "mode", "form") == "url":
        return [Question(text=f"{head}\nOpen: {params.url}", options=list(URL_OPTIONS))]
    properties = (params.requested_schema or {}).get("properties", {})
    questions: list[Question] = []
    for name, field in properties.items():
        label = field.get("title") or name
        text = f"{label}: {field['description']}" if field.get("description") else label
        if "default" in field:
            text += f" (empty: {field['default']})"
        options, multi = _options(field)
        questions.append(Question(text=text, options=options, multi=multi))
    if not questions:
        return [Question(text=head, options=["ok"])]
    return [attrs.evolve(questions[0], text=f"{head}\n{questions[0].text}"), *questions[1:]]


def _options(field: dict[str, Any]) -> tuple[list[str], bool]:
    if field.get("type") == "boolean":
        return list(YES_NO), False
    if "enum" in field:
        return [str(value) for value in field["enum"]], False
    if "oneOf" in field:
        return [str(item.get("const")) for item in field["oneOf"]], False
    items = field.get("items") or {}
    if field.get("type") == "array" and ("enum" in items or "anyOf" in items):
        values = items.get("enum") or [item.get("const") for item in items["anyOf"]]
        return [str(value) for value in values], True
    return [], False


def content_of(params: Any, answers: list[str]) -> dict[str, Any]:
    """The form's content from the answers, typed by the schema (a number field's
    answer as a number, yes/no as a boolean, a multiple choice as a list); an empty
    answer leaves the field out (the server's default then applies)."""
    properties = (params.requested_schema or {}).get("properties", {})
    content: dict[str, Any] = {}
    for (name, field), answer in zip(properties.items(), answers, strict=False):
        if not answer.strip():
            continue
        kind = field.get("type")
        if kind == "boolean":
            content[name] = answer.strip().lower() in ("yes", "y", "true")
        elif kind == "integer":
            content[name] = int(answer)
        elif kind == "number":
            content[name] = float(answer)
        elif kind == "array":
            content[name] = [part.strip() for part in answer.split(",") if part.strip()]
        else:
            content[name] = answer
    return content


def _error(message: str) -> Any:
    from mcp_types import INVALID_REQUEST, ErrorData

    return ErrorData(code=INVALID_REQUEST, message=message)
