"""``POST /v1/send`` with ``pending_task`` on a paused task with no saved questions:
the text reaches the model (issue 33 item 2, R35, R36).

The text used to be taken only as answers to saved questions, so a paused task with
none resumed without it. The builtin model reads the newest user message as a verb, so
``run: touch FILE`` arriving after the resume message makes the file.
"""

from __future__ import annotations

from pathlib import Path

import attrs
import trio

from agentrio.protocol.causes import Cause
from agentrio.protocol.codec import decode
from agentrio.protocol.events import Done
from agentrio.protocol.frames import Cancel, DoneFrame, EventFrame, Subscribe
from agentrio.protocol.http import SendStarted
from agentrio.transport import open_frame_connection
from tests.e2e.conftest import Daemon
from tests.e2e.test_daemon_flows import client, start_sleep, until_done

SESSION = "cli-send-resume"


async def test_send_to_a_paused_task_resumes_it_with_the_message(
    daemon: Daemon, tmp_path: Path
) -> None:
    """Issue 33 item 2: the paused task resumes (same session, it is the latest task)
    and its model acts on the message sent with it."""
    target = tmp_path / "followed-up"
    with trio.fail_after(30):
        async with (
            client(daemon) as http,
            open_frame_connection(daemon.ws_url, daemon.token) as conn,
        ):
            paused = await start_sleep(conn, "p", SESSION)
            await conn.send(Cancel(task_hash=paused, cause=Cause.PAUSED))
            done = (await until_done(conn, "p"))[-1]
            assert attrs.evolve(done, stopped=None) == DoneFrame(  # stopped: issue 34
                request_id="p", task_hash=paused, status="paused"
            )
            await conn.send(Subscribe(session_id=SESSION))
            response = await http.post(
                "/v1/send",
                json={
                    "input": f"run: touch {target}",
                    "session_id": SESSION,
                    "pending_task": paused,
                    "allow_all": True,
                },
            )
            assert response.status_code == 202, response.text
            resumed = decode(response.content, SendStarted).task_hash
            while True:
                frame = await conn.receive()
                if (
                    isinstance(frame, EventFrame)
                    and frame.task_hash == resumed
                    and isinstance(frame.event, Done)
                ):
                    break
            record = await http.get(f"/v1/session/{SESSION}/task/{resumed}/history")
    assert target.exists()
    assert record.status_code == 200
    assert f"run: touch {target}" in record.text
