"""The home's remembered rules (R76, R92): what each kind covers, and the book of them.

`RuleBook` keeps rules in the store (so they outlive the daemon and are shared by every
session of the home); `agentrio.engine.rules.kinds` is the one place that decides
whether a rule covers a subject, and builds each kind's rule and offer;
`agentrio.engine.rules.prefix` decides which argv prefix a command may be offered.
"""

from __future__ import annotations

from agentrio.engine.rules.book import RuleBook as RuleBook
from agentrio.engine.rules.kinds import CommandSubject as CommandSubject
from agentrio.engine.rules.kinds import EditSubject as EditSubject
from agentrio.engine.rules.kinds import McpToolSubject as McpToolSubject
from agentrio.engine.rules.kinds import Subject as Subject
from agentrio.engine.rules.kinds import command_rule as command_rule
from agentrio.engine.rules.kinds import covers as covers
from agentrio.engine.rules.kinds import edits_rule as edits_rule
from agentrio.engine.rules.kinds import mcp_tool_rule as mcp_tool_rule
from agentrio.engine.rules.kinds import prefix_rule as prefix_rule
from agentrio.engine.rules.kinds import rule_text as rule_text
from agentrio.engine.rules.prefix import offered_prefix as offered_prefix

__all__ = [
    "CommandSubject",
    "EditSubject",
    "McpToolSubject",
    "RuleBook",
    "Subject",
    "command_rule",
    "covers",
    "edits_rule",
    "mcp_tool_rule",
    "offered_prefix",
    "prefix_rule",
    "rule_text",
]
