"""The REPL's line history, ``<home>/repl_history``, kept owner-only (issue 33 item 9).

prompt_toolkit's `FileHistory` creates its file on the first line typed with the
process's umask (0644 on most systems), yet the lines typed are a person's own --
commands, paths, sometimes pasted values. Like every file of the home it is 0600
(docs/security.md): created so before prompt_toolkit ever opens it, and an older one
left readable by others is narrowed.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

from prompt_toolkit.history import FileHistory

__all__ = ["HISTORY_MODE", "private_history"]

#: The mode of ``repl_history``, like every file of the home.
HISTORY_MODE: Final = 0o600


def private_history(path: Path) -> FileHistory:
    """A `FileHistory` on ``path``, which exists owner-only (0600) before it returns."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, HISTORY_MODE)
    try:
        os.fchmod(fd, HISTORY_MODE)
    finally:
        os.close(fd)
    return FileHistory(str(path))
