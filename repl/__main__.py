"""``python -m agentrio.repl``: the same as the ``agentrio`` console script."""

from __future__ import annotations

import sys

from agentrio.repl.cli import main

__all__: list[str] = []

if __name__ == "__main__":
    sys.exit(main())
