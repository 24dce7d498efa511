"""Issue 31 item 8: ``agentrio exec`` as a subprocess against the real daemon.

Exit codes for finished (0), failed (1), usage (2), refused (3), interrupted
(130), a closed stdout (141); ``--json`` lines that decode as the protocol's
frames and end with ``done``;
``--allow`` running exactly the command it fully matches, in exec's directory, and
nothing else (the file a refused command would create is absent, the one an appended
``rm`` would remove is still there); questions declined with a reason the model
reads; Ctrl-C cancelling the task (history ``canceled``) with its command's process
gone; a daemon started when none answers; the README's example as printed.

The builtin model names no ``cwd`` (``run: X`` is ``run_command`` with the command
only), so commands run in the daemon's directory -- this test process's, which started
it -- and exec runs there too, as a rule of ``--allow`` is bound to exec's directory.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import trio

from agentrio import Client
from agentrio.protocol.codec import decode_server_frame
from agentrio.protocol.events import Canceled, Done, TaskStarted, ToolSkipped
from agentrio.protocol.frames import DoneFrame, EventFrame
from agentrio.repl.exec_asks import NOT_ALLOWED
from agentrio.testing import RunningDaemon

DEADLINE_S = 60
HERE = os.path.realpath(os.getcwd())
ROOT = Path(__file__).resolve().parents[2]
EXEC = [sys.executable, "-m", "agentrio.repl", "exec"]


async def _exec(
    daemon: RunningDaemon, *argv: str, stdin: bytes = b"", cwd: str = HERE
) -> subprocess.CompletedProcess[bytes]:
    with trio.fail_after(DEADLINE_S):
        return await trio.run_process(
            [*EXEC, *argv],
            env=daemon.env,
            cwd=cwd,
            stdin=stdin,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )


async def _reap(process: trio.Process) -> None:
    """Kill ``process`` if it still runs (a failed test), wait for it, close its pipes."""
    if process.returncode is None:
        process.kill()
        await process.wait()
    for stream in (process.stdout, process.stderr):
        if stream is not None:
            await stream.aclose()


def _session(result: subprocess.CompletedProcess[bytes]) -> str:
    found = re.search(r"agentrio exec: session (cli-[0-9a-f]+);", result.stderr.decode())
    assert found, result.stderr.decode()
    return found[1]


async def test_a_finished_task_prints_its_text_and_exits_0(
    agentrio_daemon: RunningDaemon, agentrio_client: Client
) -> None:
    """Item 8: the task's text on stdout, notes on stderr, exit 0; ``--session``
    continues the same session (its history then holds both tasks)."""
    first = await _exec(agentrio_daemon, "hello")
    assert first.returncode == 0, first.stderr.decode()
    assert first.stdout.decode().startswith("I am the builtin offline model;")
    assert first.stdout.decode().endswith("\n")
    session = _session(first)
    again = await _exec(agentrio_daemon, "--session", session, "-", stdin=b"hello again")
    assert again.returncode == 0, again.stderr.decode()
    assert _session(again) == session
    history = await agentrio_client.history(session)
    assert [(e.objective, e.status) for e in history] == [
        ("hello again", "finished"),
        ("hello", "finished"),
    ]


async def test_a_failed_task_exits_1_and_bad_usage_2(agentrio_daemon: RunningDaemon) -> None:
    """Item 8: a model failure is exit 1 with the error on stderr; an empty text, a
    bad ``--allow`` pattern or a session id that is no ``cli-`` one is exit 2."""
    failed = await _exec(agentrio_daemon, "fail: the model broke")
    assert failed.returncode == 1
    assert failed.stdout == b""
    assert "✗ failed: model error: the model broke" in failed.stderr.decode()
    for argv in (["  "], ["--allow", "(", "run: ls"], ["--session", "chat-x", "hi"]):
        usage = await _exec(agentrio_daemon, *argv)
        assert usage.returncode == 2, argv
        assert "agentrio exec: error:" in usage.stderr.decode()


async def test_json_lines_are_the_protocols_frames_ending_with_done(
    agentrio_daemon: RunningDaemon,
) -> None:
    """Item 8: ``--json`` prints one frame a line, in the protocol's own encoding:
    the task's ``event`` frames in order, then its ``done`` frame."""
    result = await _exec(agentrio_daemon, "--json", "hello")
    assert result.returncode == 0, result.stderr.decode()
    frames = [decode_server_frame(line) for line in result.stdout.decode().splitlines()]
    *events, last = frames
    assert isinstance(last, DoneFrame)
    assert last.status == "finished"
    assert all(isinstance(f, EventFrame) and f.task_hash == last.task_hash for f in events)
    kinds = [f.event for f in events if isinstance(f, EventFrame)]
    assert isinstance(kinds[0], TaskStarted)
    assert isinstance(kinds[-1], Done)
    assert [f.event.seq for f in events if isinstance(f, EventFrame)] == sorted(
        f.event.seq for f in events if isinstance(f, EventFrame)
    )


async def test_a_confirmation_is_denied_unless_allow_matches_it_whole(
    agentrio_daemon: RunningDaemon, tmp_path: Path
) -> None:
    """Item 8, R76: with no ``--allow`` the command is denied (exit 3) with the reason
    the model reads, and its file is absent; ``--allow`` runs exactly the command it
    fully matches (exit 0); another command, the same one with ``; rm …`` appended,
    and the matching one run from another directory are all denied."""
    target, other, keep = tmp_path / "made", tmp_path / "other", tmp_path / "keep"
    keep.write_text("kept")
    allow = ["--allow", f"touch {re.escape(str(target))}"]

    denied = await _exec(agentrio_daemon, f"run: touch {target}")
    assert denied.returncode == 3
    assert not target.exists()
    assert f"denied by the exec policy: {NOT_ALLOWED}" in denied.stdout.decode()
    assert "denied by the user" not in denied.stdout.decode()
    assert "agentrio exec: denied (no --allow rule covers it)" in denied.stderr.decode()

    for command in (f"touch {other}", f"touch {target}; rm {keep}", f"touch {target} && rm {keep}"):
        refused = await _exec(agentrio_daemon, *allow, f"run: {command}")
        assert refused.returncode == 3, command
    elsewhere = await _exec(agentrio_daemon, *allow, f"run: touch {target}", cwd=str(tmp_path))
    assert elsewhere.returncode == 3
    assert not target.exists()
    assert not other.exists()
    assert keep.read_text() == "kept"

    allowed = await _exec(agentrio_daemon, *allow, f"run: touch {target}")
    assert allowed.returncode == 0, allowed.stderr.decode()
    assert target.exists()
    assert f"agentrio exec: allowed by --allow: touch {target} (in {HERE})" in (
        allowed.stderr.decode()
    )


async def test_questions_and_secrets_are_declined_with_a_reason(
    agentrio_daemon: RunningDaemon, agentrio_client: Client
) -> None:
    """Item 8: ``ask_user`` and ``store_secret`` are declined, the model reads why
    (its call's result), the task finishes with exit 3 and no secret was stored."""
    asked = await _exec(agentrio_daemon, "--json", "ask: which colour? | red, blue")
    assert asked.returncode == 3
    frames = [decode_server_frame(line) for line in asked.stdout.decode().splitlines()]
    [skipped] = [
        f.event for f in frames if isinstance(f, EventFrame) and isinstance(f.event, ToolSkipped)
    ]
    assert skipped.tool_name == "ask_user"
    assert skipped.reason.startswith("not answered, declined: non-interactive run")
    assert isinstance(frames[-1], DoneFrame)
    assert frames[-1].status == "finished"
    secret = await _exec(agentrio_daemon, "secret: API_KEY")
    assert secret.returncode == 3
    assert "store_secret was not run: not answered, declined" in secret.stdout.decode()
    assert "agentrio exec: declined a secret ask: API_KEY" in secret.stderr.decode()


async def test_ctrl_c_cancels_the_task_and_its_command(
    agentrio_daemon: RunningDaemon, agentrio_client: Client, tmp_path: Path
) -> None:
    """Item 8, R40: SIGINT while an allowed command runs cancels the task with cause
    ``user_canceled`` (history ``canceled``, nothing pending), the command's process
    is gone, and exec exits 130."""
    pid_file = tmp_path / "pid"
    command = f"echo $$ > {pid_file}; exec sleep 60"
    with trio.fail_after(DEADLINE_S):
        process = await trio.lowlevel.open_process(
            [*EXEC, "--json", "--allow", re.escape(command), f"run: {command}"],
            env=agentrio_daemon.env,
            cwd=HERE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            while not pid_file.exists() or not pid_file.read_text().strip():
                await trio.sleep(0.05)  # a file another process writes: polled
            sleeper = int(pid_file.read_text())
            process.send_signal(signal.SIGINT)
            assert process.stdout is not None
            assert process.stderr is not None
            output = b""
            async for chunk in process.stdout:
                output += chunk
            assert await process.wait() == 130
        finally:
            await _reap(process)
    frames = [decode_server_frame(line) for line in output.decode().splitlines()]
    canceled = [f.event for f in frames if isinstance(f, EventFrame)][-1]
    assert isinstance(canceled, Canceled)
    assert (canceled.cause, canceled.kept) == ("user_canceled", False)
    assert isinstance(frames[-1], DoneFrame)
    assert frames[-1].status == "canceled"
    session = next(f.session_id for f in frames if isinstance(f, EventFrame))
    [entry] = await agentrio_client.history(session)
    assert entry.status == "canceled"
    assert await agentrio_client.pending(session) == []
    assert not Path(f"/proc/{sleeper}").exists()


async def test_a_closed_stdout_exits_141_without_a_traceback(
    agentrio_daemon: RunningDaemon,
) -> None:
    """Item 8: when stdout's reader goes away (``| head -c 1``), exec notices at its
    next write, writes nothing more there, cancels the task if it still runs and
    exits 141, as a SIGPIPE would end it, with no traceback."""
    with trio.fail_after(DEADLINE_S):
        process = await trio.lowlevel.open_process(
            [*EXEC, "--json", "hello"],
            env=agentrio_daemon.env,
            cwd=HERE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            assert process.stdout is not None
            assert process.stderr is not None
            assert await process.stdout.receive_some(1) == b"{"
            await process.stdout.aclose()  # the reader goes away, as head does
            said = b""
            async for chunk in process.stderr:
                said += chunk
            assert await process.wait() == 141
        finally:
            await _reap(process)
    notes = said.decode()
    assert "Traceback" not in notes
    assert "Exception ignored" not in notes
    assert "agentrio exec: session cli-" in notes


async def test_a_daemon_is_started_when_none_answers(tmp_path: Path) -> None:
    """Item 8: with no daemon for the home, exec starts one as the REPL does (detached,
    its log in the home), runs the task in it, and leaves it running."""
    home = tmp_path / "home"
    env = {**os.environ, "AGENTRIO_HOME": str(home)}
    with trio.fail_after(DEADLINE_S):
        result = await trio.run_process(
            [*EXEC, "hello"], env=env, cwd=HERE, capture_stdout=True, capture_stderr=True,
            check=False,
        )  # fmt: skip
        try:
            assert result.returncode == 0, result.stderr.decode()
            said = result.stderr.decode()
            assert "agentrio exec: no daemon answered; started one (pid " in said
            status = await trio.run_process(
                [sys.executable, "-m", "agentrio.repl", "status"], env=env, check=False,
                capture_stdout=True,
            )  # fmt: skip
            assert status.returncode == 0
        finally:
            await trio.run_process(
                [sys.executable, "-m", "agentrio.repl", "stop"], env=env, check=False,
                capture_stdout=True, capture_stderr=True,
            )  # fmt: skip


async def test_the_readme_example_works_as_printed(
    agentrio_daemon: RunningDaemon, tmp_path: Path
) -> None:
    """Item 8: the README's ``agentrio exec`` lines, as printed (the file in the test's
    own directory): the allowed one runs the command and exits 0, the one without
    ``--allow`` is denied with exit 3, the ``--json`` one ends with its ``done``."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    lines = [
        line.split("  #")[0]
        for block in re.findall(r"```sh\n(.*?)```", text, flags=re.S)
        for line in block.splitlines()
        if "agentrio exec" in line
    ]
    assert len(lines) == 3
    target = tmp_path / "notes.txt"
    results = []
    for line in lines:
        shell = line.replace("agentrio exec", shlex.join(EXEC)).replace(
            "/tmp/notes.txt", str(target)
        )
        with trio.fail_after(DEADLINE_S):
            results.append(
                await trio.run_process(
                    ["sh", "-c", shell],
                    env=agentrio_daemon.env,
                    cwd=HERE,
                    check=False,
                    capture_stdout=True,
                    capture_stderr=True,
                )
            )
        if len(results) == 1:
            assert target.exists()
            target.unlink()
    assert [r.returncode for r in results[:2]] == [0, 3], [r.stderr for r in results]
    assert not target.exists()
    last = decode_server_frame(results[2].stdout.decode().strip())
    assert isinstance(last, DoneFrame)
    assert last.status == "finished"
