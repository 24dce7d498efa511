"""A task paused at a ``secret:`` prompt asks for the secret again when resumed (issue
33 item 5, R11, R12, R42).

``ask:`` questions are saved and asked again; a secret prompt cannot be saved (its
answer is the secret), so the resumed task must make the prompt again -- it used to
end with "there is no command to run again" and store nothing.
"""

from __future__ import annotations

import trio

from agentrio.protocol.causes import Cause
from agentrio.protocol.events import ToolResult
from agentrio.protocol.frames import Ask, Cancel, DoneFrame, EventFrame, PendingFrame, Reply, Run
from agentrio.transport import open_frame_connection
from tests.e2e.conftest import Daemon
from tests.e2e.test_daemon_flows import until, until_done

SESSION = "cli-secret-resume"


async def test_a_secret_prompt_is_asked_again_on_resume(daemon: Daemon) -> None:
    """Issue 33 item 5: pause at the secret prompt, resume: the prompt comes again
    (same key); answering it stores the secret and the task finishes."""
    with trio.fail_after(30):
        async with open_frame_connection(daemon.ws_url, daemon.token) as conn:
            await conn.send(
                Run(request_id="s", session_id=SESSION, input="secret: API_KEY", window_hash="w")
            )
            first = await until(conn, Ask)
            assert isinstance(first, Ask)
            assert first.kind == "secret"
            await conn.send(Cancel(task_hash=first.task_hash, cause=Cause.PAUSED))
            paused = (await until_done(conn, "s"))[-1]
            assert isinstance(paused, DoneFrame)
            assert paused.status == "paused"
            await conn.send(
                PendingFrame(
                    request_id="r", session_id=SESSION, task_hash=paused.task_hash, window_hash="w"
                )
            )
            again = await until(conn, Ask)
            assert isinstance(again, Ask)
            assert (again.kind, again.task_hash) == ("secret", paused.task_hash)
            assert again.id != first.id
            await conn.send(Reply(id=again.id, answers=["s3cr3t-value"]))
            frames = await until_done(conn, "r")
    done = frames[-1]
    assert isinstance(done, DoneFrame)
    assert done.status == "finished"
    results = [
        f.event for f in frames if isinstance(f, EventFrame) and isinstance(f.event, ToolResult)
    ]
    assert [(r.tool_name, r.ok) for r in results] == [("store_secret", True)]
    assert "s3cr3t-value" not in results[0].output
