"""A daemon does not grow with the sessions it served (issue 16 "Sessions have an owner").

``POST /v1/send`` without a session id makes a new ``chat-`` session each time, as a
web front-end does. With ``[server] session_idle_s`` shortened to half a second, a
thousand of them come and go: once every task has finished and the sweep has run, the
daemon holds as many sessions as when it was idle before, and its RSS is back within
`RSS_SLACK_MIB` of what it was then.

The idle RSS is measured after a warm-up of the same requests, so that what the first
requests load once for good (modules, SQLite's page cache, hypercorn's buffers) is in
it; what is measured is what the thousand sessions leave behind.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from agentrio.testing import RunningDaemon

IDLE_S = 0.5
SENDS = 1_000
WARM_UP = 100
#: Requests in flight at once.
CONCURRENCY = 25
RSS_SLACK_MIB = 16.0  # 10 until sessions held a conversation (docs/reliability.md)


@pytest.fixture
def agentrio_daemon_home(daemon_home: Path) -> Path:
    """The daemon's home, with the idle time shortened by its configuration."""
    daemon_home.mkdir(parents=True, exist_ok=True)
    (daemon_home / "config.toml").write_text(f"[server]\nsession_idle_s = {IDLE_S}\n")
    return daemon_home


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


async def _statistics(http: httpx.AsyncClient) -> dict[str, Any]:
    response = await http.get("/v1/health")
    response.raise_for_status()
    body: dict[str, Any] = response.json()
    return {"tasks": body["tasks"], **body["statistics"]}


async def _send_many(http: httpx.AsyncClient, count: int) -> set[str]:
    """``count`` sends without a session id, ``CONCURRENCY`` at a time; returns the
    session ids the daemon made."""
    sessions: set[str] = set()
    limiter = trio.CapacityLimiter(CONCURRENCY)

    async def one() -> None:
        async with limiter:
            response = await http.post("/v1/send", json={"input": "hello"})
            assert response.status_code == 202, response.text
            sessions.add(response.json()["session_id"])

    async with trio.open_nursery() as nursery:
        for _ in range(count):
            nursery.start_soon(one)
    return sessions


async def _wait_idle(http: httpx.AsyncClient, sessions: int) -> dict[str, Any]:
    """Poll until no task runs and the daemon holds ``sessions`` sessions again."""
    with trio.fail_after(60):
        while True:
            statistics = await _statistics(http)
            if statistics["tasks"] == 0 and statistics["sessions"] == sessions:
                return statistics
            await trio.sleep(IDLE_S / 2)


async def test_a_thousand_one_off_sessions_leave_nothing_behind(
    agentrio_daemon: RunningDaemon,
) -> None:
    """R35, §7 health: after 1,000 sends without a session id and a pause, the session
    count is back to idle's and RSS within `RSS_SLACK_MIB` of idle's."""
    daemon = agentrio_daemon
    headers = {"Authorization": f"Bearer {daemon.token}"}
    async with httpx.AsyncClient(base_url=daemon.base_url, headers=headers, timeout=30) as http:
        idle_sessions = (await _statistics(http))["sessions"]
        assert len(await _send_many(http, WARM_UP)) == WARM_UP
        await _wait_idle(http, idle_sessions)
        rss_idle = _rss_mib(daemon.pid)

        made = await _send_many(http, SENDS)
        assert len(made) == SENDS
        busy = await _statistics(http)
        statistics = await _wait_idle(http, idle_sessions)
        rss_after = _rss_mib(daemon.pid)
    print(
        f"{SENDS} one-off sessions: {busy['sessions']} in memory right after the sends, "
        f"{statistics['sessions']} once idle ({statistics['sessions_dropped']} dropped); "
        f"RSS {rss_idle:.1f} -> {rss_after:.1f} MiB"
    )
    assert statistics["sessions"] == idle_sessions
    assert statistics["sessions_dropped"] >= WARM_UP + SENDS
    assert rss_after - rss_idle < RSS_SLACK_MIB
