"""agentrio's terminal REPL: prompt_toolkit on asyncio with a Trio guest run.

Entry point: `agentrio.repl.cli.main` (the ``agentrio`` console script,
``python -m agentrio.repl``). The REPL speaks to the daemon only through
`agentrio.protocol` (SPEC §8, §11).
"""

from __future__ import annotations

__all__: list[str] = []
