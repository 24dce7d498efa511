"""Work a person left is kept, shown and resumable, through the real daemon (issue 17).

- A task's history record holds each reply once (R40's history, the web page's
  "Show record").
- A question open when the window closes is kept with the task (R13, R42, R43): the
  resume asks it again in the resuming window, or answers sent with the resume
  answer it.
- A confirmation open when the window closes is denied (fail closed, R6) and its call
  is kept as *interrupted*: the resumed task proposes it again, which asks again.
- Paused work of every ``cli-`` session is listed by origin (``list_pending`` with
  ``origin``, ``GET /v1/pending?origin=``), so a new REPL session finds it (R41, R42).
"""

from __future__ import annotations

import httpx
import trio

from agentrio import Client
from engine.models.builtin import HELP_TEXT
from engine.testing import RunningDaemon
from protocol.http import PendingTasks


def http(daemon: RunningDaemon) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=daemon.base_url, headers={"Authorization": f"Bearer {daemon.token}"}
    )


async def test_history_record_holds_the_final_reply_once(agentrio_client: Client) -> None:
    """R40 (history), issue 17 item 4: the record of a finished task is its input, then
    each reply once — the final reply is not appended a second time."""
    with trio.fail_after(20):
        handle = await agentrio_client.run("chat-record", "hello")
        outcome = await handle.wait_done()
        assert outcome.status == "finished"
        record = await agentrio_client.history_record("chat-record", handle.task_hash)
    assert record.content == f"user: hello\nassistant: {HELP_TEXT}"
