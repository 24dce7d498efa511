"""The ``chat_history`` tool's listing, read by the model and shown to the person."""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from agentrio.engine.messages import FOLLOWUP_HEADER
from agentrio.engine.models.base import ToolCallRequest
from agentrio.engine.store.base import HistoryRow
from agentrio.engine.store.sqlite import SqliteStore
from agentrio.engine.tools.history import ChatHistoryTool

SESSION = "cli-0000abcd"
ASKED, FOLLOWUP = "1a2b3c4d" + "0" * 24, "5e6f7a8b" + "0" * 24


def _row(task_hash: str, objective: str, content: str, end_at: float) -> HistoryRow:
    return HistoryRow(
        session_id=SESSION,
        task_hash=task_hash,
        end_at=end_at,
        objective=objective,
        model="builtin",
        reasoning="",
        status="finished",
        content=content,
    )


async def _call(store: SqliteStore, **args: Any) -> str:
    tool = ChatHistoryTool(SimpleNamespace(store=store))  # type: ignore[arg-type]
    ctx = SimpleNamespace(session_id=SESSION)
    call = ToolCallRequest(id="c", name="chat_history", args=args)
    outcome = await tool.execute(ctx, call)  # type: ignore[arg-type]
    assert outcome.ok, outcome.output
    return outcome.output


async def test_a_listing_reads_well_and_marks_follow_ups(tmp_path: Path) -> None:
    """R26 (issue 19): each task is one line with a short hash, its status in words and
    its time; a background follow-up is marked as one, not shown as if the person had
    typed its objective; ``read`` takes the short hash."""
    store = await SqliteStore.open(tmp_path / "agentrio.db")
    try:
        rows = [
            _row(ASKED, "bg: sleep 1 ;; ls", "user: bg: sleep 1 ;; ls", 100.0),
            _row(FOLLOWUP, "sleep 1; ls", f"user: {FOLLOWUP_HEADER}\n…", 200.0),
        ]
        for row in rows:
            await store.end_run(SESSION, row.task_hash, history=row, keep=None)
        when = [time.strftime("%Y-%m-%d %H:%M", time.localtime(t)) for t in (100.0, 200.0)]
        assert (await _call(store, mode="list")).split("\n") == [
            f"5e6f7a8b · finished · {when[1]} · background follow-up of: sleep 1; ls",
            f"1a2b3c4d · finished · {when[0]} · bg: sleep 1 ;; ls",
        ]
        read = await _call(store, mode="read", task_hash="1a2b3c4d")
        assert read.endswith("user: bg: sleep 1 ;; ls")
        assert (await _call(store, mode="read", task_hash=FOLLOWUP)).startswith("5e6f7a8b")
    finally:
        await store.aclose()
