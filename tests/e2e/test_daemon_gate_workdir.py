"""Issue 29 findings 4 and 10 through the real daemon and the agentrio client: a
confirmation shows the real working directory, "Always allow" remembers it and the
session's list says so; an approved program that does not exist is a tool result the
model reads, and the task goes on.

The builtin model names no ``cwd`` (its ``run: X`` is ``run_command`` with the command
only), so the directory is the daemon's own -- this test process's, which started it.
Rules bound to other directories, sub-agents and symlinks are attacked through the
in-process engine in tests/engine/tools/test_gate_workdir.py.
"""

from __future__ import annotations

import os
from pathlib import Path

import trio

from agentrio import Client, Decision
from agentrio.protocol.events import Confirm, ToolResult
from agentrio.testing import answer_asks

DEADLINE_S = 60
HERE = os.path.realpath(os.getcwd())


async def test_always_allow_shows_and_remembers_the_directory(
    agentrio_client: Client, tmp_path: Path
) -> None:
    """Issue 29 finding 4, R76: the confirmation's arguments carry the real directory
    the command runs in; "Always allow" remembers the command with it, ``list_allowed``
    shows both, and the same command in the same directory then runs unasked."""
    target = tmp_path / "made"
    session = "cli-e2e-gate-dir"
    with trio.fail_after(DEADLINE_S):
        first = await agentrio_client.run(session, f"run: touch {target}")
        [(ask, _)] = await answer_asks(first, lambda ask: Decision.allow(remember=True), limit=1)
        assert (await first.wait_done()).status == "finished"
        assert ask.tool_args == {"command": f"touch {target}", "cwd": HERE}
        [rule] = await agentrio_client.allowed(session)
        assert (rule.command, rule.cwd) == (f"touch {target}", HERE)
        target.unlink()
        again = await agentrio_client.run(session, f"run: touch {target}")
        assert (await again.wait_done()).status == "finished"
    assert target.exists()
    assert not [e for e in again.events_so_far if isinstance(e, Confirm)]


async def test_an_approved_missing_program_is_a_tool_result(agentrio_client: Client) -> None:
    """Issue 29 finding 10: an approved command whose program does not exist ends in a
    failed tool result the model reads -- not an internal error -- and the task
    finishes with the model's answer."""
    with trio.fail_after(DEADLINE_S):
        run = await agentrio_client.run("cli-e2e-gate-missing", "run: no-such-program-29 now")
        await answer_asks(run, lambda ask: Decision.allow(), limit=1)
        done = await run.wait_done()
    assert done.status == "finished"
    [result] = [e for e in run.events_so_far if isinstance(e, ToolResult)]
    assert (result.tool_name, result.ok) == ("run_command", False)
    assert result.output == (
        "not run: the program 'no-such-program-29' could not be started: No such file or directory"
    )
    assert run.final_text
