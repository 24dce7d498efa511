"""Issue 31 item 8, R99: another front-end answers ``agentrio exec``'s asks.

``agentrio exec`` as a subprocess against the real daemon, while a WebSocket script
that sent ``listen`` for the session's prefix is there: the script is offered the
task's confirmation, not exec; its approval runs the command exactly once (its line
on disk) and exec exits 0; its denial, with a reason, leaves the file absent, reaches
the model as the person's ("denied by the user"), and exec exits 3. A script that
leaves without answering hands the ask back to exec, whose policy denies it ("denied
by the exec policy"); with no listener at all exec's policy answers at once (also
`tests/e2e/test_exec.py`).
"""

from __future__ import annotations

import subprocess
from collections.abc import Awaitable, Callable
from pathlib import Path

import trio

from agentrio import Client
from agentrio.connecting import CLIENT_NAME
from agentrio.handles import Listener
from agentrio.protocol.asks import frontend_name
from agentrio.protocol.frames import Ask
from agentrio.repl.exec_asks import NOT_ALLOWED
from agentrio.testing import RunningDaemon
from tests.e2e.test_exec import DEADLINE_S, HERE, _exec

#: The front-end name asks' states give a script's client (``agentrio-client/1``).
SCRIPT = frontend_name(CLIENT_NAME)


async def _exec_answered(
    daemon: RunningDaemon, listener: Listener, text: str, answer: Callable[[Ask], Awaitable[None]]
) -> tuple[Ask, subprocess.CompletedProcess[bytes]]:
    """Run ``agentrio exec text`` while ``listener`` waits for its first ask, which
    ``answer`` answers; the ask and exec's result."""
    done: list[subprocess.CompletedProcess[bytes]] = []

    async def run() -> None:
        done.append(await _exec(daemon, text))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run)
        with trio.fail_after(DEADLINE_S):
            ask = await listener.receive()
        assert isinstance(ask, Ask)
        await answer(ask)
    return ask, done[0]


def _command(log: Path) -> str:
    return f"sh -c 'echo ran >> {log}'"


async def test_a_listening_script_approves_an_exec_tasks_confirmation(
    agentrio_daemon: RunningDaemon, agentrio_client: Client, tmp_path: Path
) -> None:
    """R99, item 8: the ``listen("cli-")`` script is shown exec's confirmation (the
    command and the directory it runs in); its approval runs the command once and exec
    exits 0, saying on stderr who approved it."""
    log = tmp_path / "ran.log"
    command = _command(log)
    listener = await agentrio_client.listen("cli-")

    async def approve(ask: Ask) -> None:
        await agentrio_client.reply(ask.id, approve=True)

    ask, result = await _exec_answered(agentrio_daemon, listener, f"run: {command}", approve)
    assert ask.session_id.startswith("cli-")
    assert ask.tool_args == {"command": command, "cwd": HERE}
    assert result.returncode == 0, result.stderr.decode()
    assert log.read_text() == "ran\n"
    notes = result.stderr.decode()
    assert f"agentrio exec: asked on {SCRIPT}, waiting for its answer: {command}" in notes
    assert f"agentrio exec: approved on {SCRIPT}: {command} (in {HERE})" in notes
    assert "denied" not in notes


async def test_a_listening_scripts_denial_is_the_persons(
    agentrio_daemon: RunningDaemon, agentrio_client: Client, tmp_path: Path
) -> None:
    """R99, item 8: the script denies with a reason: nothing runs (the file is
    absent), the model reads the person's denial and its reason, not the exec
    policy's, and exec exits 3 (a confirmation was denied)."""
    log = tmp_path / "ran.log"
    listener = await agentrio_client.listen("")

    async def deny(ask: Ask) -> None:
        await agentrio_client.reply(ask.id, approve=False, reason="not on a Friday")

    _, result = await _exec_answered(agentrio_daemon, listener, f"run: {_command(log)}", deny)
    assert result.returncode == 3, result.stderr.decode()
    assert not log.exists()
    answer = result.stdout.decode()
    assert "denied by the user: not on a Friday" in answer
    assert "exec policy" not in answer
    assert f"agentrio exec: denied on {SCRIPT}: {_command(log)}" in result.stderr.decode()


async def test_a_script_leaving_unanswered_hands_the_ask_back_to_execs_policy(
    agentrio_daemon: RunningDaemon, tmp_path: Path
) -> None:
    """R99, R6: the script is shown the confirmation and closes its connection
    without answering: the ask is neither approved nor lost, exec's policy denies it
    (the model reads "denied by the exec policy"), the file is absent, exit 3."""
    log = tmp_path / "ran.log"
    done: list[subprocess.CompletedProcess[bytes]] = []

    async def run() -> None:
        done.append(await _exec(agentrio_daemon, f"run: {_command(log)}"))

    async with trio.open_nursery() as nursery:
        async with agentrio_daemon.connect() as script:
            listener = await script.listen("cli-")
            nursery.start_soon(run)
            with trio.fail_after(DEADLINE_S):
                ask = await listener.receive()
            assert isinstance(ask, Ask)
        # the script's connection is closed, its ask unanswered
    [result] = done
    assert result.returncode == 3, result.stderr.decode()
    assert not log.exists()
    assert f"denied by the exec policy: {NOT_ALLOWED}" in result.stdout.decode()
    assert "denied by the user" not in result.stdout.decode()
    assert "agentrio exec: denied (no --allow rule covers it)" in result.stderr.decode()
