"""A run's side of the session's conversation (`agentrio.engine.conversation`): its
input assembled within the budget, compaction, the model call with its usage.

`load_context` reads the session's summary and tail once, when the run starts (tasks
side by side in one session each see what had finished when they started), fits it in
the budget and, when older exchanges do not fit (or on ``/compact``), summarises them
with the model into the session's summary (`compact`), announced by a ``compacted``
event. `call_model` is every model call of a run: it sends::

    [system prompt] + summary + earlier exchanges + the run's own messages

refits the earlier part when the run's own turns have grown, counts the call's usage
(the run's and the session's, with its cost) and calibrates the session's token
estimate with what the provider reported. Each retry of a call (a rate limit, a server
error, a timeout: `agentrio.engine.models.retry`) is announced by a ``retrying`` event
before its wait. A context-length refusal compacts the whole
earlier conversation, elides the run's own older tool results, and tries once more; a
run that sees no earlier conversation (a sub-agent) tries again only when it had older
results to elide.

Every agent's model calls are made here, through its loop (`agentrio.engine.agent_loop`):
a task's and an in-process sub-agent's alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any, Final, Protocol

import trio

from agentrio.engine.config import ModelConfig
from agentrio.engine.conversation import (
    ELIDED_RESULT,
    WINDOW,
    Calibration,
    Exchange,
    StoredConversation,
    Summary,
    estimate,
    fit,
)
from agentrio.engine.models.base import (
    ContextLengthError,
    Message,
    ModelError,
    ModelReply,
    Retrying,
    TextSink,
    ToolSpec,
    Usage,
)
from agentrio.engine.models.catalog import DEFAULT, ModelCatalog, session_model
from agentrio.engine.snapshot import clamp
from agentrio.engine.tools.base import Services
from agentrio.protocol import events as ev
from agentrio.protocol.events import TokenUsage

__all__ = [
    "SUMMARY_PROMPT",
    "announce_retry",
    "budget",
    "call_model",
    "compact",
    "compact_session",
    "load_context",
    "model_config",
    "usage_of",
]

SUMMARY_PROMPT: Final = (
    "You summarise a conversation between a person and an assistant that runs commands "
    "for them, so that the assistant can carry on without the full record. Keep what "
    "later requests may need: facts the person stated (names, preferences, decisions), "
    "what was asked and done, files and commands involved with their outcomes, open "
    "questions and unfinished work. Be concise and factual; never include secret values. "
    "Answer with the summary only."
)


class _SessionState(Protocol):
    calibration: Calibration
    usage: TokenUsage


class TaskRun(Protocol):
    """What this module needs of a run: a task's (`agentrio.engine.runs.TaskRun`) or an
    in-process sub-agent's (`agentrio.engine.tools.subagents`), whose ``stored`` is
    None (it sees no earlier conversation)."""

    services: Services
    system: str
    messages: list[Message]
    context: list[Message]
    stored: StoredConversation | None

    @property
    def session_id(self) -> str: ...

    @property
    def calibration(self) -> Calibration:
        """The token estimate's calibration for its model (the session's, for a task)."""
        ...

    def emit(self, kind: Any, **fields: Any) -> Any: ...

    def count(self, used: TokenUsage) -> None:
        """Add one model call's usage to the run's (and its session's, and for a
        sub-agent its task's)."""
        ...


#: Most bytes of one message's text in the transcript given to the summariser.
_TRANSCRIPT_MESSAGE_BYTES: Final = 2048


def model_config(services: Services, session_id: str) -> ModelConfig:
    """The configuration of the model ``session_id``'s tasks use (``/model NAME``)."""
    model = services.model
    if isinstance(model, ModelCatalog):
        name = model.chosen(session_id)
        if name != DEFAULT and name in services.config.models:
            return services.config.models[name]
    return services.config.model


def budget(config: ModelConfig) -> int:
    """Tokens a request may take: the context window less the reply's reserve."""
    reserve = config.max_output_tokens or min(8192, config.context_tokens // 4)
    return max(256, config.context_tokens - reserve)


def usage_of(config: ModelConfig, usage: Usage | None) -> TokenUsage:
    """One call's usage with its cost from the configured prices (USD per million)."""
    if usage is None:
        return TokenUsage(calls=1)
    fresh = max(0, usage.input_tokens - usage.cached_input_tokens)
    cost = (
        fresh * config.price_input
        + usage.cached_input_tokens * (config.price_cached_input or config.price_input)
        + usage.output_tokens * config.price_output
    ) / 1_000_000
    return TokenUsage(
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cached_input_tokens=usage.cached_input_tokens,
        calls=1,
        cost_usd=cost,
    )


def _head(run: TaskRun) -> list[Message]:
    return [Message(role="system", content=run.system)] if run.system else []


def _room(run: TaskRun, tools: Sequence[ToolSpec] = ()) -> int:
    """Tokens left for the earlier conversation once the system prompt, the tools and
    the run's own messages are counted."""
    config = model_config(run.services, run.session_id)
    own = run.calibration.tokens(estimate([*_head(run), *run.messages], tools))
    return max(0, budget(config) - own)


async def load_context(run: TaskRun, *, force: bool = False, reason: str = "budget") -> None:
    """Read the session's conversation and fit it (module docstring); with ``force``
    summarise every earlier exchange (``/compact``, a context-length refusal)."""
    stored = await run.services.store.conversation(run.session_id, limit=WINDOW)
    run.stored = stored
    fitted = fit(stored, budget=_room(run), calibration=run.calibration)
    dropped = stored.exchanges if force else fitted.dropped
    if dropped:
        stored = await compact(run.services, run.session_id, stored, dropped, run=run)
        run.stored = stored
        fitted = fit(stored, budget=_room(run), calibration=run.calibration)
    if dropped or fitted.elided:
        run.emit(ev.Compacted, summarised=len(dropped), elided=fitted.elided, reason=reason)
    run.context = fitted.messages


async def compact(
    services: Services,
    session_id: str,
    stored: StoredConversation,
    dropped: Sequence[Exchange],
    *,
    run: TaskRun | None = None,
    session: _SessionState | None = None,
) -> StoredConversation:
    """Fold ``dropped`` (the oldest exchanges, oldest first) and the old summary into
    the session's new summary; returns the conversation as it now stands. A model that
    fails to summarise leaves a plain list of what was asked instead."""
    if not dropped:
        return stored
    config = model_config(services, session_id)
    transcript = _transcript(stored.summary, dropped)
    room = budget(config) * 3  # characters: well inside the window at ~4 per token
    messages = [
        Message(role="system", content=SUMMARY_PROMPT),
        Message(role="user", content=clamp(transcript, room)),
    ]
    try:
        model = session_model(services.model, session_id)
        on_retry = None if run is None else partial(announce_retry, run)
        reply = await model.complete(messages, [], on_retry=on_retry)
        text = reply.text.strip()
        if run is not None:
            _count(run, config, reply)
        elif session is not None:  # asked for outside a task: the session's cost still
            session.usage = session.usage + usage_of(config, reply.usage)
    except ModelError as exc:
        text = ""
        failure = str(exc)
    else:
        failure = "the model gave no summary"
    if not text:
        asked = [m.content for e in dropped for m in e.messages[:1] if m.role == "user"]
        earlier = f"{stored.summary.text}\n" if stored.summary else ""
        lines = "\n".join(f"- {clamp(a, 200)}" for a in asked)
        text = f"{earlier}Earlier requests (not summarised: {failure}):\n{lines}"
    # The summary rides in every later input: it keeps to a quarter of the budget
    # (~4 bytes a token), however long the model's answer, and however many times a
    # model that gives none has had its plain list of requests grow.
    summary = Summary(text=clamp(text, budget(config)), upto=dropped[-1].end_at)
    await services.store.put_summary(session_id, summary)
    kept = [e for e in stored.exchanges if e.end_at > summary.upto]
    return StoredConversation(summary=summary, exchanges=kept)


async def compact_session(
    services: Services, session_id: str, session: _SessionState | None = None
) -> int:
    """Fold every earlier exchange of the session into its summary now (``/compact``,
    the ``compact`` frame, ``POST …/compact``); returns how many were folded, and
    counts the summary's usage in ``session``'s. Tasks running keep the input they
    started with; the next one starts from the summary."""
    stored = await services.store.conversation(session_id, limit=WINDOW)
    await compact(services, session_id, stored, stored.exchanges, session=session)
    return len(stored.exchanges)


def _transcript(summary: Summary | None, exchanges: Sequence[Exchange]) -> str:
    parts = [f"Summary so far:\n{summary.text}\n"] if summary is not None else []
    for exchange in exchanges:
        for message in exchange.messages:
            text = clamp(message.content, _TRANSCRIPT_MESSAGE_BYTES)
            calls = " ".join(f"[calls {c.name} {c.args}]" for c in message.tool_calls)
            who = f"tool {message.name}" if message.role == "tool" else message.role
            parts.append(f"{who}: {text} {calls}".rstrip())
        parts.append("")
    return "\n".join(parts)


def _count(run: TaskRun, config: ModelConfig, reply: ModelReply) -> None:
    run.count(usage_of(config, reply.usage))


async def announce_retry(run: TaskRun, retry: Retrying) -> None:
    """Tell the run's listeners that its model call is tried again (a ``retrying``
    event: "rate limited, retrying in 4 s"), before the back-off's wait."""
    run.emit(ev.Retrying, reason=retry.reason, attempt=retry.attempt, delay_s=retry.delay_s)
    await trio.lowlevel.checkpoint()


def _elide_own_results(run: TaskRun) -> int:
    """Elide the run's own tool results but the last turn's; returns how many."""
    last = max((i for i, m in enumerate(run.messages) if m.role == "assistant"), default=-1)
    count = 0
    for index, message in enumerate(run.messages[:last]):
        if message.role == "tool" and message.content != ELIDED_RESULT:
            run.messages[index] = Message(
                role="tool",
                content=ELIDED_RESULT,
                tool_call_id=message.tool_call_id,
                name=message.name,
            )
            count += 1
    return count


async def call_model(
    run: TaskRun, tools: Sequence[ToolSpec], *, on_text: TextSink | None = None
) -> ModelReply:
    """One model call of ``run`` (module docstring)."""
    config = model_config(run.services, run.session_id)
    calibration = run.calibration
    if run.stored is not None:
        sent = calibration.tokens(estimate([*_head(run), *run.context, *run.messages], tools))
        if sent > budget(config):  # the run's own turns grew: refit the earlier part
            run.context = fit(
                run.stored, budget=_room(run, tools), calibration=calibration
            ).messages
    model = session_model(run.services.model, run.session_id)
    for attempt in range(2):
        messages = [*_head(run), *run.context, *run.messages]
        try:
            reply = await model.complete(
                messages, tools, on_text=on_text, on_retry=partial(announce_retry, run)
            )
        except ContextLengthError:
            if attempt:
                raise
            elided = _elide_own_results(run)
            compacted = False  # announced by load_context, once
            if run.stored is not None:
                compacted = bool(run.stored.exchanges)
                await load_context(run, force=compacted, reason="context_length")
            elif not elided:  # nothing to take out: the same input would be refused
                raise
            if elided and not compacted:
                run.emit(ev.Compacted, summarised=0, elided=elided, reason="context_length")
            continue
        _count(run, config, reply)
        if reply.usage is not None:
            calibration.observe(estimate(messages, tools), reply.usage.input_tokens)
        return reply
    raise AssertionError("unreachable")  # pragma: no cover
