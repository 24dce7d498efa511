"""A session's working directory through the real daemon, from scripts (issue 31 items
1 and 3; R86).

The daemon runs in the checkout; the scripts name other directories. A ``cwd`` given
to ``run`` and to ``POST /v1/send`` reaches the command; a ``cd`` moves the session
and survives a daemon restart; a task paused at its confirmation before the ``cd`` is
resumed after the restart in the session's directory as it now is (the ``cd``'s), and
its confirmation names that directory. The built-in offline model runs the commands.
"""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import trio

from agentrio import connect
from agentrio.protocol.codec import decode
from agentrio.protocol.events import ToolResult, Workdir
from agentrio.protocol.frames import Ask
from agentrio.protocol.http import HistoryRecord, SendStarted
from agentrio.testing import DaemonProcess, RunningDaemon
from tests.e2e.conftest import ROOT

SESSION = "cli-workdir"


def _outputs(events: list[object]) -> list[str]:
    return [e.output for e in events if isinstance(e, ToolResult)]


async def _record(daemon: RunningDaemon, session_id: str, task_hash: str) -> str:
    headers = {"Authorization": f"Bearer {daemon.token}"}
    async with httpx.AsyncClient(base_url=daemon.base_url, headers=headers) as http:
        with trio.fail_after(20):
            while True:
                found = await http.get(f"/v1/session/{session_id}/task/{task_hash}/history")
                if found.status_code == 200:
                    return decode(found.content, HistoryRecord).content
                await trio.sleep(0.05)


async def _send(daemon: RunningDaemon, body: dict[str, object]) -> SendStarted:
    headers = {"Authorization": f"Bearer {daemon.token}"}
    async with httpx.AsyncClient(base_url=daemon.base_url, headers=headers) as http:
        sent = await http.post("/v1/send", json=body)
    assert sent.status_code == 202, sent.text
    return decode(sent.content, SendStarted)


async def _before_the_restart(daemon: RunningDaemon, project: Path, other: Path) -> str:
    """``run`` with a ``cwd``, then ``POST /v1/send`` with one; a task paused at its
    confirmation; a ``cd``. Returns the paused task's hash."""
    async with connect(daemon.ws_url, daemon.token) as client:
        ran = await client.run(SESSION, "run: pwd", cwd=project, allow_all=True)
        assert (await ran.wait_done()).status == "finished"
        assert _outputs(ran.events_so_far) == [f"exit 0\n{project}\n"]

        asking = await client.run(SESSION, "run: pwd")  # this home asks for every command
        ask = await asking.asks().receive()
        assert isinstance(ask, Ask)
        assert ask.tool_args["cwd"] == str(project)
        await asking.pause()
        assert (await asking.wait_done()).status == "paused"

        moved = await client.run(SESSION, "run: cd sub", allow_all=True)
        assert (await moved.wait_done()).status == "finished"
        shown = [e.path for e in moved.events_so_far if isinstance(e, Workdir)]
        assert shown == [str(project / "sub")]
    web = await _send(daemon, {"input": "run: pwd", "cwd": str(other), "allow_all": True})
    record = await _record(daemon, web.session_id, web.task_hash)
    assert f"exit 0\n{other}\n" in record, record
    return asking.task_hash


async def test_a_scripts_cwd_reaches_the_command_and_a_cd_survives_a_restart(
    tmp_path: Path,
) -> None:
    """R86, issue 31 (1, 3): commands run in the ``cwd`` a script gives (``run``, and
    ``POST /v1/send``), a ``cd`` moves the session for good (after a restart a task with
    no ``cwd`` runs there), and a task paused before the ``cd`` resumes there, its
    confirmation naming the directory it runs in."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text("[tools]\nreadonly_commands = []\n")
    project = Path(os.path.realpath(tmp_path / "project"))
    (project / "sub").mkdir(parents=True)
    other = Path(os.path.realpath(tmp_path / "other"))
    other.mkdir()
    first = DaemonProcess(home, cwd=ROOT)
    try:
        paused = await _before_the_restart(first.info, project, other)
    finally:
        assert first.stop() == 0
    second = DaemonProcess(home, cwd=ROOT)
    try:
        daemon = second.info
        async with connect(daemon.ws_url, daemon.token) as client:
            after = await client.run(SESSION, "run: pwd", cwd="", allow_all=True)
            assert (await after.wait_done()).status == "finished"
            assert _outputs(after.events_so_far) == [f"exit 0\n{project / 'sub'}\n"]

            resumed = await client.resume(SESSION, paused)
            ask = await resumed.asks().receive()
            assert isinstance(ask, Ask)
            assert ask.tool_args == {"command": "pwd", "cwd": str(project / "sub")}
            await client.decide(ask.id, True)
            assert (await resumed.wait_done()).status == "finished"
            assert _outputs(resumed.events_so_far) == [f"exit 0\n{project / 'sub'}\n"]
    finally:
        assert second.stop() == 0
