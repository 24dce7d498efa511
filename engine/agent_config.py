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
    #: The working directory of a session no one named one for (the web page, the
    #: bots, a script without ``cwd``; R86): ``~`` expanded, a relative one from
    #: ``$HOME``. Empty: the home's parent for a home other than the default one, else
    #: ``$HOME`` (`agentrio.engine.workdirs`).
    cwd: str = ""
