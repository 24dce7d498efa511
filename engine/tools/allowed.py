"""The commands a person chose "Always allow" for, per session (R76, issue 29 finding 4).

A rule is exactly one command **in one working directory**, as the confirmation showed
them: a string command is kept as its text, an argv as ``shlex.join`` of it (which
``/bin/sh`` reads back as the same argv), and the directory as the real path the
command was resolved to run in (`agentrio.engine.tools.workdir`; the confirmation shows that
path as its ``cwd`` argument). A later command is covered only when it is that same
command in that same real directory -- never when it merely starts with the same
program (``touch a`` remembered does not admit ``touch b && rm c``), and never in
another directory (``sh build.sh`` remembered in a trusted checkout does not run in a
hostile one, nor through a symlink that now points elsewhere: the real path is
compared). A rule never covers a command that touches a restricted path: the password
check runs every time (R7).

Rules live as long as the daemon (they are never written to disk), are listed by REPL
``/allowed``, ``list_allowed`` and ``GET /v1/session/{id}/allowed`` with their
directory, and can be removed one by one or all at once. Background sub-agents act
with a copy of their parent session's rules (`AllowedCommands.copy_from`), so the same
directory test holds for them. A rule without a directory (``cwd`` empty: only an older
daemon's ``allowed`` frame decodes to one) covers nothing.
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

    def _find(self, text: str, cwd: str) -> AllowedRule | None:
        if not cwd:
            return None  # no directory known: a rule never widens to every directory
        return next(
            (rule for rule in self._rules.values() if rule.command == text and rule.cwd == cwd),
            None,
        )

    def covers(self, command: str | list[str], cwd: str) -> bool:
        """Whether ``command`` run in the real directory ``cwd`` was remembered."""
        return self._find(rule_text(command), cwd) is not None

    def add(self, command: str | list[str], cwd: str, *, at: float) -> AllowedRule:
        """Remember ``command`` in the real directory ``cwd`` (once: a second approval
        keeps the first rule). ``cwd`` must be the absolute real path shown."""
        if not cwd.startswith("/"):
            raise ValueError("a remembered command needs the real directory it runs in")
        text = rule_text(command)
        found = self._find(text, cwd)
        if found is not None:
            return found
        rule = AllowedRule(id=f"rule_{secrets.token_hex(4)}", command=text, cwd=cwd, added_at=at)
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
        """Take ``other``'s rules too (a sub-agent acts with its parent's approvals,
        each still bound to its directory)."""
        for rule in other.rules():
            self._rules.setdefault(rule.id, rule)
