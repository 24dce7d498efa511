"""engine/config.py: defaults, round-trip through tomli-w, one-line errors."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest

from agentrio.engine.config import (
    Config,
    SentinelTarget,
    ServerConfig,
    StoreConfig,
    load_config,
    parse_sentinel_url,
    save_config,
)
from agentrio.engine.errors import ConfigError


def test_missing_file_gives_defaults(tmp_path: Path) -> None:
    config = load_config(tmp_path)
    assert config == Config(home=str(tmp_path))
    assert config.server.host == "127.0.0.1"
    assert config.server.port == 17990


def test_save_then_load_round_trips(tmp_path: Path) -> None:
    config = attrs.evolve(
        Config(home=str(tmp_path)), server=ServerConfig(port=1234, allowed_origins=["http://x"])
    )
    save_config(config)
    assert load_config(tmp_path) == config


def test_home_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTRIO_HOME", str(tmp_path))
    (tmp_path / "config.toml").write_text("max_turns = 7\n")
    assert load_config().max_turns == 7
    assert load_config().home_path == tmp_path


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '[server]\nhost = "x"\nport = "80"\n',
            "config.toml:3: server.port: expected an integer, got a string",
        ),
        ("[tools]\n\nbogus = 1\n", "config.toml:3: tools.bogus: unknown key"),
        ('[model]\nprovider = "gpt"\n', "config.toml:2: model.provider: must be one of"),
        ("[server\n", "config.toml:1: syntax: Expected ']'"),
        ("[server]\nprot = 1\n", "config.toml:2: server.prot: unknown key (did you mean port?)"),
    ],
)
def test_invalid_file_names_key_and_line(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "config.toml").write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '[store]\nbackend = "redis"\n',
            'config.toml:2: store.url: required when store.backend is "redis"',
        ),
        (
            '[store]\nbackend = "mysql"\n',
            "config.toml:2: store.backend: must be one of 'sqlite', 'redis'",
        ),
        (
            '[store]\nbackend = "redis"\nurl = "http://h"\n',
            "config.toml:3: store.url: expected a URL starting with redis://, rediss://, "
            "unix://, redis+sentinel://",
        ),
        (
            '[store]\nbackend = "redis"\nurl = "redis+sentinel://:pw@h1/svc"\n',
            "config.toml:3: store.url: expected host:port[,host:port…] of the Sentinels",
        ),
        (
            '[store]\nbackend = "redis"\nurl = "redis+sentinel://h1:26379"\n',
            "config.toml:3: store.url: expected the monitored service's name after the Sentinels",
        ),
        (
            '[store]\nurl = "redis://h"\nprefix = ""\n',
            "config.toml:3: store.prefix: must not be empty",
        ),
    ],
)
def test_store_section_errors_are_one_line(tmp_path: Path, text: str, message: str) -> None:
    """R83 (issue 21): a wrong ``[store]`` stops the start with one line naming the key
    and its line."""
    (tmp_path / "config.toml").write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path)
    assert str(caught.value).endswith(message)
    assert "\n" not in str(caught.value)


def test_store_section_defaults_and_redis(tmp_path: Path) -> None:
    """R83: SQLite is the default; ``backend = "redis"`` with a URL and a prefix loads."""
    assert load_config(tmp_path).store == StoreConfig()
    assert StoreConfig().backend == "sqlite"
    (tmp_path / "config.toml").write_text(
        '[store]\nbackend = "redis"\nurl = "rediss://:pw@h:6380/1"\nprefix = "team-a:"\n'
    )
    assert load_config(tmp_path).store == StoreConfig(
        backend="redis", url="rediss://:pw@h:6380/1", prefix="team-a:"
    )


def test_sentinel_urls_are_read() -> None:
    """R83: a ``redis+sentinel://`` URL names the Sentinels, the service, its password
    (never in the value's repr) and its database."""
    target = parse_sentinel_url("redis+sentinel://:s3cret@h1:26379,h2:26380/main/2")
    assert target == SentinelTarget(
        sentinels=[("h1", 26379), ("h2", 26380)], service="main", password="s3cret", db=2
    )
    assert "s3cret" not in repr(target)
    assert parse_sentinel_url("redis+sentinel://127.0.0.1:1/m").db == 0
