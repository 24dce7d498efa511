"""The ``chat_history`` tool: list, read or search the session's finished tasks.

A listing is read by the model and, in the transcript, by the person: one line per
task, ``<short hash> · <status> · <time> · <objective>``, the hash cut to
`SHORT_HASH` characters (``read`` takes that prefix), and a background job's
follow-up task (R26) marked as such — its objective is the job's, not words the
person typed.
"""

from __future__ import annotations

import time
from typing import Any, Final

from agentrio.engine.messages import FOLLOWUP_HEADER
from agentrio.engine.models.base import ToolCallRequest, ToolSpec
from agentrio.engine.snapshot import RESULT_LIMIT, clamp
from agentrio.engine.store.base import HistoryRow, Store
from agentrio.engine.tools.base import Reach, ServiceTool, ToolContext, ToolOutcome

__all__ = ["SHORT_HASH", "ChatHistoryTool"]

#: Characters of a task hash a listing shows (and ``read`` accepts).
SHORT_HASH: Final = 8
#: How many recent tasks ``read`` looks through for a short hash.
_READ_SCAN: Final = 200


class ChatHistoryTool(ServiceTool):
    name = "chat_history"
    reach = Reach(unasked=True, in_subagents=True, in_legs=True)

    def spec(self) -> ToolSpec:
        return ToolSpec(
            name=self.name,
            description=(
                "Look at this session's earlier tasks: mode 'list' (recent), 'search' "
                "(keyword) or 'read' (one task's full record by task_hash: the short "
                "hash a listing shows, or the whole one)."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "mode": {"type": "string", "enum": ["list", "read", "search"]},
                    "keyword": {"type": "string"},
                    "task_hash": {"type": "string"},
                    "limit": {"type": "integer"},
                },
                "required": ["mode"],
            },
        )

    async def execute(self, ctx: ToolContext, call: ToolCallRequest) -> ToolOutcome:
        args: dict[str, Any] = call.args
        mode = args.get("mode", "list")
        store = self._services.store
        limit = args.get("limit", 20)
        if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= 200:
            raise ValueError("argument 'limit' must be an integer from 1 to 200")
        if mode == "read":
            task_hash = args.get("task_hash")
            if not isinstance(task_hash, str):
                raise ValueError("mode 'read' needs a 'task_hash' string")
            row = await _find(store, ctx.session_id, task_hash)
            if row is None:
                return ToolOutcome(ok=False, output=f"no finished task {task_hash} in history")
            return ToolOutcome(output=clamp(_header(row) + "\n" + row.content, RESULT_LIMIT))
        if mode not in ("list", "search"):
            raise ValueError("argument 'mode' must be 'list', 'read' or 'search'")
        keyword = args.get("keyword", "") if mode == "search" else ""
        if not isinstance(keyword, str):
            raise ValueError("argument 'keyword' must be a string")
        rows = await store.list_history(ctx.session_id, keyword=keyword, limit=limit)
        if not rows:
            found = f" matching {keyword!r}" if keyword else ""
            return ToolOutcome(output=f"no finished tasks{found} in this session")
        return ToolOutcome(output="\n".join(_header(row) for row in rows))


async def _find(store: Store, session_id: str, task_hash: str) -> HistoryRow | None:
    """The finished task ``task_hash`` names: the whole hash, or the unique one among
    the recent tasks that starts with a short hash of at least `SHORT_HASH` characters."""
    row = await store.get_history(session_id, task_hash)
    if row is not None or len(task_hash) < SHORT_HASH:
        return row
    rows = await store.list_history(session_id, limit=_READ_SCAN)
    found = [r for r in rows if r.task_hash.startswith(task_hash)]
    return found[0] if len(found) == 1 else None


def _header(row: HistoryRow) -> str:
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(row.end_at))
    followup = row.content.startswith(f"user: {FOLLOWUP_HEADER}")
    what = f"background follow-up of: {row.objective}" if followup else row.objective
    return f"{row.task_hash[:SHORT_HASH]} · {row.status} · {when} · {what}"
