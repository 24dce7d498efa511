"""The pieces behind issue 29 finding 10, with injected clocks: the rate-limited
refusal log, and bus signatures bound to their channel, their time and their number.
(The real daemon and Redis run in tests/e2e/test_unauthenticated.py and
tests/e2e/test_cluster.py.)"""

from __future__ import annotations

import logging

import pytest

from agentrio.engine.server.peers import SIGNATURE_WINDOW_S, BusKey, ReplayGuard
from agentrio.engine.server.refusals import RefusalLog


def test_refusal_log_writes_a_burst_then_says_what_it_left_out(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Issue 29 finding 10: 1,000 refusals of one kind in a minute leave 5 lines and a
    notice; the next window starts by counting what was left out; kinds are apart."""
    now = [0.0]
    refusals = RefusalLog(logging.getLogger("test.refusals"), clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, logger="test.refusals"):
        for n in range(1000):
            refusals.warning("origin", "refused origin %d", n)
        refusals.warning("host", "refused host")
        now[0] = 61.0
        refusals.warning("origin", "refused origin again")
    lines = [record.getMessage() for record in caplog.records]
    assert lines == [
        "refused origin 0",
        "refused origin 1",
        "refused origin 2",
        "refused origin 3",
        "refused origin 4",
        "further 'origin' lines are left out for up to 60 s",
        "refused host",
        "995 more line(s) like 'origin' were left out in the last 60 s",
        "refused origin again",
    ]


def test_a_signature_binds_its_context_and_its_time() -> None:
    """Issue 29 finding 10: a message verifies only for the channel (or stream) it was
    signed for, only within the window, and only with the cluster's key."""
    now = [1_000_000.0]
    key = BusKey("cluster-token", wall=lambda: now[0])
    signed = key.sign('{"type":"heartbeat","sender":"a"}', "p:bus")
    opened = key.open(signed, "p:bus")
    assert opened.text == '{"type":"heartbeat","sender":"a"}'
    assert opened.seq == 1
    with pytest.raises(ValueError, match="copied from another channel or session"):
        key.open(signed, "p:bus:b")
    with pytest.raises(ValueError, match="bad signature"):
        BusKey("another token", wall=lambda: now[0]).open(signed, "p:bus")
    with pytest.raises(ValueError, match="bad signature"):
        key.open(signed.replace('"a"', '"b"'), "p:bus")
    now[0] += SIGNATURE_WINDOW_S + 1
    with pytest.raises(ValueError, match="outside the 30 s window"):
        key.open(signed, "p:bus")
    assert key.open(signed, "p:bus", window_s=3600).seq == 1
    assert key.open(key.sign("next", "p:bus"), "p:bus").seq == 2


def test_the_replay_guard_takes_each_number_once() -> None:
    """Issue 29 finding 10: a number already seen from a sender, or older than its
    window, is a replay; another sender's numbers are its own; a little reordering
    is fine."""
    guard = ReplayGuard(window=8)
    assert [guard.fresh("a", n) for n in (1, 3, 2, 3, 1)] == [True, True, True, False, False]
    assert guard.fresh("b", 1) is True
    assert all(guard.fresh("a", n) for n in range(4, 40))
    assert guard.fresh("a", 5) is False  # long past the window
    assert guard.fresh("a", 35) is False  # seen, still inside it
    assert guard.fresh("a", 41) is True
