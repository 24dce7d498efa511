"""Every decision on every front-end, through the real daemon (issue 34 item 2; R5, R7,
R40, R41, R76, R82, R92; the table of docs/frontends.md, "Every decision on every
front-end").

Front-end × decision: the REPL in tmux, the web page in headless Chromium, the
Telegram and Discord bots on their fake platforms (tests/e2e/decision_fronts.py),
each answering a ``run_command`` confirmation with one decision; what is asserted is
its effect on disk and in the daemon, never a screen:

- approve: the file the command writes exists;
- deny with a reason: it does not, and the reason is in the tool result the model read
  (the task's action record);
- always allow this exact command: the file exists, the ``command`` rule is listed,
  and the same command again runs with nobody answering;
- allow this turn: of two commands asked for in one model reply, the second runs
  unasked;
- an offered argv-prefix rule: the ``command_prefix`` rule is listed and a longer
  command under it runs unasked;
- stop and discard: nothing ran, the task ended canceled and is not pending;
- stop and keep: nothing ran, the task is pending;
- a restricted path: the REPL marks it as needing the system password; the page and
  the bots say why they do not ask it and offer no approving choice; nothing ran.

One daemon (and its terminal, browser or bot) serves all the decisions of one
front-end (``scope="module"`` groups them). Each decision writes its own files.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from agentrio import Client, connect
from agentrio.protocol import wording
from agentrio.protocol.rules import COMMAND, COMMAND_PREFIX
from tests.e2e.cdp import find_chromium
from tests.e2e.decision_fronts import DEADLINE_S, DECISIONS, Front, make_front

CHROMIUM = find_chromium()
FRONTS = ("repl", "web", "telegram", "discord")
REASON = "not before the review"


@pytest.fixture(scope="module")
def front(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Front]:
    name: str = request.param
    if name == "repl" and shutil.which("tmux") is None:
        pytest.skip("tmux is not installed")
    if name == "web" and CHROMIUM is None:
        pytest.skip("chromium is not installed")
    made = make_front(name, tmp_path_factory.mktemp(name), CHROMIUM)
    try:
        yield made
    finally:
        made.close()


async def _tasks(client: Client, session: str) -> tuple[dict[str, str], set[str]]:
    """The session's ended tasks (hash → status) and its pending ones."""
    ended = {entry.task_hash: entry.status for entry in await client.history(session)}
    pending = {task.task_hash for task in await client.pending(session)}
    return ended, pending


async def _settled(
    client: Client, session: str, before: tuple[dict[str, str], set[str]]
) -> tuple[str, str]:
    """Wait until a task of the session has ended or is pending that was neither
    before; returns its hash and ``pending`` or the status it ended with."""
    with trio.move_on_after(DEADLINE_S):
        while True:
            ended, pending = await _tasks(client, session)
            for task_hash, status in ended.items():
                if task_hash not in before[0]:
                    return task_hash, status
            for task_hash in pending - before[1]:
                return task_hash, "pending"
            await trio.sleep(0.1)
    raise AssertionError(f"no task of {session} ended")


async def _decide(
    ui: Front, client: Client, text: str, decision: str | None, reason: str = ""
) -> tuple[str, str]:
    """Say ``text``; answer its confirmation with ``decision`` (None: none is expected,
    nobody answers); wait for the task to end or wait in pending."""
    before = await _tasks(client, ui.session())
    await ui.say(text)
    if decision is not None:
        await ui.wait_confirm()
        await ui.choose(decision, reason)
    return await _settled(client, ui.session(), before)


async def _record(client: Client, session: str, task_hash: str) -> str:
    return (await client.history_record(session, task_hash)).content


@pytest.mark.parametrize("front", FRONTS, indirect=True, scope="module")
@pytest.mark.parametrize("decision", DECISIONS)
async def test_each_decision_on_each_front_end(front: Front, decision: str) -> None:
    """Issue 34 item 2, R5, R7, R40, R41, R76, R82, R92: the decision chosen on this
    front-end has its effect on disk and in the daemon (module docstring)."""
    work = front.work
    target = work / f"{decision}-made"
    here = os.path.realpath(work)
    async with front.open() as ui, connect(home=front.home) as client:
        session = ui.session()
        match decision:
            case "approve":
                task, status = await _decide(ui, client, f"run: touch {target}", "approve")
                assert status == "finished"
                assert target.exists()
            case "deny":
                task, status = await _decide(ui, client, f"run: touch {target}", "deny", REASON)
                assert status == "finished"
                assert f"not run: denied by the user: {REASON}" in await _record(
                    client, session, task
                )
                assert not target.exists()
            case "always":
                command = f"touch {target}"
                await _decide(ui, client, f"run: {command}", "always")
                assert target.exists()
                rules = await client.allowed(session)
                assert [(r.command, r.cwd) for r in rules if r.kind == COMMAND] == [(command, here)]
                target.unlink()
                _, status = await _decide(ui, client, f"run: {command}", None)
                assert (status, target.exists()) == ("finished", True)
            case "turn":
                second = work / "turn-second"
                text = f"runs: touch {target} ;; touch {second}"
                _, status = await _decide(ui, client, text, "turn")
                assert (status, target.exists(), second.exists()) == ("finished", True, True)
            case "prefix":
                await _decide(ui, client, "run: touch prefix-made", "prefix")
                rules = await client.allowed(session)
                assert [(r.command, r.cwd) for r in rules if r.kind == COMMAND_PREFIX] == [
                    ("touch prefix-made", here)
                ]
                _, status = await _decide(ui, client, "run: touch prefix-made prefix-more", None)
                assert status == "finished"
                assert (work / "prefix-made").exists()
                assert (work / "prefix-more").exists()
            case "discard":
                task, status = await _decide(ui, client, f"run: touch {target}", "discard")
                assert status == "canceled"
                assert task not in {t.task_hash for t in await client.pending(session)}
                assert not target.exists()
            case "keep":
                task, status = await _decide(ui, client, f"run: touch {target}", "keep")
                assert status == "pending"
                [kept] = [t for t in await client.pending(session) if t.task_hash == task]
                assert kept.objective == f"run: touch {target}"
                assert not target.exists()
            case "restricted":
                await _restricted(ui, client, work)


async def _restricted(ui: Front, client: Client, work: Path) -> None:
    """A command touching ``work/locked`` (a restricted path, R7): the REPL's dialog says
    it needs the system password (stopped here: the password is sudo's); the page and
    the bots say why they do not ask it, and nothing runs."""
    locked = work / "locked"
    locked.mkdir(exist_ok=True)
    target = locked / "made"
    before = await _tasks(client, ui.session())
    await ui.say(f"run: touch {target}")
    if ui.name == "repl":
        await ui.wait_confirm()
        assert wording.confirm_title("run_command", restricted=True)[-40:] in ui.screen_text()
        await ui.choose("discard")
        _, status = await _settled(client, ui.session(), before)
        assert status == "canceled"
    else:
        said = await ui.refused_shown()
        assert wording.RESTRICTED_ELSEWHERE in said
        task, status = await _settled(client, ui.session(), before)
        assert status == "finished"
        assert "not run: denied by the user: " in await _record(client, ui.session(), task)
    assert not target.exists()
