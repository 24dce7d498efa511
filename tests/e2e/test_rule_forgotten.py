"""A rule forgotten stops allowing at once, although the daemon keeps the rules in
memory (issue 32 §4, B16; R76, R92): through the real daemon on its SQLite store.

Connection A keeps "Always allow this exact command" for ``touch made`` and the call
runs unasked again (the daemon's rule cache is filled). Connection B forgets the rule:
A's next identical call asks at once. Kept again, the rule is then deleted by another
process writing the store's file directly: A's next call asks at once too. Each
refused call is checked on disk (the file stays absent).
"""

from __future__ import annotations

import sys
from pathlib import Path

import trio

from agentrio import Client, Decision
from agentrio.protocol.events import Confirm
from agentrio.protocol.rules import COMMAND
from agentrio.testing import answer_asks
from tests.e2e.conftest import DaemonProcess

DEADLINE_S = 60
SESSION = "cli-forgotten"
#: Another process deletes every rule of the store's file (the daemon keeps running).
DELETE_RULES = (
    "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); "
    "c.execute('DELETE FROM rules'); c.commit()"
)


async def _call(client: Client, made: Path, decision: Decision | None) -> bool:
    """Run ``touch made`` once; answer its confirmation with ``decision`` (None: none
    may come). True when it asked."""
    made.unlink(missing_ok=True)
    run = await client.run(SESSION, f"run: touch {made}", cwd=str(made.parent))
    if decision is not None:
        await answer_asks(run, lambda ask: decision, limit=1)
    assert (await run.wait_done()).status == "finished"
    asked = [e for e in run.events_so_far if isinstance(e, Confirm)]
    assert len(asked) == (0 if decision is None else 1)
    return bool(asked)


async def test_a_rule_forgotten_elsewhere_stops_allowing_at_once(tmp_path: Path) -> None:
    """Issue 32 §4, R76, R92: see the module docstring."""
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    made = work / "made"
    remember, deny = Decision.allow(remember=True), Decision.deny("not now")
    daemon = await trio.to_thread.run_sync(lambda: DaemonProcess(home, cwd=work))
    try:
        with trio.fail_after(DEADLINE_S):
            async with daemon.info.connect() as a, daemon.info.connect() as b:
                assert await _call(a, made, remember)
                assert not await _call(a, made, None)  # covered, from the cache now
                [rule] = await a.allowed(SESSION)
                assert rule.kind == COMMAND
                assert await b.forget_allowed(SESSION, rule.id) == []
                assert await _call(a, made, deny)
                assert not made.exists()

                assert await _call(a, made, remember)
                assert not await _call(a, made, None)
                database = home / "agentrio.db"
                await trio.run_process([sys.executable, "-c", DELETE_RULES, str(database)])
                assert await _call(a, made, deny)
                assert not made.exists()
                assert await a.allowed(SESSION) == []
    finally:
        assert await trio.to_thread.run_sync(daemon.stop) == 0
