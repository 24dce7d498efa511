"""A background sub-agent's command approved in its job's follow-up, through the real
daemon and the agentrio client, and in the REPL (R84, with R26, R30, R77, R78).

``sub: run: touch X`` starts one background sub-agent; it may not ask, so ``touch X``
is not run (R30). Once the job settles, its follow-up task raises one ``run_commands``
confirmation in the starting ``cli-`` session, to the window that started the job:
the script listens on ``cli-`` and answers it as a front-end would; the REPL (in
tmux, skipped without it) shows it in its ordinary confirmation dialog.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest
import trio

from agentrio import Client
from agentrio.handles import Listener, Subscription
from agentrio.protocol.events import Done, ToolResult, ToolSkipped
from agentrio.protocol.frames import Ask
from agentrio.testing import RunningDaemon
from tests.e2e.test_repl_tmux import ROOT, Tmux, wait_armed, wait_for

DEADLINE_S = 60
#: The real directory the daemon (started from here) runs commands that name none in.
HERE = os.path.realpath(os.getcwd())


async def _next_ask(listener: Listener) -> Ask:
    while True:
        notice = await listener.receive()
        if isinstance(notice, Ask):
            return notice


async def _done(
    subscription: Subscription, task_hash: str
) -> tuple[Done, list[ToolResult | ToolSkipped]]:
    """The ``done`` event of ``task_hash``, and its tool results (or skips) before it."""
    results: list[ToolResult | ToolSkipped] = []
    while True:
        frame = await subscription.receive()
        if frame.task_hash != task_hash:
            continue
        if isinstance(frame.event, ToolResult | ToolSkipped):
            results.append(frame.event)
        if isinstance(frame.event, Done):
            return frame.event, results


async def _offer(client: Client, session: str, text: str) -> tuple[Ask, Subscription, str]:
    """Run ``text`` from window ``w1`` to its end; return the follow-up's confirmation,
    the session's subscription and the starting task's hash."""
    listener = await client.listen("cli-")
    subscription = await client.subscribe(session)
    run = await client.run(session, text, window_hash="w1")
    assert (await run.wait_done()).status == "finished"
    return await _next_ask(listener), subscription, run.task_hash


async def test_approving_the_followups_confirmation_runs_the_command(
    agentrio_client: Client, tmp_path: Path
) -> None:
    """R84, R30, R26, R78: the follow-up's one confirmation names the sub-agent's
    command whole, in the starting session, for a new task (the follow-up); nothing
    ran before it; approving it runs the command there and the task finishes."""
    target = tmp_path / "made-after-approval"
    session = "cli-e2e-offer"
    with trio.fail_after(DEADLINE_S):
        ask, subscription, started = await _offer(
            agentrio_client, session, f"sub: run: touch {target}"
        )
        assert (ask.kind, ask.tool_name) == ("tool_confirm", "run_commands")
        assert ask.tool_args == {"command 1": f"touch {target}", "cwd 1": HERE}
        assert (ask.session_id, ask.restricted, ask.need_password) == (session, False, False)
        assert ask.task_hash != started
        assert ask.subagent.startswith("background sub-agent sub_")
        assert not target.exists()
        await agentrio_client.reply(ask.id, approve=True)
        done, results = await _done(subscription, ask.task_hash)
    assert target.exists()
    [result] = results
    assert isinstance(result, ToolResult)
    assert (result.tool_name, result.ok) == ("run_commands", True)
    assert result.output == f'command 1: "touch {target}"\nexit 0'
    assert done.text  # the follow-up's model answered after the commands ran


async def test_denying_it_runs_nothing_and_the_followup_says_why(
    agentrio_client: Client, tmp_path: Path
) -> None:
    """R84, R26: Deny with a reason: the command does not run, and the follow-up's
    call says so with the reason (which its model reads)."""
    target = tmp_path / "never-made"
    session = "cli-e2e-offer-deny"
    with trio.fail_after(DEADLINE_S):
        ask, subscription, _ = await _offer(agentrio_client, session, f"sub: run: touch {target}")
        await agentrio_client.reply(ask.id, approve=False, reason="not today")
        done, results = await _done(subscription, ask.task_hash)
    assert not target.exists()
    [skipped] = results
    assert isinstance(skipped, ToolSkipped)
    assert skipped.tool_name == "run_commands"
    assert skipped.reason == "denied by the user: not today; none of the commands was run"
    assert done.text


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_the_repl_shows_the_offer_in_its_ordinary_dialog(
    agentrio_daemon: RunningDaemon, tmp_path: Path
) -> None:
    """R84, R77, R5: in the REPL, ``sub: run: touch X`` ends in the follow-up's
    confirmation, drawn by the ordinary dialog: the tool, whose commands they are, the
    command whole; nothing ran before Enter approves it, and then X exists."""
    target = tmp_path / "made-in-the-repl"
    tmux = Tmux()
    command = (
        f"cd {ROOT} && AGENTRIO_HOME={agentrio_daemon.home} {sys.executable} -m agentrio.repl; "
        "echo REPL-EXITED $?; sleep 60"
    )
    tmux("new-session", "-d", "-s", "repl", "-x", "120", "-y", "40", command)
    try:
        wait_for(lambda: "connected to agentrio daemon" in tmux.screen(), "REPL connected")
        tmux("send-keys", "-t", "repl", f"sub: run: touch {target}", "Enter")
        wait_for(lambda: "run_commands?" in tmux.screen(), "the run_commands dialog")
        wait_for(lambda: f"command 1: touch {target}" in tmux.screen(), "the command, whole")
        wait_for(lambda: "from background sub-agent sub_" in tmux.screen(), "whose commands")
        assert not target.exists()
        wait_armed(tmux)
        tmux("send-keys", "-t", "repl", "Enter")
        wait_for(target.exists, "the approved command's file")
        wait_for(lambda: "  ✓ run_commands" in tmux.lines(), "the result line")
        tmux("send-keys", "-t", "repl", "/quit", "Enter")
        wait_for(lambda: "REPL-EXITED 0" in tmux.lines(), "the REPL to exit with status 0")
    finally:
        tmux("kill-server")
