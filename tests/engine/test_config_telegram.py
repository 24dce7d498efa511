"""R82: ``[telegram]`` in config.toml: validated at start; the token is never read
from the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentrio.engine.config import Config, TelegramConfig, load_config
from agentrio.engine.errors import ConfigError


def test_telegram_defaults(tmp_path: Path) -> None:
    assert load_config(tmp_path).telegram == TelegramConfig()
    assert Config().telegram.enabled is False


def test_telegram_table_is_read(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text(
        "[telegram]\nenabled = true\nallowed_users = [12, 34]\nallow_groups = true\n"
    )
    telegram = load_config(tmp_path).telegram
    assert telegram.enabled is True
    assert telegram.allowed_users == [12, 34]
    assert telegram.allow_groups is True


def test_a_token_key_is_refused_with_a_clear_line(tmp_path: Path) -> None:
    """R82: a token in the TOML file stops the daemon with one line saying where the
    token goes instead."""
    (tmp_path / "config.toml").write_text('[telegram]\nenabled = true\ntoken = "123:ABC"\n')
    with pytest.raises(ConfigError) as raised:
        load_config(tmp_path)
    message = str(raised.value)
    assert "config.toml:3: telegram.token" in message
    assert "AGENTRIO_TELEGRAM_TOKEN" in message
    assert "123:ABC" not in message


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('allowed_users = ["me"]', "expected an integer"),
        ('enabled = "yes"', "expected a boolean"),
        ('api_base_url = "ftp://x"', "telegram"),
        ("colour = 1", "unknown key"),
    ],
)
def test_bad_telegram_values_are_refused(tmp_path: Path, text: str, problem: str) -> None:
    (tmp_path / "config.toml").write_text(f"[telegram]\n{text}\n")
    with pytest.raises(ConfigError, match=problem):
        load_config(tmp_path)
