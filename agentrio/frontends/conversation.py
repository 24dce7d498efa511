"""One chat's conversation: its session, the task running in it, its live output, and
what its next message answers.

Events of the chat's session (a ``subscribe``) are turned into parts of the task's
`LiveMessage`: text streamed as it comes, tool calls and results as code, the task's
end as the line the REPL shows (`agentrio.protocol.wording.ended_line`).
"""

from __future__ import annotations

import json
from typing import Literal

import attrs
import trio

from agentrio.frontends.markup import Part, code, prose
from agentrio.frontends.platform import ChatPlatform
from agentrio.frontends.streaming import EDIT_INTERVAL_S, LiveMessage
from agentrio.protocol import wording
from agentrio.protocol.events import (
    Canceled,
    Confirm,
    Done,
    Event,
    Failed,
    JobSettled,
    LegFinished,
    LegReport,
    LegStarted,
    Pending,
    SecretAsk,
    SteerInjected,
    TaskStarted,
    Text,
    ToolCall,
    ToolProgress,
    ToolResult,
    ToolSkipped,
)

__all__ = ["Awaiting", "Conversation", "event_parts"]


@attrs.frozen
class Awaiting:
    """What the chat's next message answers: a denial's reason, an ask_user question,
    or a secret value (deleted as soon as it is read)."""

    kind: Literal["reason", "answer", "secret"]
    ask_id: str


#: Characters of a tool call's arguments shown in the live output.
CALL_SHOWN = 300

#: Events after which a task is over (in this chat's view).
_ENDS = (Done, Canceled, Failed, Pending)


def event_parts(event: Event, *, streamed: bool) -> list[Part]:
    """What ``event`` adds to its task's live message (``streamed``: the task's text
    already came as `Text` events, so `Done` adds nothing)."""
    match event:
        case Text(text=text):
            return [prose(text)]
        case TaskStarted(resumed_from=str(previous)):
            return [prose(f"↻ resumed from task {previous[:8]}\n")]
        case ToolCall(tool_name=("ask_user" | "store_secret") as name):
            return [prose(f"\n⚙ {name}\n")]  # the question itself follows, as its own message
        case ToolCall(tool_name=name, args=args):
            shown = args.get("command") if isinstance(args.get("command"), str) else None
            shown = shown or json.dumps(args, ensure_ascii=False, sort_keys=True)
            if len(shown) > CALL_SHOWN:  # a confirmation, if any, shows it whole
                shown = f"{shown[:CALL_SHOWN]}… (+{len(shown) - CALL_SHOWN} characters)"
            return [prose(f"\n⚙ {name}\n"), code(shown)]
        case ToolResult(tool_name=name, ok=ok, output=output):
            mark = f"✓ {name}" if ok else f"✗ {name} failed"
            return [prose(f"\n{mark}\n"), *([code(output)] if output.strip() else [])]
        case ToolProgress(tool_name=name, progress=done, total=total, message=message):
            return [prose(f"\n⋯ {name}: {wording.progress_text(done, total, message)}\n")]
        case ToolSkipped(tool_name=name, reason=reason):
            return [prose(f"\n⊘ {name} not run: {reason}\n")]
        case Pending(questions=questions):
            asked = "; ".join(q.text for q in questions) or "questions"
            return [prose(f"\n? waiting for an answer: {asked}\n")]
        case SteerInjected(text=text):
            return [prose(f"\n↪ steer applied: {text}\n")]
        case LegStarted(leg_id=leg, label=label, queued=queued):
            return [prose(f"\n⧗ background {leg} {'queued' if queued else 'started'}: {label}\n")]
        case LegReport(leg_id=leg, text=text):
            return [prose(f"\n⧗ report from {leg}:\n"), code(text)]
        case LegFinished(leg_id=leg, status=status, result=result):
            return [prose(f"\n⧗ background {leg} {status}\n"), code(result)]
        case JobSettled(job_id=job):
            return [prose(f"\n⧗ {job} settled\n")]
        case Canceled(cause=cause):
            return [prose(f"\n{wording.ended_line(cause)}\n")]
        case Failed(error=error):
            return [prose(f"\n{wording.ended_line('failed', reason=error)}\n")]
        case Done(text=text) if not streamed and text:
            return [prose(f"\n{text}")]
    return []


class Conversation:
    """One chat and its agentrio session."""

    def __init__(
        self,
        platform: ChatPlatform,
        chat: str,
        session_id: str,
        *,
        interval: float = EDIT_INTERVAL_S,
    ) -> None:
        self.platform = platform
        self.chat = chat
        self.session_id = session_id
        self.interval = interval
        #: The task running here (to steer, cancel or pause), empty when none.
        self.task_hash = ""
        self.awaiting: Awaiting | None = None
        self._lives: dict[str, LiveMessage] = {}
        self._streamed: set[str] = set()
        #: Events at or before these were shown already (a resubscription replays).
        self.last_seq = -1
        self.last_at = 0.0
        #: Events before this moment happened before this process knew the chat.
        self.since = 0.0

    def fresh(self, event: Event) -> bool:
        """Whether ``event`` was not shown yet (and, from now on, counts as shown)."""
        if event.at < self.since or (event.seq <= self.last_seq and event.at <= self.last_at):
            return False
        self.last_seq, self.last_at = event.seq, max(self.last_at, event.at)
        return True

    def show(self, nursery: trio.Nursery, task_hash: str, event: Event) -> None:
        """Add ``event`` to its task's live message (started in ``nursery``)."""
        if not task_hash and not event_parts(event, streamed=False):
            return  # a session's own event that says nothing in a chat (a compaction)
        if isinstance(event, TaskStarted):
            self.task_hash = task_hash
        live = self._lives.get(task_hash)
        if live is None:
            live = LiveMessage(self.platform, self.chat, interval=self.interval)
            self._lives[task_hash] = live
            nursery.start_soon(live.run)
        for part in event_parts(event, streamed=task_hash in self._streamed):
            live.append(part)
        if isinstance(event, Text):
            self._streamed.add(task_hash)
        elif isinstance(event, ToolCall):
            self._streamed.discard(task_hash)
        if isinstance(event, _ENDS) or not task_hash:  # a session's own event: one line
            self.end(task_hash)
        elif isinstance(event, Confirm | SecretAsk):
            self.cut(task_hash)  # what follows the answer goes below the question

    def end(self, task_hash: str) -> None:
        """The task is over here: flush and forget its live message."""
        live = self._lives.pop(task_hash, None)
        if live is not None:
            live.close()
        self._streamed.discard(task_hash)
        if self.task_hash == task_hash:
            self.task_hash = ""

    def cut(self, task_hash: str) -> None:
        """Output after this point goes to a new message (below a question just asked,
        where the person looks), the task still running."""
        live = self._lives.pop(task_hash, None)
        if live is not None:
            live.close()

    def close_all(self) -> None:
        for task_hash in list(self._lives):
            self.end(task_hash)
