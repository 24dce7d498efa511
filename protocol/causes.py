"""Why a task (or any cancel scope) was stopped: the one vocabulary of the cause, from
the front-end's key to the engine's cancel scope and the cluster's control message.

The wire carries a `Cause` by its value: a ``cancel`` frame's ``cause``, a reply's
``stop`` (the stop choice of a confirmation or question), ``POST …/confirm``'s
``stop`` and a peer's ``control`` message. A front-end may give only the causes a
person gives (`PERSON_CAUSES`); the others are the engine's own. Older clients sent
``pause: true|false``, ``action: "cancel_task"|"abort_task"`` and ``op``: these are
still read (`agentrio.protocol.legacy`) and never sent.
"""

from __future__ import annotations

import enum
from typing import Any, Final

from agentrio.protocol.errors import FrameDecodeError

__all__ = ["PERSON_CAUSES", "Cause", "person_cause"]


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


#: The causes a person may give through a front-end: discard, stop and keep, pause.
PERSON_CAUSES: Final = frozenset({Cause.USER_CANCELED, Cause.USER_ABORTED, Cause.PAUSED})


def person_cause(_: Any, attribute: Any, value: Cause | None) -> None:
    """attrs validator: ``value`` (None allowed) is a cause a person may give. The
    error names the field as decoding errors do (R71)."""
    if value is not None and value not in PERSON_CAUSES:
        allowed = ", ".join(repr(cause.value) for cause in sorted(PERSON_CAUSES))
        raise FrameDecodeError(
            f"$.{attribute.name}",
            f"{value.value!r} is not a cause a front-end may give ({allowed})",
        )
