"""The home's remembered rules, kept in the store (R76, R92).

Rules belong to the home, not to a session: a person who said "always allow `npm test
…` in ~/proj" means it for the next REPL window and after the daemon restarts too.
The store holds them (SQLite's ``rules`` table, Redis's ``rules`` hash), so every
daemon sharing a store sees one set, and a rule forgotten on one daemon stops covering
on all of them at once: `RuleBook.covering` asks the store each time. The SQLite store
answers from the rules it keeps in memory unless they may have changed -- written by
it, or by any other connection to the file (`agentrio.engine.store.sqlite_rules`) --
so a stale rule never allows; the Redis store reads its ``rules`` hash each time.
"""

from __future__ import annotations

import attrs

from agentrio.engine.rules.kinds import Subject, covers, same_rule
from agentrio.engine.store.base import Store
from agentrio.protocol.rules import AllowedRule

__all__ = ["RuleBook"]


@attrs.frozen
class RuleBook:
    """The rules of the store's home; holds no state besides the store."""

    store: Store

    async def covering(self, subject: Subject) -> AllowedRule | None:
        """The first rule that covers ``subject``, or None (then ask)."""
        return next((r for r in await self.store.list_rules() if covers(r, subject)), None)

    async def add(self, rule: AllowedRule) -> AllowedRule:
        """Keep ``rule``; a rule covering the same already kept stays, and is returned."""
        found = next((r for r in await self.store.list_rules() if same_rule(r, rule)), None)
        if found is not None:
            return found
        await self.store.put_rule(rule)
        return rule

    async def rules(self) -> list[AllowedRule]:
        """Every rule of the home, oldest first."""
        return await self.store.list_rules()

    async def forget(self, rule_id: str) -> list[AllowedRule]:
        """Remove one rule, or all with ``"all"``; the rules removed."""
        return await self.store.delete_rules(rule_id)
