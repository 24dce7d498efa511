"""End to end through the real daemon: what runs unasked runs in the read-only sandbox.

The daemon's allowlist is widened on purpose (``touch``, ``python3``, ``cat``) to stand
for a policy mistake: the sandbox must still refuse to write, to reach the network and
to read the home -- three commands, three refusals from inside the sandbox (R75).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import trio

from agentrio import Decision
from agentrio.protocol.events import ToolCall, ToolResult
from agentrio.protocol.frames import Ask
from agentrio.testing import RunningDaemon
from tests.e2e.conftest import ROOT

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap missing")


@pytest.fixture
def agentrio_daemon_home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    (home / "config.toml").write_text(
        '[tools]\nreadonly_commands = ["touch", "python3", "cat", "ls"]\n'
    )
    return home


async def _unasked(daemon: RunningDaemon, command: str) -> ToolResult:
    """Run ``command`` through the built-in model; no front-end listens, so a command
    that needed a confirmation would be denied, not run."""
    async with daemon.connect() as client:
        run = await client.run("chat-sandbox", f"run: {command}")
        done = await run.wait_done()
    assert done.status == "finished", done
    calls = [e for e in run.events_so_far if isinstance(e, ToolCall)]
    assert [c.args["command"] for c in calls] == [command]
    (result,) = [e for e in run.events_so_far if isinstance(e, ToolResult)]
    return result


@pytest.fixture
def scratch() -> Iterator[Path]:
    """A folder outside /tmp (the sandbox has a private /tmp: a write there succeeds
    and vanishes, which proves less)."""
    folder = Path(tempfile.mkdtemp(prefix="sandbox-scratch-", dir=ROOT))
    try:
        yield folder
    finally:
        shutil.rmtree(folder)


async def test_unasked_commands_cannot_write_reach_the_network_or_read_the_home(
    agentrio_daemon: RunningDaemon, tmp_path: Path, scratch: Path
) -> None:
    """R75, R74: unasked commands cannot write or reach the network (refusals from
    inside the sandbox), and a link to the token asks; the side effects did not
    happen."""
    target = scratch / "written-by-the-model"
    result = await _unasked(agentrio_daemon, f"touch {target}")
    assert not result.ok
    assert "Read-only file system" in result.output
    assert not target.exists()
    in_tmp = tmp_path / "written-in-tmp"
    result = await _unasked(agentrio_daemon, f"touch {in_tmp}")
    assert not in_tmp.exists()  # the private /tmp took it

    port = agentrio_daemon.base_url.rsplit(":", 1)[1]
    probe = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=2)"
    result = await _unasked(agentrio_daemon, f'python3 -c "{probe}"')
    assert not result.ok
    assert "Network is unreachable" in result.output or "Connection refused" in result.output

    # A link to the token is judged by its real path (issue 29): it asks, and nobody
    # listens, so it is denied (tests/e2e/test_sandbox_escapes.py attacks further).
    link = tmp_path / "innocent.txt"
    link.symlink_to(agentrio_daemon.home / "token")
    async with agentrio_daemon.connect() as client:
        run = await client.run("chat-sandbox", f"run: cat {link}")
        await run.wait_done()
    assert "no front-end is listening" in run.final_text
    assert agentrio_daemon.token not in repr(run.events_so_far) + run.final_text


async def test_health_reports_the_sandbox(agentrio_daemon: RunningDaemon) -> None:
    """R75: /v1/health says the sandbox is active, and which program serves it."""
    async with httpx.AsyncClient() as http:
        body = (await http.get(f"{agentrio_daemon.base_url}/v1/health")).json()
    assert body["sandbox"]["active"] is True
    assert "bwrap" in body["sandbox"]["detail"]


async def test_health_answers_while_a_huge_command_is_judged(
    agentrio_daemon: RunningDaemon,
) -> None:
    """Issue 15 item 1: a ~900 KB one-word command is refused for running unasked by
    its size alone, and judged off the event loop: /v1/health keeps answering (the
    measured figure, < 50 ms, is in docs/benchmarks.md; this bound only catches a
    freeze, which took 35 s before)."""
    word = "a" * 900_000
    latencies: list[float] = []
    async with httpx.AsyncClient() as http, agentrio_daemon.connect() as client:
        run = await client.run("chat-huge", f"run: ls {word}")
        while run.done is None:
            start = trio.current_time()
            response = await http.get(f"{agentrio_daemon.base_url}/v1/health")
            latencies.append(trio.current_time() - start)
            assert response.status_code == 200
            with trio.move_on_after(0.01):
                await run.wait_done()
        done = await run.wait_done()
    assert done.status == "finished"
    assert "no front-end is listening" in run.final_text
    assert max(latencies) < 2.0, latencies


async def test_remembered_commands_end_to_end(
    agentrio_daemon: RunningDaemon, scratch: Path
) -> None:
    """R76 through the daemon: "Always allow" over a ``cli-`` window's ask remembers the
    exact command; ``list_allowed`` and ``GET …/allowed`` show it; a longer command that
    starts the same way asks again; ``DELETE …/allowed/{id}`` removes it and answers
    what it removed (R92)."""
    session, window = "cli-allowed", "w-allowed"
    first, mark = scratch / "first", scratch / "MARK"
    asked: list[str] = []

    def rule(ask: Ask) -> Decision:
        asked.append(ask.tool_args["command"])
        return Decision.allow(remember=True) if len(asked) == 1 else Decision.deny("no")

    base, headers = agentrio_daemon.base_url, {"Authorization": f"Bearer {agentrio_daemon.token}"}
    async with agentrio_daemon.connect() as client, httpx.AsyncClient() as http:
        for command in (f"mkdir {first}", f"mkdir {first}-again && touch {mark}"):
            run = await client.run(session, f"run: {command}", window_hash=window, on_ask=rule)
            assert (await run.wait_done()).status == "finished"
        (remembered,) = await client.allowed(session)
        assert remembered.command == f"mkdir {first}"
        listed = (await http.get(f"{base}/v1/session/{session}/allowed", headers=headers)).json()
        here = os.path.realpath(os.getcwd())
        assert listed["rules"] == [
            {
                "id": remembered.id,
                "command": f"mkdir {first}",
                "added_at": remembered.added_at,
                "cwd": here,
                "kind": "command",
                "covers": f"exactly `mkdir {first}` in {here}",
            }
        ]
        first.rmdir()
        run = await client.run(session, f"run: mkdir {first}", window_hash=window, on_ask=rule)
        await run.wait_done()
        assert first.is_dir()
        gone = await http.delete(
            f"{base}/v1/session/{session}/allowed/{remembered.id}", headers=headers
        )
        assert gone.status_code == 200
        assert gone.json() == {"rules": [], "removed": listed["rules"]}
        assert await client.allowed(session) == []
        missing = await http.delete(
            f"{base}/v1/session/{session}/allowed/{remembered.id}", headers=headers
        )
        assert missing.status_code == 404
    assert asked == [f"mkdir {first}", f"mkdir {first}-again && touch {mark}"]
    assert not mark.exists()
