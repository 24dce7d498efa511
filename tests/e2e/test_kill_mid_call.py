"""A daemon killed (SIGKILL) while an approved command runs leaves that call recorded as
in flight, so the resumed task's repeat is asked, saying it may have partly run (issue
34 item 5; R12, R51, R72, R76).

A stop writes the task's snapshot on its way out; a ``kill -9`` writes nothing. So the
call is written to the store before its command starts (`CallLedger.effect`). Here the
person approved the command with "Always allow this exact command" -- the rule that
would let its repeat run unasked -- and the real daemon process is killed while the
command sleeps. Restarted, the task is resumable once its marker expired; resumed in
its window, its model repeats the call, the confirmation carries the "may have partly
run" note despite the rule, and denied, the command does not run again: its file
keeps the one line it wrote (asserted on disk).
"""

from __future__ import annotations

import os
import shlex
import signal
from pathlib import Path

import trio

from agentrio.engine.messages import INTERRUPTED_CALL_NOTE
from agentrio.protocol.frames import Ask, DoneFrame, PendingFrame, Reply, Run
from agentrio.transport import FrameConnection, open_frame_connection
from tests.e2e.conftest import DaemonProcess
from tests.e2e.test_daemon_restart import MARKERS, TTL_S, pending

SESSION = "cli-killed"
WINDOW = "w-killed"


async def next_ask(conn: FrameConnection) -> Ask:
    while True:
        frame = await conn.receive()
        if isinstance(frame, Ask):
            return frame


async def done_of(conn: FrameConnection, request_id: str) -> DoneFrame:
    while True:
        frame = await conn.receive()
        if isinstance(frame, DoneFrame) and frame.request_id == request_id:
            return frame


async def until_exists(path: Path) -> None:
    """The command's own write (another process: polled, bounded by the test)."""
    while not path.exists() or not path.read_text().endswith("\n"):
        await trio.sleep(0.02)


def stop_group(pid_file: Path) -> None:
    """End the orphaned command's process group (the killed daemon could not)."""
    if pid_file.exists() and pid_file.read_text().strip():
        try:
            os.killpg(int(pid_file.read_text()), signal.SIGKILL)
        except ProcessLookupError:
            pass


async def test_a_call_in_flight_at_a_kill_9_is_asked_again_after_the_restart(
    tmp_path: Path,
) -> None:
    """R51, R72, R76, R12 (issue 34 item 5): killed mid-command, restarted and resumed,
    the task's repeat of the call is asked with ``details.interrupted`` although the
    person's rule covers it; denied, it does not run again."""
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    home.mkdir()
    (home / "config.toml").write_text("[tools]\nreadonly_commands = []\n")
    marker, pid_file = work / "ran.txt", work / "pid"
    command = (
        f"echo $$ > {shlex.quote(str(pid_file))}; echo ran >> {shlex.quote(str(marker))}; sleep 600"
    )
    first = DaemonProcess(home, MARKERS, cwd=work)
    try:
        with trio.fail_after(30):
            async with open_frame_connection(first.info.ws_url, first.info.token) as conn:
                await conn.send(
                    Run(
                        request_id="r1",
                        session_id=SESSION,
                        input=f"run: {command}",
                        window_hash=WINDOW,
                    )
                )
                ask = await next_ask(conn)
                await conn.send(Reply(id=ask.id, approve=True, remember=True))
                await until_exists(marker)
                first.kill()
    finally:
        first.close()
        stop_group(pid_file)
    second = DaemonProcess(home, MARKERS, cwd=work)
    try:
        with trio.fail_after(TTL_S + 30):
            while not (listed := await pending(second.info, SESSION)):
                await trio.sleep(0.1)
            [task_hash] = listed
            async with open_frame_connection(second.info.ws_url, second.info.token) as conn:
                await conn.send(
                    PendingFrame(
                        request_id="p1", session_id=SESSION, task_hash=task_hash, window_hash=WINDOW
                    )
                )
                again = await next_ask(conn)
                assert (again.tool_name, again.tool_args["command"]) == ("run_command", command)
                assert again.details is not None
                assert again.details.interrupted == INTERRUPTED_CALL_NOTE
                await conn.send(Reply(id=again.id, approve=False, reason="it may have run"))
                assert (await done_of(conn, "p1")).status == "finished"
    finally:
        assert second.stop() == 0
    assert marker.read_text().splitlines() == ["ran"]  # the denied repeat never ran
