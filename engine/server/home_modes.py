"""The home's modes at daemon start: agentrio's own files made owner-only, the person's
``config.toml`` left as it is and warned about when others can read it (R73, issue 15
item 6, issue 30).
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path
from typing import Final

from agentrio.engine.store.files import make_home, tighten_home

__all__ = ["tighten_home_logged"]

log = logging.getLogger("agentrio.daemon")

#: How many tightened paths the start-up log line names.
_LISTED: Final = 5


def tighten_home_logged(home: Path) -> None:
    """Make (or tighten) the home and everything in it owner-only, and say so once
    when something was open to group or world (issue 15 item 6)."""
    make_home(home)
    changed, failed = tighten_home(home)
    if changed:
        root = home.resolve()
        shown = ", ".join(os.path.relpath(path, root) for path in changed[:_LISTED])
        more = f" and {len(changed) - _LISTED} more" if len(changed) > _LISTED else ""
        log.warning(
            "tightened permissions in %s: %d path(s) were open to group or world "
            "(now owner-only): %s%s",
            home,
            len(changed),
            shown,
            more,
        )
    for path, exc in failed:
        log.warning("cannot make %s owner-only: %s", path, exc.strerror or exc)
    _warn_open_config(home / "config.toml")


def _warn_open_config(path: Path) -> None:
    """Warn once per start about a ``config.toml`` others may read or write. It is the
    person's file: agentrio reads it and leaves its mode alone (issue 30); a secret in
    it is refused anyway (`agentrio.engine.config.load_config`), but a writable one lets another
    user change what this daemon runs."""
    try:
        mode = stat.S_IMODE(os.lstat(path).st_mode)
    except OSError:
        return
    if mode & 0o077:
        who = "written" if mode & 0o022 else "read"
        log.warning(
            "%s can be %s by other users (mode %04o): agentrio leaves your file as it is; "
            "chmod 600 %s to keep it private",
            path,
            who,
            mode,
            path,
        )
