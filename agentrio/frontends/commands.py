"""The chat commands: ``/pending`` (with resume buttons), ``/cancel``, ``/pause``,
``/history``, ``/new``, ``/help``."""

from __future__ import annotations

from typing import Final

from agentrio.errors import ClientError
from agentrio.frontends.conversation import Conversation
from agentrio.frontends.core import ChatCore
from agentrio.frontends.platform import Button
from agentrio.protocol import wording

__all__ = ["HELP", "RESUME", "run_command"]

#: The label of /pending's buttons.
RESUME: Final = "Resume"

HELP: Final = (
    "Write what you want done: it starts a task (a message while one runs steers it).\n"
    "/pending — tasks waiting to be resumed\n"
    "/cancel — stop the running task and discard it\n"
    "/pause — stop the running task, keep it to resume\n"
    "/history — the last finished tasks\n"
    "/new — start a new session (a fresh conversation)"
)


async def run_command(front: ChatCore, conversation: Conversation, text: str) -> None:
    name = text.split()[0].split("@")[0].lower()
    match name:
        case "/pending":
            await _pending(front, conversation)
        case "/cancel" | "/pause":
            await _stop(front, conversation, pause=name == "/pause")
        case "/history":
            await _history(front, conversation)
        case "/new":
            await _new(front, conversation)
        case _:
            await front.say(conversation.chat, HELP)


async def _pending(front: ChatCore, conversation: Conversation) -> None:
    client = await front.wait_connected()
    if client is None:
        await front.say(conversation.chat, "agentrio is not reachable right now.")
        return
    try:
        tasks = await client.pending(conversation.session_id)
    except ClientError as exc:
        await front.say(conversation.chat, f"could not list: {exc.message}")
        return
    if not tasks:
        await front.say(conversation.chat, "Nothing is waiting to be resumed.")
        return
    for task in tasks[:10]:
        key = front.tokens.new()
        front.resumes[key] = (conversation.session_id, task.task_hash)
        waits = " (waits for an answer)" if task.has_questions else ""
        await front.say(
            conversation.chat,
            f"{task.task_hash[:8]}: {task.objective}{waits}",
            [[Button(RESUME, f"resume|{key}")]],
        )


async def _stop(front: ChatCore, conversation: Conversation, *, pause: bool) -> None:
    conversation.awaiting = None
    client, task = await front.wait_connected(), conversation.task_hash
    if not task:
        await front.say(conversation.chat, "No task is running in this chat.")
        return
    if client is None:
        await front.say(conversation.chat, "agentrio is not reachable right now: nothing was sent.")
        return
    verb = "pause" if pause else "cancel"
    reply = await client.request("POST", f"/v1/session/{conversation.session_id}/{verb}/{task}")
    if reply.status >= 400:
        await front.say(conversation.chat, f"not stopped: {reply.text[:200]}")
        return
    word = wording.STOP_KEEP if pause else wording.STOP_DISCARD
    await front.say(conversation.chat, f"{word}: asked")


async def _history(front: ChatCore, conversation: Conversation) -> None:
    client = await front.wait_connected()
    if client is None:
        await front.say(conversation.chat, "agentrio is not reachable right now.")
        return
    try:
        entries = await client.history(conversation.session_id, limit=10)
    except ClientError as exc:
        await front.say(conversation.chat, f"could not list: {exc.message}")
        return
    if not entries:
        await front.say(conversation.chat, "No finished tasks yet in this session.")
        return
    lines = [f"{e.task_hash[:8]} {e.status}: {e.objective}" for e in entries]
    await front.say(conversation.chat, "\n".join(lines))


async def _new(front: ChatCore, conversation: Conversation) -> None:
    if conversation.task_hash:
        await front.say(conversation.chat, "A task is running: /cancel or /pause it first.")
        return
    session = front.sessions.new_session(conversation.chat)
    conversation.close_all()
    front.conversations.pop(conversation.chat, None)
    await front.say(conversation.chat, f"New session {session}: a fresh conversation.")
