"""Fixtures shared by every test folder: the throwaway Redis server (issue 21)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.redis_server import RedisSentinel, RedisServer, require_redis_server


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A ``redis-server`` for the whole test session (stopped at its end)."""
    server = RedisServer(require_redis_server(), tmp_path_factory.mktemp("redis"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    """The URL of an empty Redis: the session's server, flushed before each test."""
    if not redis_server.ping():  # a test that stopped it and did not restart it
        redis_server.start()
    redis_server.flush()
    return redis_server.url


@pytest.fixture(scope="session")
def redis_sentinel(
    redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RedisSentinel]:
    """A Redis Sentinel monitoring the session's server (``redis+sentinel://`` URLs)."""
    sentinel = RedisSentinel(
        require_redis_server(), tmp_path_factory.mktemp("sentinel"), redis_server
    )
    sentinel.start()
    try:
        yield sentinel
    finally:
        sentinel.stop()
