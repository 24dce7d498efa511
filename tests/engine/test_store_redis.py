"""engine/store/redis_store: what only the Redis backend has (issue 21).

The behaviour both backends share is tests/engine/test_store.py, run on each. Here:
the claim race across several clients (standing for daemons), key prefixes, the marker
keys' Redis TTL, and Redis going away and coming back.
"""

from __future__ import annotations

import gc
import time
import warnings
from functools import partial

import pytest
import trio
import trio.testing

from agentrio.engine.errors import Conflict
from agentrio.engine.markers import MARKER_REFRESH_S, MARKER_RETRY_S, keep_marker_alive
from agentrio.engine.messages import CONFLICT_RUNNING
from agentrio.engine.store import StoreError, StoreUnavailable, TaskRow, marker_key
from agentrio.engine.store.redis_store import MARKER_GC_GRACE_S, RedisStore, open_redis_store
from agentrio.protocol.errors import ErrorCode
from tests.redis_server import RedisServer

SESSION = "chat-redis"
TASK = "cd" * 16
CLIENTS = 3
CLAIMS = 32
REPETITIONS = 100


def _task(task_hash: str = TASK, **changes: object) -> TaskRow:
    values: dict[str, object] = {
        "session_id": SESSION,
        "task_hash": task_hash,
        "state": "parked",
        "objective": "race me",
        "origin": "chat-",
        "model": "builtin",
        "created_at": 1.0,
        "updated_at": 1.0,
        "snapshot": {"objective": "race me"},
        "questions": [],
    }
    values.update(changes)
    return TaskRow(**values)  # type: ignore[arg-type]


async def test_32_claims_over_three_clients_exactly_one_wins_100_times(redis_url: str) -> None:
    """R37, issue 21 acceptance: 32 concurrent resume claims spread over three store
    clients (three daemons' connection pools) on one Redis: exactly one wins, the 31
    others get ``[Conflict] pending task: running``; 100 repetitions, half of them
    moving the task to a new hash (R36)."""
    async with (
        open_redis_store(redis_url) as a,
        open_redis_store(redis_url) as b,
        open_redis_store(redis_url) as c,
    ):
        clients: list[RedisStore] = [a, b, c]
        for repetition in range(REPETITIONS):
            session = f"{SESSION}-{repetition}"
            await a.put_task(_task(session_id=session))
            move = repetition % 2 == 1
            wins, conflicts = await _race(clients, session, move=move)
            assert len(wins) == 1, (repetition, wins)
            assert conflicts == [CONFLICT_RUNNING] * (CLAIMS - 1)
            (row,) = await b.list_tasks(session)
            assert row == wins[0]
            assert row.state == "running"
            assert row.resumed_from == (TASK if move else None)


async def _race(
    clients: list[RedisStore], session: str, *, move: bool
) -> tuple[list[TaskRow], list[str]]:
    """`CLAIMS` concurrent claims of one task, dealt round-robin over ``clients``."""
    wins: list[TaskRow] = []
    conflicts: list[str] = []

    async def one(index: int) -> None:
        store = clients[index % len(clients)]
        new_hash = f"{index:032x}" if move else None
        try:
            wins.append(
                await store.claim(session, TASK, now=1000.0, ttl=60.0, new_task_hash=new_hash)
            )
        except Conflict as exc:
            conflicts.append(str(exc))

    async with trio.open_nursery() as nursery:
        for index in range(CLAIMS):
            nursery.start_soon(one, index)
    return wins, conflicts


async def test_prefixes_keep_deployments_apart(redis_url: str) -> None:
    """Issue 21: two prefixes on one server share nothing (tasks, markers, secrets)."""
    async with (
        open_redis_store(redis_url, prefix="one:") as one,
        open_redis_store(redis_url, prefix="two:") as two,
    ):
        await one.put_task(_task(), marker_expires_at=100.0)
        await one.put_secret(SESSION, "k", "v")
        assert await two.list_tasks(SESSION) == []
        assert await two.marker_alive(marker_key(SESSION, TASK), now=0.0) is False
        assert await two.get_secret(SESSION, "k") is None
        assert (await two.statistics(now=0.0)).tasks == 0
        assert (await one.statistics(now=0.0)).tasks == 1


async def test_a_marker_is_a_redis_key_with_a_ttl(redis_url: str) -> None:
    """R51: a marker set for a wall-clock time is a Redis key that Redis itself drops
    ``MARKER_GC_GRACE_S`` after it expires; liveness still follows the caller's
    ``now`` exactly. A marker on a mock clock (a past time) gets no Redis TTL."""
    async with open_redis_store(redis_url, prefix="ttl:") as store:
        now = time.time()
        key = marker_key(SESSION, TASK)
        await store.set_marker(key, expires_at=now + 60)
        client = store._client
        ttl_ms = await client.pttl(f"ttl:m:{key}")
        assert (60 + MARKER_GC_GRACE_S - 5) * 1000 < ttl_ms <= (60 + MARKER_GC_GRACE_S) * 1000
        assert await store.marker_alive(key, now=now + 59) is True
        assert await store.marker_alive(key, now=now + 60) is False
        await store.set_marker(key, expires_at=100.0)
        assert await client.pttl(f"ttl:m:{key}") == -1
        await store.delete_marker(key)
        assert await client.exists([f"ttl:m:{key}"]) == 0


# coredis 6.9 leaves the memory streams of a connection that failed to connect unclosed
# (upstream: `BaseConnection.run` closes them only once connected); harmless, but their
# ResourceWarning would fail the test under `filterwarnings = error`.
@pytest.mark.filterwarnings("ignore:Unclosed <MemoryObject:ResourceWarning")
async def test_redis_down_is_a_503_and_recovers(redis_server: RedisServer) -> None:
    """Issue 21: with Redis stopped every call fails fast with `StoreUnavailable` (a 503
    ``unavailable``, like a full disk) and a claim never succeeds; when Redis is back
    the same store object works again, with no reopening."""
    redis_server.flush()
    async with open_redis_store(redis_server.url, connect_timeout_s=2, reply_timeout_s=2) as store:
        await store.put_task(_task())
        redis_server.stop()
        try:
            with trio.fail_after(10):
                with pytest.raises(StoreUnavailable) as caught:
                    await store.claim(SESSION, TASK, now=10.0, ttl=60.0)
                assert caught.value.code == ErrorCode.UNAVAILABLE
                assert caught.value.status == 503
                assert "claim" in str(caught.value)
                with pytest.raises(StoreUnavailable):
                    await store.put_task(_task("ef" * 16))
                with pytest.raises(StoreUnavailable):
                    await store.marker_alive("k", now=0.0)
                with pytest.raises(StoreUnavailable):
                    await store.ping()
            del caught  # its traceback holds the failed connections
            _collect_failed_connections()
        finally:
            redis_server.start()  # empty: no persistence in the tests
        with trio.fail_after(10):
            await store.ping()
            await store.put_task(_task())
            claimed = await store.claim(SESSION, TASK, now=10.0, ttl=60.0)
        assert claimed.state == "running"
    _collect_failed_connections()


def _collect_failed_connections() -> None:
    """Collect the failed connections' streams (see above) inside this test, not in a
    later one."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()


async def test_no_secret_in_an_error(redis_url: str) -> None:
    """R73: a failing write of a secret says which operation failed, never the value."""
    async with open_redis_store(redis_url, prefix="sec:") as store:
        # A wrong-type key makes the secret's HSET fail inside Redis.
        await store._client.set("sec:s:" + SESSION, "not a hash")
        with pytest.raises(StoreError) as caught:
            await store.put_secret(SESSION, "token", "s3cr3t-value")
        assert "put_secret" in str(caught.value)
        assert "s3cr3t" not in str(caught.value)


class _FlakyMarkers:
    """A store whose ``set_marker`` fails ``failures`` times (Redis down), then works."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.set_at: list[float] = []

    async def set_marker(self, key: str, *, expires_at: float) -> None:
        if self.failures:
            self.failures -= 1
            raise StoreUnavailable("redis store unavailable (set_marker): ConnectionError")
        self.set_at.append(trio.current_time())


async def test_a_failing_marker_refresh_is_retried_not_fatal(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R51, issue 21: while the store refuses refreshes the task's marker loop keeps
    going (retrying every `MARKER_RETRY_S`) instead of ending the task; once the store
    answers, refreshes are back on the 55 s beat."""
    store = _FlakyMarkers(failures=2)
    with trio.move_on_after(MARKER_REFRESH_S + 2 * MARKER_RETRY_S + MARKER_REFRESH_S + 1):
        await keep_marker_alive(store, SESSION, TASK, clock=trio.current_time)  # type: ignore[arg-type]
    first = MARKER_REFRESH_S + 2 * MARKER_RETRY_S
    assert store.set_at == [first, first + MARKER_REFRESH_S]


async def test_maintain_purges_expired_markers_from_the_index(redis_url: str) -> None:
    """R51, R81: markers nobody deleted (their daemon died) leave the markers index
    within one upkeep pass, so it stays bounded; live ones stay."""
    async with open_redis_store(redis_url, prefix="gc:") as store:
        now = time.time()
        await store.set_marker("action:dead", expires_at=now - 1)
        await store.set_marker("action:live", expires_at=now + 60)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(partial(store.maintain, interval_s=0.01))
            with trio.fail_after(10):
                while await store._client.zcard("gc:markers") != 1:
                    await trio.sleep(0.01)
            nursery.cancel_scope.cancel()
        assert await store.marker_alive("action:live", now=now) is True
