"""Start-up errors as one line that names the path or port and the fix (issue 18).

A daemon that cannot start (home unwritable or read-only, disk full, store corrupt,
port taken) is met by a person at a terminal or by the REPL reading its log: a
traceback there says nothing about what to do. `startup_message` turns the error that
stopped the start into one line; `agentrio.engine.server.lifecycle.run_daemon` prints it and
exits with `STARTUP_EXIT`.
"""

from __future__ import annotations

import errno
from pathlib import Path
from typing import Final

from agentrio.engine.config import locate_error
from agentrio.engine.errors import ConfigError
from agentrio.engine.store.base import StoreError, StoreFull, StoreUnavailable, StoreUnreadable

__all__ = ["STARTUP_EXIT", "find_cause", "startup_message"]

#: Exit status of a daemon that could not start (argparse's usage errors use it too).
STARTUP_EXIT: Final = 2

_HOME_FIX: Final = "choose another home with --home DIR or AGENTRIO_HOME"


def find_cause(exc: BaseException) -> OSError | StoreError | ConfigError | None:
    """The `OSError`, `StoreError` or `ConfigError` inside ``exc``, however deeply
    grouped (a nursery wraps what its children raise)."""
    if isinstance(exc, OSError | StoreError | ConfigError):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = find_cause(inner)
            if found is not None:
                return found
    return None


def startup_message(exc: BaseException, *, home: Path, host: str, port: int) -> str | None:
    """One line saying what stopped the start and how to fix it, or None when ``exc``
    is not a start-up error this module knows (it is then re-raised)."""
    cause = find_cause(exc)
    if isinstance(cause, ConfigError):
        # What only building the model finds (a script file that is not there, an API
        # key in no variable and no secret): said like the loader's errors (issue 30).
        return locate_error(home / "config.toml", str(cause))
    if isinstance(cause, StoreFull):
        return (
            f"no space left on the disk holding {home / 'agentrio.db'}: free some space "
            f"and start again, or {_HOME_FIX}"
        )
    if isinstance(cause, StoreUnreadable):
        db = home / "agentrio.db"
        return (
            f"{db} is not a readable agentrio database (corrupt?): move it aside "
            f"(mv {db} {db}.broken) and start again, or restore a backup"
        )
    if isinstance(cause, StoreUnavailable):
        return (
            f"cannot reach the Redis store ({cause}): start Redis, or fix [store] url "
            f"in {home / 'config.toml'}"
        )
    if isinstance(cause, StoreError):
        return f"cannot open the store in {home}: {cause}"
    if isinstance(cause, OSError):
        return _os_message(cause, home=home, host=host, port=port)
    return None


def _os_message(exc: OSError, *, home: Path, host: str, port: int) -> str:
    where = exc.filename if exc.filename is not None else home
    writing = "" if exc.filename is None else f" (writing {exc.filename})"
    match exc.errno:
        case errno.EADDRINUSE:
            return (
                f"port {port} on {host} is already in use: stop what uses it, or choose "
                f"another port with --port N (or [server] port in {home / 'config.toml'})"
            )
        case errno.EADDRNOTAVAIL:
            return f"cannot bind {host}:{port} (no such local address): choose another with --host"
        case errno.ENOSPC | errno.EDQUOT:
            return (
                f"no space left on the disk holding {home}{writing}: free some space "
                f"and start again, or {_HOME_FIX}"
            )
        case errno.EROFS:
            return f"home {home} is on a read-only file system: {_HOME_FIX}"
        case errno.EACCES | errno.EPERM:
            return (
                f"home {home} is not writable by this user ({where}: permission denied): "
                f"fix its owner or mode (chown/chmod), or {_HOME_FIX}"
            )
        case _:
            return f"cannot use {where}: {exc.strerror or exc}: fix it, or {_HOME_FIX}"
