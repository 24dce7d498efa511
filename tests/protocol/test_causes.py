"""A cause's ending, derived in one place (issue 32 part 1: "the ending (DoneStatus)
derived in one place"; R40, R41)."""

from __future__ import annotations

from agentrio.protocol.causes import Cause
from agentrio.protocol.frames import KEPT_STATUSES, done_status


def test_each_cause_ends_as_the_task_is_kept_or_not() -> None:
    """R40: only ``user_canceled`` discards (``canceled``); ``paused`` is its own
    ending; every other cause keeps the task as ``aborted``. The kept endings are
    exactly those of the causes that keep the pending record."""
    assert {cause: done_status(cause) for cause in Cause} == {
        Cause.USER_CANCELED: "canceled",
        Cause.PAUSED: "paused",
        Cause.USER_ABORTED: "aborted",
        Cause.DISCONNECTED: "aborted",
        Cause.SHUTDOWN: "aborted",
        Cause.SUPERSEDED: "aborted",
    }
    for cause in Cause:
        assert (done_status(cause) in KEPT_STATUSES) == cause.keeps_pending
    assert "parked" in KEPT_STATUSES
    assert not {"finished", "failed", "canceled"} & KEPT_STATUSES
