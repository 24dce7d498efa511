"""Rules that last (issue 32 section 4, R76, R92) through real daemons on one home.

A confirmation of ``npm test first`` offers the argv-prefix rule, stating the prefix
and the real directory; chosen, it is kept in the home's store (SQLite, or a real
``redis-server``), so the daemon started next on that home lets ``npm test foo`` run
unasked there, in any session -- and still asks for ``npm test; rm x`` and ``sudo npm
test``, and, from a daemon working in another directory, for ``npm test foo`` there.
Forgetting the rule over HTTP answers what it removed. Every refusal is checked by
its side effect: the fake ``npm`` (first on the daemons' ``PATH``) logs each run, and
the file ``rm`` would delete is still there.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
import trio

from agentrio import Client, Decision
from agentrio.protocol.codec import decode
from agentrio.protocol.events import Confirm
from agentrio.protocol.http import AllowedRules
from agentrio.protocol.rules import COMMAND_PREFIX, RuleOffer
from agentrio.testing import RunningDaemon, answer_asks
from tests.e2e.conftest import DaemonProcess

DEADLINE_S = 60
#: How a prefix rule's ``covers`` ends (engine/rules/kinds.py).
TAIL = "(any further arguments that name no path outside it)"
FAKE_NPM = '#!/bin/sh\nprintf "%s\\n" "$*" >> npm.log\n'


@pytest.fixture(params=["sqlite", "redis"])
def store_toml(request: pytest.FixtureRequest) -> str:
    """The home's ``config.toml``: the default SQLite store, or the session's real
    ``redis-server`` (tests/conftest.py)."""
    if request.param == "sqlite":
        return ""
    url = request.getfixturevalue("redis_url")
    return f'[store]\nbackend = "redis"\nurl = "{url}"\nprefix = "rules-e2e:"\n'


async def _daemon(home: Path, path: str, cwd: Path) -> DaemonProcess:
    return await trio.to_thread.run_sync(lambda: DaemonProcess(home, {"PATH": path}, cwd=cwd))


async def _stop(daemon: DaemonProcess) -> None:
    assert await trio.to_thread.run_sync(daemon.stop) == 0


async def _asked(
    client: Client, session: str, text: str, decide: Callable[..., Decision]
) -> Confirm:
    """Run ``text``; its one confirmation is answered with ``decide``; returns it."""
    run = await client.run(session, text, cwd="")  # the daemon's directory: `_daemon`'s cwd
    [(ask, _)] = await answer_asks(run, lambda ask: decide(), limit=1)
    assert (await run.wait_done()).status == "finished"
    [confirm] = [e for e in run.events_so_far if isinstance(e, Confirm)]
    assert confirm.confirm_hash == ask.id
    assert confirm.offers == ask.offers
    return confirm


async def _unasked(client: Client, session: str, text: str) -> None:
    run = await client.run(session, text, cwd="")  # the daemon's directory: `_daemon`'s cwd
    assert (await run.wait_done()).status == "finished"
    assert not [e for e in run.events_so_far if isinstance(e, Confirm)]


def _http(info: RunningDaemon) -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {info.token}"}
    return httpx.AsyncClient(base_url=info.base_url, headers=headers, timeout=10)


async def test_a_prefix_rule_lasts_and_covers_only_what_it_says(
    tmp_path: Path, store_toml: str
) -> None:
    """R92, R76 (the real directory): the prefix rule is offered with its prefix and real directory,
    survives a daemon restart on the same home (both stores), covers ``npm test foo``
    in that directory for another session, asks for a chained command, an elevation
    and another directory (none of which ran), and is forgotten saying what went."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(store_toml, encoding="utf-8")
    bin_dir, work, other = tmp_path / "bin", tmp_path / "work", tmp_path / "other"
    for directory in (bin_dir, work, other):
        directory.mkdir()
    npm = bin_dir / "npm"
    npm.write_text(FAKE_NPM, encoding="utf-8")
    npm.chmod(0o755)
    path = f"{bin_dir}:{os.environ['PATH']}"
    real_work = os.path.realpath(work)
    victim = work / "x"
    victim.write_text("keep", encoding="utf-8")
    log = work / "npm.log"
    covers = f"`npm test …` in {real_work} {TAIL}"

    with trio.fail_after(DEADLINE_S):
        first = await _daemon(home, path, work)
        try:
            async with first.info.connect() as client:
                confirm = await _asked(
                    client, "cli-rules-a", "run: npm test first",
                    lambda: Decision.allow(rule=COMMAND_PREFIX),
                )  # fmt: skip
                [rule] = await client.allowed("cli-rules-a")
        finally:
            await _stop(first)
        assert confirm.offers == [RuleOffer(kind=COMMAND_PREFIX, covers=covers)]
        assert confirm.args == {"command": "npm test first", "cwd": real_work}
        assert (rule.kind, rule.command, rule.cwd, rule.covers) == (
            COMMAND_PREFIX, "npm test", real_work, covers,
        )  # fmt: skip
        assert log.read_text(encoding="utf-8") == "test first\n"

        second = await _daemon(home, path, work)
        try:
            async with second.info.connect() as client:
                assert await client.allowed("cli-rules-b") == [rule]
                await _unasked(client, "cli-rules-b", "run: npm test foo")
                chained = await _asked(
                    client, "cli-rules-b", "run: npm test; rm x", lambda: Decision.deny("no")
                )
                assert chained.offers == []  # not a simple command: no prefix offered
                sudo = await _asked(
                    client, "cli-rules-b", "run: sudo npm test", lambda: Decision.deny("no")
                )
                assert (sudo.restricted, sudo.offers) == (True, [])
        finally:
            await _stop(second)
        assert log.read_text(encoding="utf-8") == "test first\ntest foo\n"
        assert victim.read_text(encoding="utf-8") == "keep"

        third = await _daemon(home, path, other)
        try:
            async with third.info.connect() as client:
                elsewhere = await _asked(
                    client, "cli-rules-c", "run: npm test foo", lambda: Decision.deny("no")
                )
                real_other = os.path.realpath(other)
                assert elsewhere.offers == [
                    RuleOffer(
                        kind=COMMAND_PREFIX,
                        covers=f"`npm test …` in {real_other} {TAIL}",
                    )
                ]
            async with _http(third.info) as http:
                response = await http.delete(f"/v1/session/cli-rules-c/allowed/{rule.id}")
                assert response.status_code == 200, response.text
                assert decode(response.content, AllowedRules) == AllowedRules(
                    rules=[], removed=[rule]
                )
                missing = await http.delete(f"/v1/session/cli-rules-c/allowed/{rule.id}")
                assert missing.status_code == 404
        finally:
            await _stop(third)
    assert not (other / "npm.log").exists()
    assert log.read_text(encoding="utf-8") == "test first\ntest foo\n"
