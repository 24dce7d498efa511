"""What each kind of rule covers: the one place a remembered rule is matched (R76, R92).

A *subject* is what is about to happen, as the engine judged it (never as the model
wrote it): `CommandSubject` is a command with its parsed argv and the real directory it
runs in. A rule covers a subject only through `covers`, which looks up the rule's kind
in `_KINDS`; a kind nobody registered covers nothing (fail closed), nor does a rule
of a subject of another class. Adding a kind means: its constant in
`agentrio.protocol.rules`, a subject class here (if a new kind of thing is asked
about, added to `Subject`), a builder that writes its ``covers`` line, and one entry in
`_KINDS`.

- ``command``: the subject's text (`rule_text`) equals the rule's, and its real
  directory equals the rule's. Never a restricted subject (the password is asked every
  time, R7) and never a rule without a directory.
- ``command_prefix``: the subject is offered exactly the rule's prefix
  (`agentrio.engine.rules.prefix.offered_prefix`, re-judged on the subject's own argv),
  runs in the rule's real directory, and none of its further words names a path
  outside that directory, by text or real path
  (`agentrio.engine.tools.policy.path_outside`): ``npm test --prefix /tmp/evil``,
  ``cargo build --manifest-path ../other/Cargo.toml`` or a symlink out would run
  another tree's code, which the directory in the rule was meant to exclude.
- ``mcp_tool``: the subject is a call of exactly the rule's MCP tool; its "directory"
  is ``mcp:NAME``, the server, so a rule never covers a same-named tool of another
  server (docs/mcp.md).
- ``edits`` (issue 32): an `EditSubject` -- a file change by ``write_file`` or
  ``edit_file`` -- whose file's real path lies in the rule's real directory or below
  it. The only kind whose directory test is "under", not "equal": the choice says
  "Always allow edits of files under <directory>" and the person reads that directory.
"""

from __future__ import annotations

import secrets
import shlex
from collections.abc import Callable, Sequence
from typing import Any, Final, Generic, TypeAlias, TypeVar

import attrs

from agentrio.engine.rules.prefix import offered_prefix
from agentrio.engine.tools.policy import path_outside
from agentrio.protocol.rules import COMMAND, COMMAND_PREFIX, EDITS, MCP_TOOL, AllowedRule

__all__ = [
    "CommandSubject",
    "EditSubject",
    "McpToolSubject",
    "Subject",
    "command_rule",
    "covers",
    "edits_rule",
    "mcp_tool_rule",
    "new_rule_id",
    "prefix_rule",
    "rule_text",
    "same_rule",
]


@attrs.frozen(kw_only=True)
class CommandSubject:
    """A command about to run: ``command`` as the call gave it, ``argv`` the judged argv
    (None: not a simple command), ``cwd`` the real directory it runs in (as shown),
    ``restricted`` the policy's verdict (a restricted path or an elevation)."""

    command: str | list[str]
    argv: tuple[str, ...] | None
    cwd: str
    restricted: bool


@attrs.frozen(kw_only=True)
class McpToolSubject:
    """A call of the MCP tool ``tool`` (``mcp__NAME__TOOL``); ``cwd`` is ``mcp:NAME``."""

    tool: str
    cwd: str


@attrs.frozen(kw_only=True)
class EditSubject:
    """A file change about to be applied: ``path`` the file's real path, ``cwd`` the
    real directory holding it."""

    path: str
    cwd: str


#: Everything a rule may be asked to cover (a union as kinds of subject are added;
#: each has the real directory ``cwd`` it happens in, or for an MCP tool its server).
Subject: TypeAlias = CommandSubject | McpToolSubject | EditSubject
S = TypeVar("S", bound=Subject)


def rule_text(command: str | list[str]) -> str:
    """The text an exact rule for ``command`` holds, and that the dialog shows it will
    hold: a string as is, an argv as ``shlex.join`` (which ``/bin/sh`` reads back as
    the same argv)."""
    return command if isinstance(command, str) else shlex.join(command)


def new_rule_id() -> str:
    """A fresh rule id: ``rule_`` and 8 hex (what ``forget_allowed`` accepts)."""
    return f"rule_{secrets.token_hex(4)}"


def _rule(kind: str, text: str, cwd: str, *, at: float, covers: str) -> AllowedRule:
    if not cwd.startswith("/"):
        raise ValueError("a remembered rule needs the real directory it covers")
    return AllowedRule(
        id=new_rule_id(), kind=kind, command=text, cwd=cwd, added_at=at, covers=covers
    )


def command_rule(command: str | list[str], cwd: str, *, at: float) -> AllowedRule:
    """The rule "Always allow this exact command in this directory" makes."""
    text = rule_text(command)
    return _rule(COMMAND, text, cwd, at=at, covers=f"exactly `{text}` in {cwd}")


def prefix_rule(prefix: Sequence[str], cwd: str, *, at: float) -> AllowedRule:
    """The argv-prefix rule for ``prefix`` (from `offered_prefix`) in ``cwd``."""
    text = shlex.join(prefix)
    covers = f"`{text} …` in {cwd} (any further arguments that name no path outside it)"
    return _rule(COMMAND_PREFIX, text, cwd, at=at, covers=covers)


def mcp_tool_rule(subject: McpToolSubject, *, at: float) -> AllowedRule:
    """The rule "Always allow this MCP tool" makes: every call of ``subject.tool``."""
    server = subject.cwd.removeprefix("mcp:")
    covers = f"every call of `{subject.tool}` (MCP server {server})"
    return AllowedRule(
        id=new_rule_id(),
        kind=MCP_TOOL,
        command=subject.tool,
        cwd=subject.cwd,
        added_at=at,
        covers=covers,
    )


def edits_rule(directory: str, *, at: float) -> AllowedRule:
    """The rule "Always allow edits under this directory" makes, for the real
    ``directory`` a file change's confirmation showed."""
    covers = f"edits of files under {directory} (write_file, edit_file)"
    return _rule(EDITS, "write_file, edit_file", directory, at=at, covers=covers)


def same_rule(a: AllowedRule, b: AllowedRule) -> bool:
    """Whether ``a`` and ``b`` cover the same thing (a second approval keeps the first)."""
    return (a.kind, a.command, a.cwd) == (b.kind, b.command, b.cwd)


def _covers_command(rule: AllowedRule, subject: CommandSubject) -> bool:
    return not subject.restricted and rule.command == rule_text(subject.command)


def _covers_prefix(rule: AllowedRule, subject: CommandSubject) -> bool:
    offered = offered_prefix(subject.argv, restricted=subject.restricted)
    if offered is None or shlex.join(offered) != rule.command:
        return False
    assert subject.argv is not None  # offered: a simple command
    return not path_outside(subject.argv[len(offered) :], rule.cwd)


def _covers_mcp_tool(rule: AllowedRule, subject: McpToolSubject) -> bool:
    return rule.command == subject.tool


def _same_directory(rule_cwd: str, cwd: str) -> bool:
    return rule_cwd == cwd


def _under_directory(rule_cwd: str, cwd: str) -> bool:
    if not (rule_cwd.startswith("/") and cwd.startswith("/")):
        return False  # only real paths are "under" one another
    return (cwd.rstrip("/") + "/").startswith(rule_cwd.rstrip("/") + "/")


@attrs.frozen
class _Kind(Generic[S]):
    """How one kind matches: the subjects it can cover, the test past the directory
    check `covers` makes for every kind, and that directory check (equal, unless a
    kind says "under")."""

    subject: type[S]
    matches: Callable[[AllowedRule, S], bool]
    directory: Callable[[str, str], bool] = _same_directory


_KINDS: Final[dict[str, _Kind[Any]]] = {
    COMMAND: _Kind(CommandSubject, _covers_command),
    COMMAND_PREFIX: _Kind(CommandSubject, _covers_prefix),
    MCP_TOOL: _Kind(McpToolSubject, _covers_mcp_tool),
    EDITS: _Kind(EditSubject, lambda rule, subject: True, _under_directory),
}


def covers(rule: AllowedRule, subject: Subject) -> bool:
    """Whether ``rule`` lets ``subject`` happen without asking (module docstring)."""
    kind = _KINDS.get(rule.kind)
    if kind is None or not isinstance(subject, kind.subject):
        return False  # an unknown kind, or a rule about something else
    if not rule.cwd or not kind.directory(rule.cwd, subject.cwd):
        return False  # no directory known, or another one: never widens
    return kind.matches(rule, subject)
