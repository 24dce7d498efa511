"""Every tool with a side effect asks before it repeats a call that may have partly run
(issue 34 item 5; R12, R51, R76, R92).

The task is stored as a daemon killed mid-call leaves it (`CallLedger.effect` wrote the
row before the effect): ``running``, no live marker, the call interrupted with ``ran``.
Resumed, its model repeats the call. A remembered rule covers it -- an edits rule for
the file tools -- yet the repeat asks, its confirmation says it may have partly run
(``details.interrupted``, beside the diff), and denied, nothing changes on disk. The
same call interrupted while it waited on a person (``ran`` false) never ran: the rule
lets it through as usual. A secret ask always asks; met again, it says so too.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import trio

from agentrio.engine.asks import AskReply
from agentrio.engine.assembly import open_engine
from agentrio.engine.config import AgentConfig, Config
from agentrio.engine.core import Engine
from agentrio.engine.messages import INTERRUPTED_CALL_NOTE, INTERRUPTED_RESUME_HEADER
from agentrio.engine.models.base import (
    Message,
    ModelReply,
    RetrySink,
    TextSink,
    ToolCallRequest,
    ToolSpec,
)
from agentrio.engine.pending import Entry, Offered
from agentrio.engine.rules import edits_rule
from agentrio.engine.snapshot import InterruptedCall, Snapshot, snapshot_to_json
from agentrio.engine.store.base import TaskRow
from tests.engine.conftest import first_input

SESSION = "chat-effects"
TASK = "a" * 32


class RepeatModel:
    """The resumed run repeats ``call`` (same arguments), then ends."""

    name = "repeat-model"

    def __init__(self, call: ToolCallRequest) -> None:
        self.call = call
        self.results: list[str] = []

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        *,
        on_text: TextSink | None = None,
        on_retry: RetrySink | None = None,
    ) -> ModelReply:
        await trio.lowlevel.checkpoint()
        if messages[-1].role == "tool":
            self.results.append(messages[-1].content)
            return ModelReply(text="done")
        assert first_input(messages).startswith(INTERRUPTED_RESUME_HEADER)
        return ModelReply(text="", tool_calls=[self.call])


@pytest.fixture
def work(tmp_path: Path) -> Path:
    folder = tmp_path / "work"
    folder.mkdir()
    return folder


@pytest.fixture
def config(work: Path, tmp_path: Path) -> Config:
    return Config(home=str(tmp_path / "home"), agent=AgentConfig(cwd=str(work)))


async def _killed_mid_call(engine: Engine, call: ToolCallRequest, *, ran: bool) -> None:
    """Store the task as a kill -9 during ``call`` leaves it."""
    snapshot = Snapshot(
        objective="change the file",
        messages=[],
        interrupted=[
            InterruptedCall(call_id=call.id, tool_name=call.name, args=call.args, ran=ran)
        ],
    )
    row = TaskRow(
        session_id=SESSION,
        task_hash=TASK,
        state="running",
        objective="change the file",
        origin="chat-",
        model="repeat-model",
        created_at=1.0,
        updated_at=1.0,
        snapshot=snapshot_to_json(snapshot),
        questions=[],
    )
    await engine.store.put_task(row)


async def _resume(engine: Engine, decide: Any) -> list[Entry]:
    """Resume the task, answering each ask with ``decide(entry)``; the asks made."""
    asked: list[Entry] = []
    with engine.registry.listen("chat-") as listener:
        run = await engine.resume(SESSION, TASK)
        async with trio.open_nursery() as nursery:

            async def answering() -> None:
                while True:
                    notice = await listener.next_notice()
                    if isinstance(notice, Offered):
                        asked.append(notice.entry)
                        await engine.answer(notice.entry.id, decide(notice.entry), by=listener)

            nursery.start_soon(answering)
            with trio.fail_after(30):
                await run.wait_done()
            nursery.cancel_scope.cancel()
    return asked


def _file_call(tool: str, target: Path) -> ToolCallRequest:
    args: dict[str, Any] = (
        {"path": str(target), "content": "new\n"}
        if tool == "write_file"
        else {"path": str(target), "old_string": "old", "new_string": "new"}
    )
    return ToolCallRequest(id="c1", name=tool, args=args)


@pytest.mark.parametrize("tool", ["write_file", "edit_file"])
async def test_a_file_change_met_again_asks_despite_its_edits_rule(
    config: Config, work: Path, tool: str
) -> None:
    """Issue 34 item 5, R76, R92: the repeat of a file change that may have partly run
    is asked although an edits rule covers its directory; the confirmation shows the
    diff and the note; denied, the file is unchanged."""
    target = work / "notes.txt"
    target.write_text("old\n")
    call = _file_call(tool, target)
    model = RepeatModel(call)
    async with open_engine(config, model=model) as engine:
        await engine.store.put_rule(edits_rule(str(work.resolve()), at=1.0))
        await _killed_mid_call(engine, call, ran=True)
        asked = await _resume(engine, lambda entry: AskReply(approve=False, reason="check"))
    [entry] = asked
    details = entry.request.details
    assert details is not None
    assert details.interrupted == INTERRUPTED_CALL_NOTE
    assert details.change is not None
    assert "+new" in details.change.diff
    assert target.read_text() == "old\n"  # the denied repeat changed nothing
    assert model.results[-1].startswith("not run: denied")


@pytest.mark.parametrize("tool", ["write_file", "edit_file"])
async def test_a_file_change_that_never_ran_is_let_through_by_its_rule(
    config: Config, work: Path, tool: str
) -> None:
    """Issue 34 item 5 (the control): interrupted while it waited on a person, the
    change never ran; its repeat is covered by the edits rule and applied unasked."""
    target = work / "notes.txt"
    target.write_text("old\n")
    call = _file_call(tool, target)
    async with open_engine(config, model=RepeatModel(call)) as engine:
        await engine.store.put_rule(edits_rule(str(work.resolve()), at=1.0))
        await _killed_mid_call(engine, call, ran=False)
        asked = await _resume(engine, lambda entry: AskReply(approve=False))
    assert asked == []
    assert target.read_text() == "new\n"


async def test_a_secret_met_again_says_it_may_have_partly_run(config: Config) -> None:
    """Issue 34 item 5, R73: a ``store_secret`` call met again asks for the value as
    always, with the note; declined, nothing is stored."""
    call = ToolCallRequest(id="c1", name="store_secret", args={"key": "API_KEY"})
    async with open_engine(config, model=RepeatModel(call)) as engine:
        await _killed_mid_call(engine, call, ran=True)
        asked = await _resume(engine, lambda entry: AskReply(approve=False))
        stored = await engine.store.get_secret(SESSION, "API_KEY")
    [entry] = asked
    assert entry.request.kind == "secret"
    assert entry.request.details is not None
    assert entry.request.details.interrupted == INTERRUPTED_CALL_NOTE
    assert stored is None
