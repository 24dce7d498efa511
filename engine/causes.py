"""Why a cancel scope was cancelled, and what that means for the task's pending record."""

from __future__ import annotations

import enum

__all__ = ["Cause"]


class Cause(enum.StrEnum):
    """The cause every cancel carries (R40, R41).

    Only `USER_CANCELED` deletes the pending task (after writing it to history with a
    ``[Canceled]`` reply); every other cause tears the run down and keeps the pending
    record, so the task can be resumed.
    """

    USER_CANCELED = "user_canceled"
    """Ctrl+C, "Yes" in the Esc popup, "Cancel task" in a confirmation."""
    USER_ABORTED = "user_aborted"
    """"Abort task" in a confirmation: stop now, keep it resumable."""
    PAUSED = "paused"
    """"Pause" in the Esc popup."""
    DISCONNECTED = "disconnected"
    """The front-end connection that started the run closed (R43)."""
    SHUTDOWN = "shutdown"
    """The daemon is stopping (R53)."""
    SUPERSEDED = "superseded"
    """Internal housekeeping: the work is no longer wanted (a finished task's marker
    loop, a settled job's watcher). Never applied to a task by a person."""

    @property
    def keeps_pending(self) -> bool:
        """True when a task cancelled for this cause stays resumable."""
        return self is not Cause.USER_CANCELED
