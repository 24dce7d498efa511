"""Tools through the in-process engine: ask_user by origin, confirmations, secrets,
process groups. R8, R10–R13, R48, R60, R73."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

import pytest
import trio
import trio.testing

from agentrio.engine.assembly import open_engine
from agentrio.engine.config import Config
from agentrio.engine.messages import ASK_RESUME_HEADER
from agentrio.engine.models.base import ModelReply, ToolCallRequest
from agentrio.engine.models.scripted import ScriptedModel
from agentrio.engine.pending import AskReply, Offered, Verified
from agentrio.engine.runs import RunOrigin
from agentrio.engine.tools.sudo import FakeVerifier
from agentrio.protocol import dumps
from agentrio.protocol.causes import Cause
from agentrio.protocol.events import Question, SecretAsk, TaskStarted, ToolResult
from tests.engine.conftest import first_input


def _call(call_id: str, name: str, **args: object) -> ToolCallRequest:
    return ToolCallRequest(id=call_id, name=name, args=dict(args))


async def test_chat_ask_user_parks_with_siblings_committed_then_resumes(
    config: Config, wall_clock: Callable[[], float]
) -> None:
    """R11, R12: from a chat- session the round's other calls run and are committed,
    the task parks; the answer (here: a listener's reply to the parked question)
    resumes it as a new turn whose input starts with the R12 header."""
    model = ScriptedModel(
        [
            ModelReply(
                text="Checking first.",
                tool_calls=[
                    _call(
                        "c1",
                        "ask_user",
                        questions=[{"text": "Deploy where?", "options": ["staging", "prod"]}],
                    ),
                    _call("c2", "run_command", command="echo sibling-ran"),
                ],
            ),
            ModelReply(text="Deploying to the chosen place."),
        ]
    )
    async with open_engine(config, model=model, clock=wall_clock) as engine:
        run = await engine.start_task("chat-park", "deploy the site")
        outcome = await run.wait_done()
        assert outcome.status == "parked"
        row = await engine.store.get_task("chat-park", run.task_hash)
        assert row is not None
        assert (row.state, row.questions) == (
            "parked",
            [Question(text="Deploy where?", options=["staging", "prod"])],
        )
        assert row.snapshot is not None
        assert "sibling-ran" in str(row.snapshot["completed"])
        pending = await engine.pending_tasks("chat-park")
        assert [(p.task_hash, p.has_questions) for p in pending] == [(run.task_hash, True)]
        with engine.registry.listen("chat-") as listener:
            notice = await listener.next_notice()
            assert isinstance(notice, Offered)
            assert notice.entry.parked
            await engine.answer(notice.entry.id, AskReply(answers=["staging"]), by=listener)
        resumed = engine.find_run(run.task_hash, "chat-park")
        assert resumed is not None  # latest task of the session: same hash (R36)
        assert resumed.input.startswith(ASK_RESUME_HEADER)
        assert "A: staging" in resumed.input
        assert "sibling-ran" in resumed.input
        assert (await resumed.wait_done()).status == "finished"
        assert first_input(model.calls[1]) == resumed.input
        assert await engine.pending_tasks("chat-park") == []
        [started] = [
            e
            for e in engine.session("chat-park").hub.events_of(run.task_hash)
            if isinstance(e, TaskStarted) and e.resumed_from
        ]
        # What front-ends show as "you" for the resumed run: the answer, not the input.
        assert (started.resumed_from, started.said) == (run.task_hash, "staging")


async def test_cli_ask_user_is_answered_inline(
    config: Config, autojump_clock: trio.testing.MockClock, wall_clock: Callable[[], float]
) -> None:
    """R10: from a cli- task with its window connected the same run continues."""
    async with open_engine(config, clock=wall_clock) as engine:
        with engine.registry.listen("cli-", windows={"w1"}) as listener:
            run = await engine.start_task(
                "cli-inline", "ask: Which colour? | red, blue", origin=RunOrigin("c1", "w1")
            )
            notice = await listener.next_notice()
            assert isinstance(notice, Offered)
            assert notice.entry.request.questions[0].options == ["red", "blue"]
            await engine.answer(notice.entry.id, AskReply(answers=["blue"]), by=listener)
            outcome = await run.wait_done()
        assert outcome.status == "finished"
        assert "blue" in outcome.text
        assert await engine.pending_tasks("cli-inline") == []


async def test_cli_ask_user_without_a_window_parks(
    config: Config, autojump_clock: trio.testing.MockClock, wall_clock: Callable[[], float]
) -> None:
    """R10: a cli- task whose window is not connected parks instead of waiting."""
    async with open_engine(config, clock=wall_clock) as engine:
        run = await engine.start_task(
            "cli-gone", "ask: Proceed? | yes, no", origin=RunOrigin("c1", "w1")
        )
        assert (await run.wait_done()).status == "parked"
        resumed = await engine.resume("cli-gone", run.task_hash, answers=["yes"])
        assert (await resumed.wait_done()).status == "finished"


async def test_confirmation_without_listener_is_denied(
    config: Config,
    autojump_clock: trio.testing.MockClock,
    wall_clock: Callable[[], float],
    tmp_path: Path,
) -> None:
    """R8: nobody can confirm → the command is not run and the task says why."""
    target = tmp_path / "must-not-exist"
    async with open_engine(config, clock=wall_clock) as engine:
        run = await engine.start_task("chat-deny", f"run: touch {target}")
        outcome = await run.wait_done()
        events = engine.session("chat-deny").hub.events_of(run.task_hash)
    assert outcome.status == "finished"
    skipped = [e for e in events if type(e).__name__ == "ToolSkipped"]
    assert len(skipped) == 1
    assert skipped[0].reason.startswith("denied: no front-end is listening")  # type: ignore[attr-defined]
    assert "was not run" in outcome.text
    assert not target.exists()


async def test_confirmation_approved_runs_and_deny_reason_reaches_model(
    config: Config, wall_clock: Callable[[], float], tmp_path: Path
) -> None:
    """R60: a non-read-only command confirms through the registry; approve runs it,
    deny with a reason does not and tells the model why."""
    made, refused = tmp_path / "made", tmp_path / "refused"
    async with open_engine(config, clock=wall_clock) as engine:
        with engine.registry.listen("chat-") as listener:
            first = await engine.start_task("chat-ok", f"run: touch {made}")
            notice = await listener.next_notice()
            assert isinstance(notice, Offered)
            await engine.answer(notice.entry.id, AskReply(approve=True), by=listener)
            assert (await first.wait_done()).status == "finished"
            second = await engine.start_task("chat-ok", f"run: touch {refused}")
            notice = await listener.next_notice()
            assert isinstance(notice, Offered)
            await engine.answer(
                notice.entry.id, AskReply(approve=False, reason="not today"), by=listener
            )
            outcome = await second.wait_done()
    assert made.exists()
    assert not refused.exists()
    assert "denied by the user: not today" in outcome.text


async def test_read_only_command_needs_no_confirmation(
    config: Config, wall_clock: Callable[[], float]
) -> None:
    """R60: a single allowlisted program without shell operators runs unconfirmed."""
    async with open_engine(config, clock=wall_clock) as engine:
        run = await engine.start_task("chat-ro", "run: echo read-only-ok")
        outcome = await run.wait_done()
    assert outcome.status == "finished"
    assert "read-only-ok" in outcome.text


async def test_restricted_path_needs_password_and_wrong_one_denies(
    config: Config, autojump_clock: trio.testing.MockClock, wall_clock: Callable[[], float]
) -> None:
    """R7: a command touching /etc asks for the system password (not cached); a wrong
    password denies the call and is never echoed."""
    verifier = FakeVerifier("right-pw", cached=False)
    async with open_engine(config, clock=wall_clock, verifier=verifier) as engine:
        with engine.registry.listen("chat-") as listener:
            run = await engine.start_task("chat-sudo", "run: touch /etc/agentrio-test")
            notice = await listener.next_notice()
            assert isinstance(notice, Offered)
            assert (notice.entry.request.restricted, notice.entry.request.need_password) == (
                True,
                True,
            )
            await engine.answer(
                notice.entry.id, AskReply(approve=True, password="wrong-pw-123"), by=listener
            )
            verified = await listener.next_notice()
            assert verified == Verified(notice.entry.id, False, "wrong password")
            outcome = await run.wait_done()
        events = engine.session("chat-sudo").hub.events_of(run.task_hash)
    assert "system password check failed" in outcome.text
    assert "wrong-pw-123" not in "".join(dumps(e) for e in events)
    assert not os.path.exists("/etc/agentrio-test")


async def test_secret_never_leaks(
    config: Config,
    autojump_clock: trio.testing.MockClock,
    wall_clock: Callable[[], float],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """R73: a secret given to store_secret appears in no event, history row, snapshot,
    log line or exception text — nor does its length (issue 19: the tool result said
    "(19 characters)")."""
    secret = "sk-VERY-SECRET-7731"
    caplog.set_level(logging.DEBUG)
    async with open_engine(config, clock=wall_clock) as engine:
        with engine.registry.listen("chat-") as listener:
            run = await engine.start_task("chat-secret", "secret: API_KEY")
            notice = await listener.next_notice()
            assert isinstance(notice, Offered)
            assert notice.entry.request.kind == "secret"
            await engine.answer(notice.entry.id, AskReply(answers=[secret]), by=listener)
            outcome = await run.wait_done()
            # park a second task in the same session so a snapshot exists too
            parked = await engine.start_task("chat-secret", "ask: And now? | a")
            assert (await parked.wait_done()).status == "parked"
        assert await engine.store.get_secret("chat-secret", "API_KEY") == secret
        events = engine.session("chat-secret").hub.events_of(run.task_hash)
        history = await engine.store.list_history("chat-secret", limit=10)
        rows = await engine.store.list_tasks("chat-secret")
    texts = [outcome.text, *(dumps(e) for e in events), *(repr(h) for h in history)]
    texts += [repr(r) for r in rows] + [r.getMessage() for r in caplog.records]
    assert all(secret not in text for text in texts)
    [result] = [e for e in events if isinstance(e, ToolResult)]
    assert result.output == "stored the secret API_KEY"
    assert outcome.text == "Stored the secret API_KEY."
    [asked] = [e for e in events if isinstance(e, SecretAsk)]
    assert (asked.confirm_hash, asked.key) == (notice.entry.id, "API_KEY")


@pytest.mark.parametrize(
    ("stop", "status", "kept"),
    [(Cause.USER_CANCELED, "canceled", False), (Cause.USER_ABORTED, "aborted", True)],
)
async def test_a_stop_chosen_in_a_secret_ask_stops_the_task(
    config: Config, wall_clock: Callable[[], float], stop: Cause, status: str, kept: bool
) -> None:
    """R60, R40, R41: "Stop and discard" / "Stop, keep to resume" answered to a secret
    ask stop the task with that cause and store nothing."""
    async with open_engine(config, clock=wall_clock) as engine:
        with engine.registry.listen("chat-") as listener:
            run = await engine.start_task("chat-stop", "secret: API_KEY")
            notice = await listener.next_notice()
            assert isinstance(notice, Offered)
            await engine.answer(notice.entry.id, AskReply(stop=stop), by=listener)
            outcome = await run.wait_done()
        assert outcome.status == status
        assert await engine.store.get_secret("chat-stop", "API_KEY") is None
        pending = await engine.store.list_tasks("chat-stop")
        assert bool(pending) is kept


async def test_cancelled_command_leaves_no_process_of_its_group(
    config: Config, wall_clock: Callable[[], float], tmp_path: Path
) -> None:
    """R48: cancelling a task kills its command's whole process group."""
    pids_file = tmp_path / "pids"
    command = f"sh -c 'sleep 1000 & echo $! $$ > {pids_file}; sleep 1000'"
    async with open_engine(config, clock=wall_clock) as engine:
        run = await engine.start_task("chat-kill", f"run: {command}", allow_all=True)
        with trio.fail_after(10):
            while not pids_file.exists() or not pids_file.read_text().strip():
                await trio.sleep(0.02)
        pids = [int(p) for p in pids_file.read_text().split()]
        engine.cancel(run.task_hash, Cause.USER_CANCELED)
        await run.wait_done()
        with trio.fail_after(3):
            while any(_alive(pid) for pid in pids):
                await trio.sleep(0.05)
    assert not any(_alive(pid) for pid in pids)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie still answers kill 0; it is dead for our purpose
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


async def test_restricted_path_with_right_password_runs(
    config: Config, wall_clock: Callable[[], float], tmp_path: Path
) -> None:
    """R7: the right system password approves a restricted command; the listener is
    told the check passed."""
    out = tmp_path / "hostname-copy"
    verifier = FakeVerifier("right-pw", cached=False)
    async with open_engine(config, clock=wall_clock, verifier=verifier) as engine:
        with engine.registry.listen("chat-") as listener:
            run = await engine.start_task("chat-sudo-ok", f"run: cat /etc/hostname > {out}")
            notice = await listener.next_notice()
            assert isinstance(notice, Offered)
            await engine.answer(
                notice.entry.id, AskReply(approve=True, password="right-pw"), by=listener
            )
            assert await listener.next_notice() == Verified(notice.entry.id, True, "")
            outcome = await run.wait_done()
    assert outcome.status == "finished"
    assert out.exists()


async def test_cached_sudo_credentials_skip_the_password(
    config: Config, autojump_clock: trio.testing.MockClock, wall_clock: Callable[[], float]
) -> None:
    """R7: while sudo credentials are cached the confirmation asks no password."""
    async with open_engine(
        config, clock=wall_clock, verifier=FakeVerifier("pw", cached=True)
    ) as engine:
        with engine.registry.listen("chat-") as listener:
            run = await engine.start_task("chat-sudo-c", "run: touch /etc/agentrio-cached")
            notice = await listener.next_notice()
            assert isinstance(notice, Offered)
            assert (notice.entry.request.restricted, notice.entry.request.need_password) == (
                True,
                False,
            )
            await engine.answer(notice.entry.id, AskReply(approve=False), by=listener)
            assert (await run.wait_done()).status == "finished"


async def test_parked_question_is_offered_again_after_a_restart(
    config: Config, wall_clock: Callable[[], float]
) -> None:
    """R11: a task parked before a restart is offered to listeners again; a listener's
    reply resumes it."""
    async with open_engine(config, clock=wall_clock) as engine:
        run = await engine.start_task("chat-restart", "ask: Still there? | yes, no")
        assert (await run.wait_done()).status == "parked"
    async with open_engine(config, clock=wall_clock) as engine:
        with engine.registry.listen("chat-") as listener:
            notice = await listener.next_notice()
            assert isinstance(notice, Offered)
            assert (notice.entry.parked, notice.entry.request.task_hash) == (True, run.task_hash)
            await engine.answer(notice.entry.id, AskReply(answers=["yes"]), by=listener)
        resumed = engine.find_run(run.task_hash, "chat-restart")
        assert resumed is not None
        outcome = await resumed.wait_done()
    assert outcome.status == "finished"
    assert "yes" in outcome.text
