"""``python -m agentrio.engine daemon …``: the same as ``agentrio daemon …``."""

from __future__ import annotations

from agentrio.engine.cli import main

__all__: list[str] = []

if __name__ == "__main__":
    raise SystemExit(main())
