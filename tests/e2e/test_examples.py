"""Every example in ``examples/`` against a real daemon (the plugin's
``agentrio_daemon``): each script runs as a subprocess that finds the daemon through
``AGENTRIO_HOME`` and must exit 0 with the expected output."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from functools import partial
from pathlib import Path

import trio

from agentrio.engine.config import load_config
from agentrio.protocol.events import Done, ToolResult
from agentrio.protocol.http import SendStarted
from agentrio.testing import RunningDaemon

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


async def run_example(daemon: RunningDaemon, name: str, *args: str) -> tuple[int, str]:
    result = await trio.run_process(
        [sys.executable, str(EXAMPLES / name), *args],
        env=daemon.env,
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )
    output = result.stdout.decode() + result.stderr.decode()
    return result.returncode, output


async def test_chat_frontend_self_check(agentrio_daemon: RunningDaemon, tmp_path: Path) -> None:
    """R2, R8, R60: the chat front-end approves the allowlisted command, denies the
    other with its reason, and exits 0."""
    with trio.fail_after(40):
        code, output = await run_example(
            agentrio_daemon, "chat_frontend.py", "--workdir", str(tmp_path)
        )
    assert code == 0, output
    lines = output.splitlines()
    assert [line.split()[0] for line in lines if line.startswith(("approved", "denied"))] == [
        "approved",
        "denied",
    ]
    assert f"touch {tmp_path / 'allowed.txt'}" in output
    assert "check    denied task: skipped [\"denied by the user: not on this front-end's" in output
    assert lines[-1] == "OK: the allowed command ran, the other was denied with the rule's reason"
    assert (tmp_path / "allowed.txt").exists()
    assert (tmp_path / "keep.txt").exists()


async def test_chat_frontend_serve_answers_and_stops_on_ctrl_c(
    agentrio_daemon: RunningDaemon, tmp_path: Path
) -> None:
    """R2, R8: ``--serve`` answers asks of every ``chat-`` session until SIGINT, then
    exits 0."""
    target = tmp_path / "served.txt"
    with trio.fail_after(40):
        async with (
            agentrio_daemon.connect() as client,
            trio.open_nursery() as nursery,
        ):
            serve = partial(
                trio.run_process,
                [sys.executable, "-u", str(EXAMPLES / "chat_frontend.py"), "--serve"],
                env=agentrio_daemon.env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                check=False,
            )
            process = await nursery.start(serve)
            assert process.stdout is not None
            output = b""
            while b"answering asks" not in output:
                output += await process.stdout.receive_some()
            events = await client.subscribe("chat-served")
            started = await client.send(f"run: touch {target}", session_id="chat-served")
            assert isinstance(started, SendStarted)
            seen = []
            async for frame in events:
                seen.append(frame.event)
                if isinstance(frame.event, Done):
                    break
            process.send_signal(signal.SIGINT)
            while chunk := await process.stdout.receive_some():
                output += chunk
            assert await process.wait() == 0
    assert [e.ok for e in seen if isinstance(e, ToolResult)] == [True]
    assert target.exists()
    assert f"approved chat-served  touch {target}" in output.decode()


async def test_pause_resume(agentrio_daemon: RunningDaemon) -> None:
    """R41, R42, §8: the pause/resume script pauses its task, sees it pending,
    resumes it to the end, and exits 0."""
    with trio.fail_after(40):
        code, output = await run_example(
            agentrio_daemon, "pause_resume.py", "--command", "sleep 1", "--session", "script-ex"
        )
    assert code == 0, output
    lines = output.splitlines()
    words = [line.split()[0] for line in lines]
    assert words == [
        "started",
        "paused",
        "pending",
        "resumed",
        "result",
        "finished",
        "reply",
        "OK:",
    ]
    assert lines[1].endswith("done status paused")
    assert lines[4] == "result    ok=True: exit 0"
    assert lines[5].endswith("done status finished")


async def test_examples_fail_without_a_daemon(tmp_path: Path) -> None:
    """§7: with no daemon in the home the scripts say so and exit non-zero."""
    for name in ("chat_frontend.py", "pause_resume.py"):
        result = await trio.run_process(
            [sys.executable, str(EXAMPLES / name), "--home", str(tmp_path)],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
        assert result.returncode == 2
        assert f"no_daemon: no daemon.json in {tmp_path}" in result.stderr.decode()


def test_openai_local_config_loads(tmp_path: Path) -> None:
    """R61: the local OpenAI-compatible example is a valid config.toml naming the
    openai provider at Ollama's address."""
    shutil.copy(EXAMPLES / "openai_local.toml", tmp_path / "config.toml")
    config = load_config(tmp_path)
    assert config.model.provider == "openai"
    assert config.model.base_url == "http://127.0.0.1:11434/v1"
    assert config.model.name == "llama3.1"
    assert config.model.timeout_s == 300.0
    assert config.home == str(tmp_path)
