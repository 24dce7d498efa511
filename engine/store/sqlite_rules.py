"""The SQLite store's remembered rules (R92): the ``rules`` table of schema version 5.

Apart from `agentrio.engine.store.sqlite` so that module stays one reading; the store
class takes these methods by inheriting `SqliteRules`, which reaches the connection
only through the store's own `_run` and `_write` (one worker, one group commit).

**The rules are read before every call they may cover** (every MCP call, every
command that would otherwise ask), so they are kept in memory (`RuleCache`) and the
table is read again only when it may have changed:

* a rule written or forgotten by this store (``put_rule``, ``delete_rules``, whichever
  connection of the daemon asked for it) empties the cache once it is committed;
* a commit by any other connection -- another process on the same file -- changes the
  ``PRAGMA data_version`` of the connection that reads it, which every lookup asks
  (on the Trio thread, with no checkpoint: it reads SQLite's shared-memory WAL index,
  never the disk, and never waits, `agentrio.engine.store.sqlite_reader`). A changed
  version, or one that cannot be asked at once (the reader not open yet or busy, an
  in-memory store), reads the table again, as every lookup once did.

So a rule forgotten anywhere stops covering at the next lookup, as when every lookup
read the table; a lookup that finds nothing changed costs one pragma. A version from
one connection is never compared with another's (the cache keeps which connection
answered).
"""

from __future__ import annotations

import functools
import json
import sqlite3
from collections.abc import Callable
from typing import Protocol, TypeVar

from agentrio.engine.store.sqlite_reader import rules_stamp
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

        try:
            await self._write("put_rule", put)
        finally:
            self._worker.rules.clear()

    async def list_rules(self: _Worker) -> list[AllowedRule]:
        cache = self._worker.rules
        # Nothing changed: the rules kept, with no checkpoint (the call this lookup
        # gates checkpoints next).
        kept = cache.get(self._worker.read_now("list_rules", rules_stamp))
        if kept is not None:
            return kept

        def read(conn: sqlite3.Connection) -> tuple[tuple[int, int], list[str]]:
            # The version first, in the same call: a commit after it only makes the
            # next lookup read again.
            stamp = rules_stamp(conn)
            return stamp, [str(r["body"]) for r in conn.execute(f"SELECT body FROM rules {_ORDER}")]

        stamp, bodies = await self._worker.read_here("list_rules", read)
        rules = [_rule(body) for body in bodies]
        cache.keep(stamp, rules)
        return rules

    async def delete_rules(self: _Worker, rule_id: str) -> list[AllowedRule]:
        where, params = ("", ()) if rule_id == "all" else (" WHERE id = ?", (rule_id,))

        def delete(conn: sqlite3.Connection) -> list[str]:
            rows = conn.execute(f"SELECT body FROM rules{where} {_ORDER}", params).fetchall()
            conn.execute(f"DELETE FROM rules{where}", params)
            return [str(r["body"]) for r in rows]

        try:
            return [_rule(body) for body in await self._write("delete_rules", delete)]
        finally:
            self._worker.rules.clear()
