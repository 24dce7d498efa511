"""``python -m repl``: the same as the ``agentrio`` console script."""

from __future__ import annotations

import sys

from repl.cli import main

__all__: list[str] = []

if __name__ == "__main__":
    sys.exit(main())
