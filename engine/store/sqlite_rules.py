"""The SQLite store's remembered rules (R92): the ``rules`` table of schema version 5.

Apart from `agentrio.engine.store.sqlite` so that module stays one reading; the store
class takes these methods by inheriting `SqliteRules`, which reaches the connection
only through the store's own `_run` and `_write` (one worker, one group commit), and
reads the rules, before every call they may cover, with the worker's `read_here` (on
the Trio thread, never waiting: `agentrio.engine.store.sqlite_reader`).
"""

from __future__ import annotations

import functools
import json
import sqlite3
from collections.abc import Callable
from typing import Protocol, TypeVar

from agentrio.engine.store.sqlite_worker import SqliteWorker
from agentrio.protocol.codec import structure, unstructure
from agentrio.protocol.rules import AllowedRule

__all__ = ["SqliteRules"]

T = TypeVar("T")

_ORDER = "ORDER BY added_at, id"


@functools.lru_cache(maxsize=1024)
def _rule(body: str) -> AllowedRule:
    """A stored rule's body as the rule: parsed once per distinct body (rules are
    frozen, so one object serves every read; the rules are read before every call
    they may cover)."""
    return structure(json.loads(body), AllowedRule)


class _Worker(Protocol):
    """What the methods need of the store: its reads and its group-committed writes."""

    async def _run(self, op: str, fn: Callable[[sqlite3.Connection], T]) -> T: ...

    async def _write(self, op: str, fn: Callable[[sqlite3.Connection], T]) -> T: ...

    @property
    def _worker(self) -> SqliteWorker: ...


class SqliteRules:
    """`put_rule`, `list_rules` and `delete_rules` of `agentrio.engine.store.base.Store`."""

    async def put_rule(self: _Worker, rule: AllowedRule) -> None:
        body = json.dumps(unstructure(rule), ensure_ascii=False)

        def put(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT OR REPLACE INTO rules (id, kind, added_at, body) VALUES (?, ?, ?, ?)",
                (rule.id, rule.kind, rule.added_at, body),
            )

        await self._write("put_rule", put)

    async def list_rules(self: _Worker) -> list[AllowedRule]:
        def read(conn: sqlite3.Connection) -> list[str]:
            return [str(r["body"]) for r in conn.execute(f"SELECT body FROM rules {_ORDER}")]

        # Read before every call a rule may cover: on the Trio thread, never waiting.
        return [_rule(body) for body in await self._worker.read_here("list_rules", read)]

    async def delete_rules(self: _Worker, rule_id: str) -> list[AllowedRule]:
        where, params = ("", ()) if rule_id == "all" else (" WHERE id = ?", (rule_id,))

        def delete(conn: sqlite3.Connection) -> list[str]:
            rows = conn.execute(f"SELECT body FROM rules{where} {_ORDER}", params).fetchall()
            conn.execute(f"DELETE FROM rules{where}", params)
            return [str(r["body"]) for r in rows]

        return [_rule(body) for body in await self._write("delete_rules", delete)]
