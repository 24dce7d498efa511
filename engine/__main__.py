"""``python -m agentrio.engine daemon …``: the same as ``agentrio daemon …``."""

from __future__ import annotations

from agentrio.engine.startup_gc import hold_collector

hold_collector()  # before the engine's modules are imported (bench B7)

from agentrio.engine.cli import main  # noqa: E402

__all__: list[str] = []

if __name__ == "__main__":
    raise SystemExit(main())
