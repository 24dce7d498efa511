"""The SQLite store keeps the home's rules in memory and reads them again only when
they may have changed (issue 32 §4, B16; R76, R92; engine/store/sqlite_rules.py).

A lookup that finds nothing changed asks SQLite one ``PRAGMA data_version`` and reads
no rule; a rule written or forgotten by this store, or by another connection to the
same file (what another process is to SQLite), is seen by the very next lookup.
"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import pytest

from agentrio.engine.rules import McpToolSubject, RuleBook, mcp_tool_rule
from agentrio.engine.store.sqlite import SqliteStore
from agentrio.protocol.codec import unstructure
from agentrio.protocol.rules import AllowedRule

SUBJECT = McpToolSubject(tool="mcp__every__echo", cwd="mcp:every")


@pytest.mark.parametrize("inline", [False, True])
async def test_rules_are_read_again_only_when_they_may_have_changed(
    tmp_path: Path, inline: bool
) -> None:
    """Issue 32 §4, R76, R92: see the module docstring (both the worker-thread store
    and the inline one tests under a mock clock use)."""
    path = tmp_path / "agentrio.db"
    store = await SqliteStore.open(path, inline=inline)
    book = RuleBook(store)
    try:
        rule = mcp_tool_rule(SUBJECT, at=time.time())
        await store.put_rule(rule)
        assert await book.covering(SUBJECT) == rule
        statements: list[str] = []
        worker = store._worker
        conn = worker._conn if inline else worker._reader._conn
        assert conn is not None
        conn.set_trace_callback(statements.append)
        assert await book.covering(SUBJECT) == rule
        assert statements == ["PRAGMA data_version"]  # no rule was read

        other = sqlite3.connect(path)  # another process, as SQLite sees it
        other.execute("DELETE FROM rules")
        other.commit()
        assert await book.covering(SUBJECT) is None  # at once

        again = await book.add(mcp_tool_rule(SUBJECT, at=time.time()))
        assert await book.covering(SUBJECT) == again  # this store's own write
        assert await book.forget(again.id) == [again]
        assert await book.covering(SUBJECT) is None  # this store's own forget
        other.execute(
            "INSERT INTO rules (id, kind, added_at, body) SELECT 'x', kind, added_at, body "
            "FROM (SELECT ? AS kind, ? AS added_at, ? AS body)",
            _row(rule),
        )
        other.commit()
        assert await book.covering(SUBJECT) == rule  # another's new rule, at once
        other.close()
    finally:
        await store.aclose()


def _row(rule: AllowedRule) -> tuple[str, float, str]:
    return rule.kind, rule.added_at, json.dumps(unstructure(rule))
