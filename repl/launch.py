"""How to run this agentrio again from a shell: the command the REPL prints for
reopening a session (``reopen with `agentrio --session cli-…```) must work as printed
(issue 30).

``agentrio`` when the ``agentrio`` on ``PATH`` is this install's (an activated venv, or
``make install``'s link in ``~/.local/bin``); else the absolute path of this install's
script (``/…/.venv/bin/agentrio``), which works from any shell; else (no script: run
as ``python -m agentrio.repl``) this interpreter with ``-m agentrio.repl``.
"""

from __future__ import annotations

import functools
import os
import shlex
import shutil
import sys
from pathlib import Path

__all__ = ["agentrio_command"]


@functools.cache
def agentrio_command() -> str:
    """The shell words that start this agentrio (see the module doc); read once."""
    script = Path(sys.executable).parent / "agentrio"
    if not (script.is_file() and os.access(script, os.X_OK)):
        return f"{shlex.quote(sys.executable)} -m agentrio.repl"
    on_path = shutil.which("agentrio")
    if on_path is not None and os.path.realpath(on_path) == os.path.realpath(script):
        return "agentrio"
    return shlex.quote(str(script))
