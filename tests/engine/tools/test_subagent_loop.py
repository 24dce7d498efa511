"""In-process sub-agents turn the tasks' agent loop (issue 31 item 4; R80, R62).

So what holds of a task's model calls holds of a sub-agent's: a rate limit is retried
after the provider's ``Retry-After`` with one ``retrying`` event (labelled with the
sub-agent), a cancel during that wait ends the parent at once, a malformed tool call
goes back to the sub-agent's model as that call's error result, a context-length
refusal elides its older results and tries once more, and its usage counts in its
task's. It still starts from its objective alone, with its restricted toolbox.

The model here is the tests' own, but its calls go through the engine's retries
(`agentrio.engine.models.retry.call_with_retries`) exactly as every shipped dialect's
do, under the mock clock: waits are the clock's, never the machine's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import attrs
import trio
import trio.testing

from agentrio.engine.assembly import open_engine
from agentrio.engine.config import Config
from agentrio.engine.conversation import ELIDED_RESULT
from agentrio.engine.models.base import (
    ContextLengthError,
    Message,
    ModelReply,
    RetrySink,
    TextSink,
    ToolCallRequest,
    ToolSpec,
    Usage,
)
from agentrio.engine.models.retry import RetryPolicy, Transient, call_with_retries
from agentrio.protocol import events as ev
from agentrio.protocol.causes import Cause
from tests.engine.tools.test_subagents import _parent_call, _sub_objective

SESSION = "cli-subloop"
Answer = Callable[[list[Message], int], ModelReply | BaseException]


class RetriedModel:
    """Each try of a call is answered by ``answer(messages, try number)``: a reply, or
    a failure raised (a `Transient` is retried by the engine's retry loop)."""

    name = "retried"

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.tries: list[list[Message]] = []

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        *,
        on_text: TextSink | None = None,
        on_retry: RetrySink | None = None,
    ) -> ModelReply:
        async def attempt() -> ModelReply:
            await trio.lowlevel.checkpoint()
            self.tries.append(list(messages))
            result = self.answer(list(messages), len(self.tries))
            if isinstance(result, BaseException):
                raise result
            return result

        return await call_with_retries(attempt, policy=RetryPolicy(), on_retry=on_retry)


def _rate_limited(retry_after_s: float) -> Transient:
    return Transient(
        "model provider returned HTTP 429: Rate limit reached",
        reason="rate limited",
        retry_after_s=retry_after_s,
    )


async def test_a_rate_limited_subagent_retries_once_announced_and_completes(
    config: Config, autojump_clock: trio.testing.MockClock, wall_clock: Callable[[], float]
) -> None:
    """Issue 31 (4, 6, 7), R80: the sub-agent's model answers 429 with ``Retry-After:
    4`` then succeeds: the parent gets exactly one ``retrying`` event, labelled with the
    sub-agent, before the wait; the sub-agent completes with its answer; its usage
    counts in the task's (``done``) and the session's."""
    sub_tries = 0

    def answer(messages: list[Message], _: int) -> ModelReply | BaseException:
        nonlocal sub_tries
        if _sub_objective(messages) is None:  # the parent's
            if messages[-1].role == "tool":
                return ModelReply(text="both done", usage=Usage(input_tokens=7, output_tokens=1))
            parent = _parent_call("look it up")
            return attrs.evolve(parent, usage=Usage(input_tokens=5, output_tokens=2))
        sub_tries += 1
        if sub_tries == 1:
            return _rate_limited(4.0)
        return ModelReply(text="found it", usage=Usage(input_tokens=100, output_tokens=10))

    model = RetriedModel(answer)
    async with open_engine(config, model=model, clock=wall_clock) as engine:
        started = trio.current_time()
        run = await engine.start_task(SESSION, "delegate the lookup")
        outcome = await run.wait_done()
        events = engine.session(SESSION).hub.events_of(run.task_hash)
        session_usage = engine.session(SESSION).usage
    assert (outcome.status, sub_tries) == ("finished", 2)
    (retrying,) = [e for e in events if isinstance(e, ev.Retrying)]
    assert (retrying.reason, retrying.attempt, retrying.delay_s) == ("rate limited", 1, 4.0)
    assert retrying.subagent == "sub-agent 1/1: look it up"
    assert trio.current_time() - started >= 4.0  # the provider's wait, honoured
    (result,) = [e for e in events if isinstance(e, ev.ToolResult)]
    assert result.ok
    assert "found it" in result.output
    (done,) = [e for e in events if isinstance(e, ev.Done)]
    assert (done.usage.input_tokens, done.usage.output_tokens, done.usage.calls) == (112, 13, 3)
    assert session_usage.input_tokens == 112


async def test_cancel_during_a_subagents_back_off_ends_the_task_at_once(
    config: Config, autojump_clock: trio.testing.MockClock, wall_clock: Callable[[], float]
) -> None:
    """Issue 31 (4, 6), R80, R40: the sub-agent's provider asks to wait 30 s; a user
    cancel sent once the ``retrying`` event arrived ends the parent within 100 ms (mock
    time), and the model is not tried again."""

    def answer(messages: list[Message], _: int) -> ModelReply | BaseException:
        if _sub_objective(messages) is None:
            return _parent_call("wait for it")
        return _rate_limited(30.0)

    model = RetriedModel(answer)
    async with open_engine(config, model=model, clock=wall_clock) as engine:
        hub = engine.session(SESSION).hub
        with hub.subscribe() as subscription:
            run = await engine.start_task(SESSION, "delegate the slow thing")
            async for _, event in subscription:
                if isinstance(event, ev.Retrying):
                    break
        assert event.delay_s == 30.0
        sent_at = trio.current_time()
        assert engine.cancel(run.task_hash, Cause.USER_CANCELED)
        outcome = await run.wait_done()
        ended_at = trio.current_time()
    assert (outcome.status, outcome.cause) == ("canceled", Cause.USER_CANCELED)
    assert ended_at - sent_at < 0.1, ended_at - sent_at
    assert len(model.tries) == 2  # the parent's call and the sub-agent's refused one


async def test_a_subagents_malformed_tool_calls_go_back_to_its_model(
    config: Config, autojump_clock: trio.testing.MockClock, wall_clock: Callable[[], float]
) -> None:
    """Issue 31 (4, 6), R62, R80: a sub-agent's call with arguments that are not JSON,
    one of a tool it is not offered and one missing a field each come back to its own
    model as that call's error result; the sub-agent goes on and finishes."""
    seen: list[list[Message]] = []

    def answer(messages: list[Message], _: int) -> ModelReply | BaseException:
        if _sub_objective(messages) is None:
            if messages[-1].role == "tool":
                return ModelReply(text="parent done")
            return _parent_call("try some calls")
        if messages[-1].role != "tool":
            calls = [
                ToolCallRequest(
                    id="s1",
                    name="run_command",
                    args={},
                    args_error="the arguments are not valid JSON",
                    raw_args='{"command": "ls',
                ),
                ToolCallRequest(id="s2", name="background_command", args={"commands": ["ls"]}),
                ToolCallRequest(id="s3", name="run_command", args={}),
            ]
            return ModelReply(tool_calls=calls)
        seen.append(messages)
        return ModelReply(text="fixed my calls")

    model = RetriedModel(answer)
    async with open_engine(config, model=model, clock=wall_clock) as engine:
        run = await engine.start_task(SESSION, "delegate bad calls")
        outcome = await run.wait_done()
        events = engine.session(SESSION).hub.events_of(run.task_hash)
    assert outcome.status == "finished"
    (messages,) = seen
    results = {m.tool_call_id: m.content for m in messages if m.role == "tool"}
    assert results["s1"] == (
        "invalid call of run_command: the arguments are not valid JSON; the arguments sent "
        'were: {"command": "ls'
    )
    assert results["s2"] == "not run: tool 'background_command' is not available in this task"
    assert results["s3"].startswith("invalid call of run_command: ")
    (result,) = [e for e in events if isinstance(e, ev.ToolResult)]
    assert "status: finished" in result.output
    assert "fixed my calls" in result.output


async def test_a_subagent_refused_as_too_long_elides_its_older_results_and_retries_once(
    config: Config, autojump_clock: trio.testing.MockClock, wall_clock: Callable[[], float]
) -> None:
    """Issue 31 (4, 6), R80: a context-length refusal of a sub-agent's call elides its
    own older tool results (a ``compacted`` event labelled with it) and tries once
    more; a second refusal with nothing left to elide fails that sub-agent alone."""
    sub_calls = 0

    def answer(messages: list[Message], _: int) -> ModelReply | BaseException:
        nonlocal sub_calls
        objective = _sub_objective(messages)
        if objective is None:
            if messages[-1].role == "tool":
                return ModelReply(text="parent done")
            return _parent_call("long", "short")
        if objective == "short":
            return ContextLengthError("input is too long for the context window")
        sub_calls += 1
        if sub_calls <= 2:  # two turns of output, then a refusal of the third call
            # a call of a tool it is not offered: a result, and no subprocess to wait on
            call = ToolCallRequest(id=f"l{sub_calls}", name="background_command", args={})
            return ModelReply(tool_calls=[call])
        if sub_calls == 3:
            return ContextLengthError("input is too long for the context window")
        assert [m.content for m in messages if m.tool_call_id == "l1"] == [ELIDED_RESULT]
        return ModelReply(text="fitted after all")

    model = RetriedModel(answer)
    async with open_engine(config, model=model, clock=wall_clock) as engine:
        run = await engine.start_task(SESSION, "delegate long work")
        outcome = await run.wait_done()
        events = engine.session(SESSION).hub.events_of(run.task_hash)
    assert outcome.status == "finished"
    (compacted,) = [e for e in events if isinstance(e, ev.Compacted)]
    assert (compacted.summarised, compacted.elided, compacted.reason) == (0, 1, "context_length")
    assert compacted.subagent == "sub-agent 1/2: long"
    (result,) = [e for e in events if isinstance(e, ev.ToolResult)]
    assert "fitted after all" in result.output
    assert "sub-agent 2/2: short\nstatus: failed\nerror: model error: input is too long" in (
        result.output
    )
