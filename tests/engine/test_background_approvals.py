"""Commands a background sub-agent could not run, offered in its job's follow-up (R84,
with R26, R30, R6, R7, R76).

The builtin model's ``sub: OBJ ;; OBJ`` starts one background sub-agent per objective;
each reads its objective as a verb, so ``run: touch X`` makes a ``run_command`` call
that needs approval and is not run (R30). The job's follow-up then raises one
``run_commands`` confirmation listing every such command whole, in the starting
``cli-`` session, routed to the starting window (R78). The commands are real
subprocesses, so these tests use real time, bounded by ``trio.fail_after``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, cast

import attrs
import pytest
import trio

from agentrio.engine.assembly import open_engine
from agentrio.engine.background.routing import reoffers
from agentrio.engine.config import Config, ToolsConfig
from agentrio.engine.core import Engine
from agentrio.engine.messages import FOLLOWUP_HEADER, PROPOSALS_TITLE
from agentrio.engine.models.base import (
    Message,
    ModelReply,
    RetrySink,
    TextSink,
    ToolCallRequest,
    ToolSpec,
)
from agentrio.engine.pending import AskReply, Entry, Listener, Offered, Verified, Withdrawn
from agentrio.engine.runs import RunOrigin, TaskRun
from agentrio.engine.snapshot import InterruptedCall, make_snapshot, snapshot_from_json
from agentrio.engine.tools.base import Services
from agentrio.engine.tools.run_commands import (
    MAX_PROPOSALS,
    Proposal,
    proposal_args,
    proposals_from_args,
)
from agentrio.engine.tools.sudo import FakeVerifier
from agentrio.protocol import events as ev
from agentrio.protocol.causes import Cause
from tests.engine.conftest import first_input

SESSION = "cli-offer"
WINDOW = "w-offer"
DEADLINE_S = 30


async def offered(engine: Engine, listener: Listener, text: str) -> tuple[TaskRun, Entry]:
    """Start ``text`` from the window, let it end, and return the follow-up run and
    its one confirmation (the first ask the window is offered)."""
    run = await engine.start_task(SESSION, text, origin=RunOrigin("conn-1", WINDOW))
    assert (await run.wait_done()).status == "finished"
    notice = await listener.next_notice()
    assert isinstance(notice, Offered)
    followup = engine.find_run(notice.entry.request.task_hash, SESSION)
    assert followup is not None
    return followup, notice.entry


def task_events(engine: Engine, task_hash: str, session_id: str = SESSION) -> list[ev.Event]:
    return list(engine.session(session_id).hub.events_of(task_hash))


async def test_the_confirmation_lists_every_command_whole_and_approve_runs_them(
    config: Config, tmp_path: Path
) -> None:
    """R84, R30, R26, R78: two sub-agents each leave a command needing approval (one of
    them two lines long); the follow-up, in the starting session, raises ONE
    confirmation to the starting window naming both exactly and whole, in leg order,
    labelled with the sub-agents; nothing ran before the yes. Approve runs both in
    order in the starting session (the files exist), and the model's first message
    carries each command's end."""
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    two_lines = f"touch {b}\ntouch {c}"
    with trio.fail_after(DEADLINE_S):
        async with open_engine(config) as engine:
            with engine.registry.listen("cli-", windows={WINDOW}) as listener:
                followup, entry = await offered(
                    engine, listener, f"sub: run: touch {a} ;; run: {two_lines}"
                )
                request = entry.request
                job = engine.background.jobs()[0]
                assert (request.kind, request.tool_name) == ("tool_confirm", "run_commands")
                here = os.path.realpath(os.getcwd())
                assert request.tool_args == {
                    "command 1": f"touch {a}",
                    "cwd 1": here,
                    "command 2": two_lines,
                    "cwd 2": here,
                }
                assert list(request.tool_args) == ["command 1", "cwd 1", "command 2", "cwd 2"]
                assert (request.session_id, request.window_hash) == (SESSION, WINDOW)
                assert request.subagent == (
                    f"background sub-agents {job.legs[0].id}, {job.legs[1].id} of job {job.id}"
                )
                assert (request.restricted, request.need_password) == (False, False)
                [confirm] = [
                    e for e in task_events(engine, followup.task_hash) if isinstance(e, ev.Confirm)
                ]
                assert (confirm.tool_name, confirm.args) == ("run_commands", request.tool_args)
                assert [p.exists() for p in (a, b, c)] == [False, False, False]
                await engine.answer(entry.id, AskReply(approve=True), by=listener)
                outcome = await followup.wait_done()
    assert outcome.status == "finished"
    assert job.followup_task == followup.task_hash
    assert [p.exists() for p in (a, b, c)] == [True, True, True]
    first = followup.messages[0].content
    assert first.startswith(FOLLOWUP_HEADER)
    section = first.split(f"## {PROPOSALS_TITLE}\n", 1)[1]
    assert f"command 1: {json.dumps(f'touch {a}')}\nexit 0" in section
    assert f"command 2: {json.dumps(two_lines)}\nexit 0" in section
    [result] = [e for e in task_events(engine, followup.task_hash) if isinstance(e, ev.ToolResult)]
    assert (result.tool_name, result.ok) == ("run_commands", True)
    for leg in job.legs:  # the sub-agents' own sessions ran nothing
        assert leg.child is not None
        child_events = task_events(engine, leg.child.task_hash, leg.child.session_id)
        assert not any(isinstance(e, ev.ToolResult) for e in child_events)


@pytest.mark.parametrize("choice", ["remember", "allow_turn"])
async def test_always_allow_remembers_each_command_exactly_and_allow_turn_nothing(
    config: Config, tmp_path: Path, choice: str
) -> None:
    """R84, R76: "Always allow" runs the list and remembers each command exactly as
    shown (no program, no pattern); "Allow this turn" runs the list and remembers or
    allows nothing beyond it."""
    a, b = tmp_path / "a", tmp_path / "b"
    with trio.fail_after(DEADLINE_S):
        async with open_engine(config) as engine:
            with engine.registry.listen("cli-", windows={WINDOW}) as listener:
                followup, entry = await offered(
                    engine, listener, f"sub: run: touch {a} ;; run: touch {b}"
                )
                reply = AskReply(
                    approve=True, remember=choice == "remember", allow_turn=choice == "allow_turn"
                )
                await engine.answer(entry.id, reply, by=listener)
                assert (await followup.wait_done()).status == "finished"
            rules = [rule.command for rule in await engine.allowed(SESSION)]
    assert [a.exists(), b.exists()] == [True, True]
    assert rules == ([f"touch {a}", f"touch {b}"] if choice == "remember" else [])


async def test_deny_runs_nothing_and_the_model_reads_the_reason(
    config: Config, tmp_path: Path
) -> None:
    """R84, R26: Deny with a reason runs none of the commands, and the follow-up's
    model reads that they were denied and why."""
    a, b = tmp_path / "a", tmp_path / "b"
    with trio.fail_after(DEADLINE_S):
        async with open_engine(config) as engine:
            with engine.registry.listen("cli-", windows={WINDOW}) as listener:
                followup, entry = await offered(
                    engine, listener, f"sub: run: touch {a} ;; run: touch {b}"
                )
                reply = AskReply(approve=False, reason="not on a Friday")
                await engine.answer(entry.id, reply, by=listener)
                outcome = await followup.wait_done()
    assert outcome.status == "finished"
    assert [a.exists(), b.exists()] == [False, False]
    told = "denied by the user: not on a Friday; none of the commands was run"
    assert told in followup.messages[0].content
    [skipped] = [
        e for e in task_events(engine, followup.task_hash) if isinstance(e, ev.ToolSkipped)
    ]
    assert (skipped.tool_name, skipped.reason) == ("run_commands", told)


@pytest.mark.parametrize("how", ["cancel_task", "abort_task", "paused", "disconnected"])
async def test_a_stop_or_a_lost_window_during_the_confirmation_runs_nothing(
    config: Config, tmp_path: Path, how: str
) -> None:
    """R84, R6, R40, R41: the follow-up stopped while its confirmation is open --
    "Stop and discard" (``cancel_task``), "Stop, keep to resume" (``abort_task``), a
    pause -- or the window's listener gone (R6: never an approval): no command runs.
    A kept follow-up lists the call as interrupted, so nothing counts as done."""
    target = tmp_path / "never"
    with trio.fail_after(DEADLINE_S):
        async with open_engine(config) as engine:
            listener = engine.registry.listen("cli-", windows={WINDOW})
            with listener:
                followup, entry = await offered(engine, listener, f"sub: run: touch {target}")
                if how in ("cancel_task", "abort_task"):
                    stop = Cause.USER_CANCELED if how == "cancel_task" else Cause.USER_ABORTED
                    await engine.answer(entry.id, AskReply(stop=stop), by=listener)
                elif how == "paused":
                    assert engine.cancel(followup.task_hash, Cause.PAUSED, session_id=SESSION)
                    assert await listener.next_notice() == Withdrawn(entry.id, "task paused")
                else:
                    listener.close()
                outcome = await followup.wait_done()
            pending = await engine.pending_tasks(SESSION)
            row = await engine.store.get_task(SESSION, followup.task_hash)
    assert not target.exists()
    expected = {
        "cancel_task": "canceled",
        "abort_task": "aborted",
        "paused": "paused",
        "disconnected": "finished",
    }
    assert outcome.status == expected[how]
    if how == "disconnected":
        told = (
            "the confirmation was withdrawn before anyone decided (client disconnected);"
            " none of the commands was run"
        )
        assert told in followup.messages[0].content
    kept = how in ("abort_task", "paused")
    assert [p.task_hash for p in pending] == ([followup.task_hash] if kept else [])
    if kept:
        assert row is not None
        assert row.snapshot is not None
        snapshot = snapshot_from_json(row.snapshot)
        assert [c.tool_name for c in snapshot.interrupted] == ["run_commands"]
        assert snapshot.completed == []


@pytest.fixture
def guarded(tmp_path: Path) -> Path:
    """A folder the configuration makes a restricted path (R7)."""
    folder = tmp_path / "guarded"
    folder.mkdir()
    return folder


@pytest.fixture
def guarded_config(config: Config, guarded: Path) -> Config:
    return attrs.evolve(config, tools=ToolsConfig(restricted_paths=[str(guarded)]))


@pytest.mark.parametrize("password", ["wrong-pw", "right-pw"])
async def test_a_restricted_path_asks_the_password_for_the_list(
    guarded_config: Config, guarded: Path, tmp_path: Path, password: str
) -> None:
    """R84, R7: a listed command touching a restricted path marks the confirmation
    restricted and asks for the system password (not cached); a wrong one runs none of
    the commands, the right one runs them all."""
    plain, inside = tmp_path / "plain", guarded / "inside"
    verifier = FakeVerifier("right-pw", cached=False)
    with trio.fail_after(DEADLINE_S):
        async with open_engine(guarded_config, verifier=verifier) as engine:
            with engine.registry.listen("cli-", windows={WINDOW}) as listener:
                followup, entry = await offered(
                    engine, listener, f"sub: run: touch {plain} ;; run: touch {inside}"
                )
                assert (entry.request.restricted, entry.request.need_password) == (True, True)
                reply = AskReply(approve=True, password=password)
                await engine.answer(entry.id, reply, by=listener)
                ok = password == "right-pw"
                verified = await listener.next_notice()
                assert verified == Verified(entry.id, ok, "" if ok else "wrong password")
                outcome = await followup.wait_done()
    assert outcome.status == "finished"
    assert (plain.exists(), inside.exists()) == (ok, ok)
    if not ok:
        assert "system password check failed" in followup.messages[0].content
    assert password not in followup.messages[0].content


async def test_nobody_at_the_window_means_nothing_runs(config: Config, tmp_path: Path) -> None:
    """R84, R8: with the starting window gone, the follow-up's confirmation has nobody
    to ask: it is denied, none of the commands runs, and the model is told why."""
    target = tmp_path / "never"
    with trio.fail_after(DEADLINE_S):
        async with open_engine(config) as engine:
            with engine.session(SESSION).hub.subscribe() as subscription:
                run = await engine.start_task(
                    SESSION, f"sub: run: touch {target}", origin=RunOrigin("conn-1", WINDOW)
                )
                await run.wait_done()
                # The follow-up may be done before job_settled is said: take both.
                followup, done = "", set()
                async for task_hash, event in subscription:
                    if isinstance(event, ev.JobSettled):
                        assert event.followup_task is not None
                        followup = event.followup_task
                    elif isinstance(event, ev.Done):
                        done.add(task_hash)
                    if followup in done:
                        break
            record = await engine.history_record(SESSION, followup)
    assert not target.exists()
    told = "not run: denied: no front-end is listening for confirmations of this session"
    assert f"{told}; none of the commands was run" in record.content


class Scene:
    """A model for a parent, its one sub-agent and the follow-up, told apart by their
    first message: the sub-agent proposes ``child_calls`` one per turn, then ends; the
    follow-up's first message is kept in ``followup``. The parent's later turns wait
    for ``parent_gate`` when one is given (and keep the messages they were given)."""

    name = "scene"

    def __init__(
        self, child_calls: Sequence[dict[str, Any]], parent_gate: trio.Event | None = None
    ) -> None:
        self.child_calls = list(child_calls)
        self.parent_gate = parent_gate
        self.parent_turns = 0
        self.parent_seen: list[str] = []
        self.followup: list[str] = []

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        *,
        on_text: TextSink | None = None,
        on_retry: RetrySink | None = None,
    ) -> ModelReply:
        await trio.lowlevel.checkpoint()
        first = first_input(messages)
        latest = messages[-1].content  # a follow-up's own input: the session's exchanges precede it
        if latest.startswith(FOLLOWUP_HEADER):
            self.followup.append(latest)
            return ModelReply(text="summary")
        if first == "child":
            if self.child_calls:
                args = self.child_calls.pop(0)
                return ModelReply(
                    tool_calls=[
                        ToolCallRequest(id=f"k{len(messages)}", name="run_command", args=args)
                    ]
                )
            return ModelReply(text="child done")
        self.parent_turns += 1
        if self.parent_turns > 1:
            if self.parent_gate is not None:
                await self.parent_gate.wait()
            self.parent_seen = [m.content for m in messages]
            return ModelReply(text="bye")
        args = {"objectives": ["child"], "objective": "Make files", "next": "Say so"}
        return ModelReply(
            tool_calls=[ToolCallRequest(id="p1", name="background_subagents", args=args)]
        )


async def test_an_argv_command_and_its_cwd_are_shown_and_run_as_proposed(
    config: Config, tmp_path: Path
) -> None:
    """R84, R77: a sub-agent's argv command (a word with a space in it) and its
    ``cwd`` reach the confirmation exactly as proposed, and run exactly so: the argv
    as words (no shell), in that folder."""
    work = tmp_path / "work"
    work.mkdir()
    argv = ["touch", "a file; rm -rf x"]
    model = Scene([{"command": argv, "cwd": str(work)}, {"command": "true"}])
    with trio.fail_after(DEADLINE_S):
        async with open_engine(config, model=model) as engine:
            with engine.registry.listen("cli-", windows={WINDOW}) as listener:
                followup, entry = await offered(engine, listener, "go")
                assert entry.request.tool_args == {
                    "command 1": argv,
                    "cwd 1": os.path.realpath(work),
                    "command 2": "true",
                    "cwd 2": os.path.realpath(os.getcwd()),
                }
                assert entry.request.subagent.startswith("background sub-agent sub_")
                assert entry.request.subagent.endswith(": child")
                await engine.answer(entry.id, AskReply(approve=True), by=listener)
                assert (await followup.wait_done()).status == "finished"
    assert sorted(p.name for p in work.iterdir()) == ["a file; rm -rf x"]
    [first] = model.followup
    assert f"## {PROPOSALS_TITLE}\n" in first
    assert f"command 1: {json.dumps(argv)}\nexit 0" in first


def test_the_arguments_round_trip_and_nothing_else_is_read_as_a_command() -> None:
    """R84: the arguments shown are the commands run: `proposals_from_args` reads back
    exactly what `proposal_args` wrote, and refuses anything else (another name, a
    different order, a cwd without its command, an empty list, too many)."""
    proposals = [Proposal("touch a"), Proposal(["rm", "b c"], cwd="/w"), Proposal("x\ny")]
    args = proposal_args(proposals)
    assert list(args) == ["command 1", "command 2", "cwd 2", "command 3"]
    assert proposals_from_args(args) == proposals
    bad: list[Callable[[dict[str, Any]], dict[str, Any]]] = [
        lambda a: {**a, "extra": "rm -rf /"},
        lambda a: {"command 2": a["command 2"], "command 1": a["command 1"]},
        lambda a: {"cwd 1": "/w", "command 1": "ls"},
        lambda a: {"command 1": ""},
        lambda a: {"command 1": []},
        lambda a: {"command 1": "ls", "cwd 1": 3},
        lambda a: {},
        lambda a: proposal_args([Proposal("ls")] * (MAX_PROPOSALS + 1)),
    ]
    for make in bad:
        with pytest.raises(ValueError, match="command"):
            proposals_from_args(make(args))


async def test_the_commands_are_offered_even_when_the_report_reached_the_running_task(
    config: Config, tmp_path: Path
) -> None:
    """R84, R26: the sub-agent ends while its starting task still runs, so its report
    (naming the command) goes into that task's next turn and no report is held; the job
    still gets a follow-up, and the follow-up offers the command."""
    target = tmp_path / "late"
    gate = trio.Event()
    model = Scene([{"command": f"touch {target}"}], parent_gate=gate)
    with trio.fail_after(DEADLINE_S):
        async with open_engine(config, model=model) as engine:
            with engine.registry.listen("cli-", windows={WINDOW}) as listener:
                with engine.session(SESSION).hub.subscribe() as subscription:
                    run = await engine.start_task(SESSION, "go", origin=RunOrigin("c", WINDOW))
                    async for _, event in subscription:
                        if isinstance(event, ev.LegFinished):
                            break
                gate.set()
                assert (await run.wait_done()).status == "finished"
                notice = await listener.next_notice()
                assert isinstance(notice, Offered)
                assert notice.entry.request.tool_args == {
                    "command 1": f"touch {target}",
                    "cwd 1": os.path.realpath(os.getcwd()),
                }
                job = engine.background.jobs()[0]
                followup = engine.find_run(notice.entry.request.task_hash, SESSION)
                assert followup is not None
                await engine.answer(notice.entry.id, AskReply(approve=True), by=listener)
                assert (await followup.wait_done()).status == "finished"
    assert job.held == 0
    assert any(f"touch {target}" in text for text in model.parent_seen)
    assert target.exists()


@pytest.mark.parametrize("how", ["abort_task", "paused"])
async def test_a_kept_followup_offers_the_commands_again_when_resumed(
    config: Config, tmp_path: Path, how: str
) -> None:
    """R84, R41, R42: a follow-up stopped and kept during its confirmation ("Stop, keep
    to resume", or a pause) ran nothing; resumed from the window, it offers the same
    commands again, whole, and approving then runs them."""
    target = tmp_path / "later"
    with trio.fail_after(DEADLINE_S):
        async with open_engine(config) as engine:
            with engine.registry.listen("cli-", windows={WINDOW}) as listener:
                followup, entry = await offered(engine, listener, f"sub: run: touch {target}")
                if how == "abort_task":
                    await engine.answer(entry.id, AskReply(stop=Cause.USER_ABORTED), by=listener)
                else:
                    engine.cancel(followup.task_hash, Cause.PAUSED, session_id=SESSION)
                    assert isinstance(await listener.next_notice(), Withdrawn)
                await followup.wait_done()
                assert not target.exists()
                resumed = await engine.resume(
                    SESSION, followup.task_hash, origin=RunOrigin("conn-2", WINDOW)
                )
                notice = await listener.next_notice()
                assert isinstance(notice, Offered)
                request = notice.entry.request
                assert (request.task_hash, request.tool_name) == (resumed.task_hash, "run_commands")
                assert request.tool_args == entry.request.tool_args
                job = engine.background.jobs()[0]
                assert (
                    request.subagent
                    == f"background sub-agents of job {job.id} (offered again on resume)"
                )
                assert not target.exists()
                await engine.answer(notice.entry.id, AskReply(approve=True), by=listener)
                assert (await resumed.wait_done()).status == "finished"
    assert target.exists()
    assert f"## {PROPOSALS_TITLE}\n" in resumed.messages[0].content


def test_a_resume_offers_again_only_what_was_kept_whole() -> None:
    """R84, R11: on resume only an interrupted follow-up offer is made again, and only
    when its arguments were kept whole: a command elided in the snapshot is never
    offered (it would not be the command proposed), nor a call the model made."""
    services = cast(Services, object())  # only held by the tool until it runs
    whole = InterruptedCall(
        call_id="offer_job_0123abcd", tool_name="run_commands", args={"command 1": "touch x"}
    )
    long = InterruptedCall(
        call_id="offer_job_4567ef01",
        tool_name="run_commands",
        args={"command 1": "touch " + "y" * 10_000},
    )
    other = InterruptedCall(call_id="c1", tool_name="run_commands", args={"command 1": "ls"})
    snapshot = make_snapshot("objective", [], interrupted=[whole, long, other])
    [again] = reoffers(services, snapshot)
    assert (again.call.id, again.call.args) == ("offer_job_0123abcd", {"command 1": "touch x"})
    assert "..." in snapshot.interrupted[1].args["command 1"]
    # After a model turn the call can only be the model's own: never offered.
    asked = ToolCallRequest(id=whole.call_id, name=whole.tool_name, args=whole.args)
    talk = [Message(role="user", content="go"), Message(role="assistant", tool_calls=[asked])]
    assert reoffers(services, make_snapshot("objective", talk, interrupted=[whole])) == []
