"""Real daemons on the Redis store (issue 21, phase 1): a task parks, is listed,
resumed and finishes; after ``kill -9`` of its daemon a second daemon on the same Redis
resumes it once its marker expired; Redis going away is reported and refused with a
503, and the daemon recovers when it returns.

Each daemon has its own home (one daemon per home) whose ``config.toml`` points at the
session's ``redis-server`` (`tests.conftest.redis_url`). Marker times are shortened
through the test-only environment variables `agentrio.engine.markers` reads.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import trio

from agentrio.engine.messages import CONFLICT_RUNNING
from agentrio.protocol.codec import decode
from agentrio.protocol.http import PendingTasks, SendStarted
from tests.e2e.conftest import ROOT, Daemon, DaemonProcess
from tests.e2e.test_daemon_restart import MARKERS, REFRESH_S, TTL_S, start_running
from tests.redis_server import RedisServer, free_port

PREFIX = "e2e:"


def _redis_home(home: Path, url: str) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(
        f'[store]\nbackend = "redis"\nurl = "{url}"\nprefix = "{PREFIX}"\n', encoding="utf-8"
    )
    return home


def _client(daemon: Daemon | DaemonProcess) -> httpx.AsyncClient:
    info = daemon.info if isinstance(daemon, DaemonProcess) else daemon
    return httpx.AsyncClient(
        base_url=info.base_url, headers={"Authorization": f"Bearer {info.token}"}, timeout=10
    )


async def _pending(daemon: DaemonProcess, session_id: str) -> list[str]:
    async with _client(daemon) as http:
        response = await http.get(f"/v1/session/{session_id}/task")
    assert response.status_code == 200, response.text
    return [t.task_hash for t in decode(response.content, PendingTasks).tasks]


async def _history(daemon: DaemonProcess, session_id: str) -> dict[str, str]:
    async with _client(daemon) as http:
        body = (await http.get(f"/v1/session/{session_id}/task/history")).json()
    return {task["task_hash"]: task["status"] for task in body["tasks"]}


async def _wait_listed(daemon: DaemonProcess, session_id: str, task_hash: str) -> None:
    while task_hash not in await _pending(daemon, session_id):
        await trio.sleep(0.05)


async def test_park_list_resume_finish_on_redis_and_a_second_daemon_sees_it(
    tmp_path: Path, redis_url: str
) -> None:
    """R11, R36, R37, R45, R83: on the Redis backend a parked ``ask:`` task is listed
    (by its daemon and by a second daemon on the same Redis), resumed with an answer
    and finishes into history, which both daemons read; ``/v1/health`` names the
    backend."""
    first = DaemonProcess(_redis_home(tmp_path / "a", redis_url))
    second = DaemonProcess(_redis_home(tmp_path / "b", redis_url))
    try:
        async with _client(first) as http:
            health = (await http.get("/v1/health")).json()
            assert health["store"] == {"backend": "redis", "ok": True, "detail": ""}
            sent = await http.post(
                "/v1/send", json={"input": "ask: Which? | a, b", "session_id": "chat-redis"}
            )
            parked = decode(sent.content, SendStarted).task_hash
            with trio.fail_after(15):
                await _wait_listed(first, "chat-redis", parked)
            assert await _pending(second, "chat-redis") == [parked]
            resumed = await http.post(
                f"/v1/session/chat-redis/task/{parked}/resume", json={"answers": ["a"]}
            )
            assert resumed.status_code == 202, resumed.text
            task_hash = resumed.json()["task_hash"]
            with trio.fail_after(15):
                while (await _history(first, "chat-redis")).get(task_hash) != "finished":
                    await trio.sleep(0.05)
        assert (await _history(second, "chat-redis"))[task_hash] == "finished"
        assert await _pending(first, "chat-redis") == []
    finally:
        assert first.stop() == 0
        assert second.stop() == 0


async def test_kill_9_then_another_daemon_resumes_after_the_ttl(
    tmp_path: Path, redis_url: str
) -> None:
    """R37, R51, R72, R83: a daemon killed with SIGKILL mid-run leaves its task's marker
    in Redis; a second daemon on the same Redis does not list the task while the marker
    lives, lists it once the (shortened) TTL passed, and resumes it to its end."""
    first = DaemonProcess(_redis_home(tmp_path / "a", redis_url), MARKERS)
    second = DaemonProcess(_redis_home(tmp_path / "b", redis_url), MARKERS)
    try:
        try:
            with trio.fail_after(15):
                task_hash = await start_running(
                    Daemon(first.info.base_url, first.info.ws_url, first.info.token, first.home),
                    "chat-kill",
                )
            assert await _pending(second, "chat-kill") == []  # its marker is live
        finally:
            first.kill()
        with trio.fail_after(TTL_S + 10):
            await _wait_listed(second, "chat-kill", task_hash)
        async with _client(second) as http:
            resumed = await http.post(f"/v1/session/chat-kill/task/{task_hash}/resume", json={})
            assert resumed.status_code == 202, resumed.text
            resumed_hash = resumed.json()["task_hash"]
        with trio.fail_after(15):
            while resumed_hash not in await _history(second, "chat-kill"):
                await trio.sleep(0.05)
        assert await _pending(second, "chat-kill") == []
    finally:
        first.close()
        assert second.stop() == 0


async def test_redis_down_is_reported_refused_with_503_and_recovered(
    tmp_path: Path, redis_server: RedisServer, redis_url: str
) -> None:
    """Issue 21: with Redis stopped the daemon keeps running, says so in
    ``/v1/health`` (``store.ok`` false) and refuses new work with a 503
    ``unavailable``; once Redis is back the same daemon takes work again."""
    daemon = DaemonProcess(_redis_home(tmp_path / "a", redis_url))
    try:
        async with _client(daemon) as http:
            redis_server.stop()
            try:
                health = (await http.get("/v1/health")).json()
                assert health["store"]["backend"] == "redis"
                assert health["store"]["ok"] is False
                assert "unavailable" in health["store"]["detail"]
                refused = await http.post(
                    "/v1/send", json={"input": "hello", "session_id": "chat-down"}
                )
                assert refused.status_code == 503, refused.text
                assert refused.json()["error"]["code"] == "unavailable"
            finally:
                redis_server.start()
            with trio.fail_after(15):
                while not (await http.get("/v1/health")).json()["store"]["ok"]:
                    await trio.sleep(0.1)
            sent = await http.post("/v1/send", json={"input": "hello", "session_id": "chat-up"})
            assert sent.status_code == 202, sent.text
    finally:
        assert daemon.stop() == 0


def test_a_daemon_whose_redis_is_unreachable_at_start_says_so_in_one_line(
    tmp_path: Path,
) -> None:
    """R83, issue 18 style: with nothing listening at ``[store] url`` the daemon exits
    2 with one line naming the problem and the fix, and never the URL's password."""
    home = _redis_home(tmp_path / "a", f"redis://:hunter2@127.0.0.1:{free_port()}/0")
    result = subprocess.run(
        [sys.executable, "-m", "agentrio.engine", "daemon", "--port", "0", "--home", str(home)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 2
    (line,) = [x for x in result.stderr.splitlines() if x.startswith("agentrio daemon:")]
    assert "cannot reach the Redis store" in line
    assert f"fix [store] url in {home / 'config.toml'}" in line
    assert "hunter2" not in result.stderr


async def test_a_task_running_while_redis_restarts_finishes(
    tmp_path: Path, redis_server: RedisServer, redis_url: str
) -> None:
    """R51, R72, issue 21: Redis restarted (with its data) while a task runs: the task
    keeps running through it (its marker refresh fails, is retried and succeeds once
    Redis is back) and its end is recorded in history as finished."""
    daemon = DaemonProcess(_redis_home(tmp_path / "a", redis_url), MARKERS)
    try:
        async with _client(daemon) as http:
            sent = await http.post(
                "/v1/send",
                json={"input": "run: sleep 4", "session_id": "chat-bounce", "allow_all": True},
            )
            assert sent.status_code == 202, sent.text
            task_hash = decode(sent.content, SendStarted).task_hash
            redis_server.save()
            redis_server.stop()
            try:
                await trio.sleep(2 * REFRESH_S)  # real time: refreshes fail meanwhile
            finally:
                redis_server.start()
            with trio.fail_after(20):
                while (await _history(daemon, "chat-bounce")).get(task_hash) is None:
                    await trio.sleep(0.1)
            assert (await _history(daemon, "chat-bounce"))[task_hash] == "finished"
        output = (daemon.home / "stdout.log").read_text(encoding="utf-8")
        assert f"cannot refresh the online marker of task {task_hash}" in output
    finally:
        assert daemon.stop() == 0


RACE_CLAIMS = 32
#: Issue 21's acceptance: 100 races over three real daemons.
RACE_REPETITIONS = 100


async def test_32_resumes_spread_over_three_daemons_exactly_one_wins(
    tmp_path: Path, redis_url: str
) -> None:
    """R37, R83, issue 21 acceptance: three real daemons on one Redis; a paused task is
    resumed by 32 concurrent ``POST …/resume`` spread over the three: exactly one 202.
    Every other is 409 ``[Conflict] pending task: running`` while the winner's run
    holds the task, or 404 ``unknown pending task`` once that run (which ends at once
    here) has finished it; never a second resume. Repeated 100 times; the races must
    have overlapped (409s seen, not only 404s after the winner ended). The store-level
    test (`tests/engine/test_store_redis.py`) races 32 claims over three clients 100
    times and sees exactly 31 conflicts each time."""
    daemons = [DaemonProcess(_redis_home(tmp_path / name, redis_url)) for name in "abc"]
    try:
        overlapped = 0
        for repetition in range(RACE_REPETITIONS):
            session = f"chat-race-{repetition}"
            first = daemons[0].info
            with trio.fail_after(15):
                task_hash = await start_running(
                    Daemon(first.base_url, first.ws_url, first.token, first.home), session
                )
            async with _client(daemons[0]) as http:
                paused = await http.post(f"/v1/session/{session}/pause/{task_hash}")
                assert paused.status_code == 200, paused.text
            with trio.fail_after(15):
                await _wait_listed(daemons[1], session, task_hash)
            outcomes = await _resume_race(daemons, session, task_hash)
            wins = [body for _, status, body in outcomes if status == 202]
            assert len(wins) == 1, outcomes
            losses = [body for _, status, body in outcomes if status != 202]
            conflicts = [body for body in losses if CONFLICT_RUNNING in body]
            gone = [body for body in losses if _no_longer_pending(body, task_hash)]
            assert len(conflicts) + len(gone) == RACE_CLAIMS - 1, outcomes
            overlapped += bool(conflicts)
            resumed = json.loads(wins[0])["task_hash"]
            with trio.fail_after(15):
                while resumed not in await _history(daemons[2], session):
                    await trio.sleep(0.05)
        # The races really overlapped: most saw a loser while the winner held the task.
        assert overlapped >= RACE_REPETITIONS // 2, overlapped
    finally:
        for daemon in daemons:
            assert daemon.stop() == 0


def _no_longer_pending(body: str, task_hash: str) -> bool:
    """A 404 saying the task is not pending (any more): the daemon's own check, or the
    store's claim finding no row."""
    return f"no pending task {task_hash}" in body or f"unknown pending task {task_hash}" in body


async def _resume_race(
    daemons: list[DaemonProcess], session: str, task_hash: str
) -> list[tuple[int, int, str]]:
    """`RACE_CLAIMS` concurrent resumes, dealt round-robin over ``daemons``; each
    outcome is (index, status, body)."""
    clients = [_client(daemon) for daemon in daemons]
    outcomes: list[tuple[int, int, str]] = []

    async def one(index: int) -> None:
        http = clients[index % len(clients)]
        response = await http.post(f"/v1/session/{session}/task/{task_hash}/resume", json={})
        outcomes.append((index, response.status_code, response.text))

    try:
        with trio.fail_after(30):
            async with trio.open_nursery() as nursery:
                for index in range(RACE_CLAIMS):
                    nursery.start_soon(one, index)
    finally:
        for http in clients:
            await http.aclose()
    return outcomes
