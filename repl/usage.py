"""What the session's model calls cost, as the REPL shows it (issue 31 item 7).

Every ``done`` carries its task's usage and the session's total in the daemon's life
(`agentrio.protocol.events.Done`); `UsageBook` keeps the last total (for the status
bar) and each finished task's usage (for ``/usage``), in the order they finished. A
model that reports no tokens (the built-in one) shows no usage anywhere: its tasks are
not listed, and the status bar has no tokens field.
"""

from __future__ import annotations

from typing import Final

import attrs

from agentrio.protocol import wording
from agentrio.protocol.events import Done, TokenUsage

__all__ = ["NONE_YET", "UsageBook", "reported", "toolbar_usage"]

#: What ``/usage`` says before any tokens were reported.
NONE_YET: Final = (
    "no tokens reported in this session yet (none finished, or its model reports none)"
)
#: Most finished tasks ``/usage`` lists (the newest).
SHOWN_TASKS: Final = 20


def reported(usage: TokenUsage) -> bool:
    """Whether the provider reported any tokens (the rule of every front-end)."""
    return bool(usage.input_tokens or usage.output_tokens)


def _count(tokens: int) -> str:
    return str(tokens) if tokens < 10_000 else f"{tokens / 1000:.1f}k"


def toolbar_usage(usage: TokenUsage) -> str:
    """The status bar's field: ``tokens 12.3k in, 840 out · $0.0412``."""
    cost = f" · ${usage.cost_usd:.4f}" if usage.cost_usd else ""
    return f"tokens {_count(usage.input_tokens)} in, {_count(usage.output_tokens)} out{cost}"


def _line(usage: TokenUsage) -> str:
    return wording.usage_line(
        usage.input_tokens, usage.cached_input_tokens, usage.output_tokens, usage.cost_usd
    )


@attrs.define
class UsageBook:
    """The session's usage as this window saw it in ``done`` events."""

    session: TokenUsage = attrs.field(factory=TokenUsage)
    #: ``(task hash, usage)`` of each finished task that reported tokens, oldest first.
    tasks: list[tuple[str, TokenUsage]] = attrs.field(factory=list)

    def record(self, task_hash: str, done: Done) -> None:
        """Take a ``done`` of one of the session's tasks (this window's or another's)."""
        self.session = done.session_usage
        if reported(done.usage):
            self.tasks.append((task_hash, done.usage))
            del self.tasks[:-SHOWN_TASKS]

    def clear(self) -> None:
        """A new session (``/new``) starts from nothing."""
        self.session = TokenUsage()
        self.tasks.clear()

    def report(self) -> list[tuple[str, str]]:
        """``/usage``: ``(text, style)`` lines, each task's then the session's."""
        if not reported(self.session):
            return [(NONE_YET, "class:dim")]
        lines = [(f"  {task_hash[:8]}  {_line(usage)}", "") for task_hash, usage in self.tasks]
        calls = wording.plural(self.session.calls, "model call")
        return [
            (
                "usage of the tasks finished while this window was open:" if lines else "usage:",
                "class:dim",
            ),
            *lines,
            (f"  session ({calls}): {_line(self.session)}", "class:dim"),
        ]
