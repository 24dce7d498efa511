"""R82: ``[discord]`` in config.toml: validated at start; the token is never read from
the file; an enabled Discord front-end is one the daemon supervises."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from agentrio.engine.config import Config, DiscordConfig, load_config
from agentrio.engine.errors import ConfigError
from agentrio.engine.frontends_supervisor import enabled_frontends


def test_discord_defaults(tmp_path: Path) -> None:
    config = load_config(tmp_path).discord
    assert config == DiscordConfig()
    assert Config().discord.enabled is False
    assert config.api_base_url == "https://discord.com/api/v10"
    assert config.gateway_url == "wss://gateway.discord.gg/"


def test_discord_table_is_read(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text(
        "[discord]\nenabled = true\nallowed_users = [12, 34]\nallow_guilds = true\n"
        "allowed_channels = [99]\nallow_secrets_in_chat = true\n"
    )
    discord = load_config(tmp_path).discord
    assert discord.enabled is True
    assert discord.allowed_users == [12, 34]
    assert discord.allow_guilds is True
    assert discord.allowed_channels == [99]
    assert discord.allow_secrets_in_chat is True


def test_a_discord_token_key_is_refused_with_a_clear_line(tmp_path: Path) -> None:
    """R82: a token in the TOML file stops the daemon with one line saying where the
    token goes instead."""
    (tmp_path / "config.toml").write_text('[discord]\nenabled = true\ntoken = "MTA.secret"\n')
    with pytest.raises(ConfigError) as raised:
        load_config(tmp_path)
    message = str(raised.value)
    assert "config.toml:3: discord.token" in message
    assert "AGENTRIO_DISCORD_TOKEN" in message
    assert "agentrio discord --store-token" in message
    assert "MTA.secret" not in message


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('allowed_users = ["me"]', "expected an integer"),
        ('allowed_channels = ["general"]', "expected an integer"),
        ('allow_guilds = "yes"', "expected a boolean"),
        ('api_base_url = "ftp://x"', "discord"),
        ('gateway_url = "https://x"', "discord"),
        ("colour = 1", "unknown key"),
    ],
)
def test_bad_discord_values_are_refused(tmp_path: Path, text: str, problem: str) -> None:
    (tmp_path / "config.toml").write_text(f"[discord]\n{text}\n")
    with pytest.raises(ConfigError, match=problem):
        load_config(tmp_path)


def test_enabled_front_ends_are_supervised(tmp_path: Path) -> None:
    """R82: each enabled front-end is a child ``python -m agentrio.frontends.<name>``
    logged to ``<home>/<name>.log``."""
    (tmp_path / "config.toml").write_text("[discord]\nenabled = true\n")
    specs = enabled_frontends(load_config(tmp_path))
    assert [s.name for s in specs] == ["discord"]
    assert list(specs[0].argv) == [
        sys.executable,
        "-m",
        "agentrio.frontends.discord",
        "--home",
        str(tmp_path),
    ]
    assert specs[0].log_path == tmp_path / "discord.log"
    (tmp_path / "config.toml").write_text("[discord]\nenabled = true\n[telegram]\nenabled = true\n")
    assert [s.name for s in enabled_frontends(load_config(tmp_path))] == ["telegram", "discord"]
