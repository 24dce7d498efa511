"""Remembered rules on the wire: what one covers, and what a confirmation offers (R76, R92).

A rule is tagged by its ``kind``; each kind names what it covers in its own fields and
says so in one line, ``covers``, which every front-end shows as is (so a front-end
needs no change when a kind is added). The engine decides what a rule covers in one
place (`agentrio.engine.rules`); this module only names the values.

Kinds today:

- ``command``: exactly ``command`` (a string command's text, an argv as ``shlex.join``
  of it), run in exactly the real directory ``cwd``;
- ``command_prefix``: a simple command whose judged argv starts with the words of
  ``command`` (``shlex.join`` of the prefix), run in exactly ``cwd``;
- ``edits`` (issue 32): a ``write_file``/``edit_file`` change of a file whose real
  path lies under the real directory ``cwd`` (``command`` names the tools).

- ``mcp_tool``: every call of the MCP tool ``command`` (``mcp__NAME__TOOL``); ``cwd``
  is ``mcp:NAME``, the server it is a tool of (docs/mcp.md).

An unknown kind (a newer daemon's rule read by an older one) is listed and covers
nothing.
"""

from __future__ import annotations

from typing import Final

import attrs

__all__ = ["COMMAND", "COMMAND_PREFIX", "EDITS", "MCP_TOOL", "AllowedRule", "RuleOffer"]

#: The kind of an "Always allow this exact command in this directory" rule.
COMMAND: Final = "command"
#: The kind of an argv-prefix rule (``npm test`` and any further arguments).
COMMAND_PREFIX: Final = "command_prefix"
#: The kind of an "Always allow this MCP tool" rule.
MCP_TOOL: Final = "mcp_tool"
#: The kind of an "Always allow edits under this directory" rule (the file tools).
EDITS: Final = "edits"


@attrs.frozen(kw_only=True)
class AllowedRule:
    """One remembered rule of the home, kept in the store across restarts (R92).

    ``kind`` says how it matches (module docstring); ``command`` and ``cwd`` are what
    it matches; ``covers`` says so in words; ``added_at`` (Unix seconds) is since when.
    ``cwd`` is empty only in a frame of a daemon from before rules had a directory:
    such a rule covers nothing."""

    id: str
    command: str
    added_at: float
    cwd: str = ""
    kind: str = COMMAND
    covers: str = ""


@attrs.frozen(kw_only=True)
class RuleOffer:
    """A rule a confirmation offers as a choice of its own, besides "Always allow this
    exact command" (the reply's ``remember``): a front-end draws it as "Always allow
    <covers>" and answers with ``rule`` set to its ``kind``. Choosing it approves this
    call and remembers exactly the rule ``covers`` states."""

    kind: str
    covers: str
