"""The ``[agent]`` table of the configuration: how tasks are run for a person.

A table of its own module because `agentrio.engine.config` is at its size limit; it
is part of `agentrio.engine.config.Config` like every other table (docs/configuration.md).
"""

from __future__ import annotations

import attrs

__all__ = ["AgentConfig"]


@attrs.frozen(kw_only=True)
class AgentConfig:
    """``[agent]``: what every task is told besides agentrio's own system prompt."""

    #: Added to the end of every task's system prompt (`agentrio.engine.system_prompt`).
    instructions: str = ""
