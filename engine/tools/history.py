"""The ``chat_history`` tool: list, read or search the session's finished tasks."""

from __future__ import annotations

import time
from typing import Any

from engine.models.base import ToolCallRequest, ToolSpec
from engine.snapshot import RESULT_LIMIT, clamp
from engine.store.base import HistoryRow
from engine.tools.base import ServiceTool, ToolContext, ToolOutcome

__all__ = ["ChatHistoryTool"]


class ChatHistoryTool(ServiceTool):
    name = "chat_history"

    def spec(self) -> ToolSpec:
        return ToolSpec(
            name=self.name,
            description=(
                "Look at this session's earlier tasks: mode 'list' (recent), 'search' "
                "(keyword) or 'read' (one task's full record by task_hash)."
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
            row = await store.get_history(ctx.session_id, task_hash)
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


def _header(row: HistoryRow) -> str:
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(row.end_at))
    return f"{row.task_hash} [{row.status}] {when}: {row.objective}"
