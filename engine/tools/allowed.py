"""The commands a person chose "Always allow" for, per session (R76).

A rule is exactly one command, as the confirmation showed it: a string command is kept
as its text, an argv as ``shlex.join`` of it (which ``/bin/sh`` reads back as the same
argv). A later command is covered only when it is that same command -- never when it
merely starts with the same program, so ``touch a`` remembered does not admit
``touch b && rm c``. A rule never covers a command that touches a restricted path: the
password check runs every time (R7). Rules live as long as the daemon, are listed by
REPL ``/allowed``, ``list_allowed`` and ``GET /v1/session/{id}/allowed``, and can be
removed one by one or all at once.
"""

from __future__ import annotations

import secrets
import shlex

import attrs

from agentrio.protocol.frames import AllowedRule

__all__ = ["AllowedCommands", "rule_text"]


def rule_text(command: str | list[str]) -> str:
    """The text a rule for ``command`` holds, and that the dialog shows it will hold."""
    return command if isinstance(command, str) else shlex.join(command)


@attrs.define
class AllowedCommands:
    """One session's remembered commands, oldest first."""

    _rules: dict[str, AllowedRule] = attrs.field(factory=dict)

    def covers(self, command: str | list[str]) -> bool:
        text = rule_text(command)
        return any(rule.command == text for rule in self._rules.values())

    def add(self, command: str | list[str], *, at: float) -> AllowedRule:
        """Remember ``command`` (once: a second approval keeps the first rule)."""
        text = rule_text(command)
        for rule in self._rules.values():
            if rule.command == text:
                return rule
        rule = AllowedRule(id=f"rule_{secrets.token_hex(4)}", command=text, added_at=at)
        self._rules[rule.id] = rule
        return rule

    def remove(self, rule_id: str) -> int:
        """Forget one rule, or every rule for ``"all"``; returns how many went."""
        if rule_id == "all":
            count = len(self._rules)
            self._rules.clear()
            return count
        return 1 if self._rules.pop(rule_id, None) is not None else 0

    def rules(self) -> list[AllowedRule]:
        return list(self._rules.values())

    def copy_from(self, other: AllowedCommands) -> None:
        """Take ``other``'s rules too (a sub-agent acts with its parent's approvals)."""
        for rule in other.rules():
            self._rules.setdefault(rule.id, rule)
