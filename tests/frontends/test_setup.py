"""R82: what a front-end's process reads before its bot runs: its table of config.toml
and its token (the environment, or an owner-only file in the home; never the TOML)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from agentrio.frontends.setup import SetupError, load_table, read_token, store_token
from agentrio.protocol.frontends import DiscordConfig, TelegramConfig


@pytest.mark.parametrize("name", ["telegram", "discord"])
def test_token_from_env_or_owner_only_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """R82: ``$AGENTRIO_<NAME>_TOKEN`` wins; else ``<home>/<name>.token``, refused when
    others may read it; no token at all says how to give one."""
    variable = f"AGENTRIO_{name.upper()}_TOKEN"
    monkeypatch.delenv(variable, raising=False)
    with pytest.raises(SetupError, match=f"agentrio {name} --store-token"):
        read_token(tmp_path, name)
    stored = "123456:" + "A" * 35 if name == "telegram" else "a" * 24 + ".bcdefg." + "h" * 27
    path = store_token(tmp_path, name, f"  {stored}\n")
    assert path == tmp_path / f"{name}.token"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert read_token(tmp_path, name) == stored
    monkeypatch.setenv(variable, "env-token")
    assert read_token(tmp_path, name) == "env-token"
    monkeypatch.delenv(variable)
    path.chmod(0o644)
    with pytest.raises(SetupError, match="readable by others"):
        read_token(tmp_path, name)


def test_tables_are_read_and_a_token_key_refused(tmp_path: Path) -> None:
    """R82: each front-end reads its own table; a ``token`` key there is refused."""
    assert load_table(tmp_path, "discord", DiscordConfig) == DiscordConfig()
    (tmp_path / "config.toml").write_text(
        "[discord]\nallowed_users = [5]\n[telegram]\nallow_groups = true\n"
    )
    assert load_table(tmp_path, "discord", DiscordConfig).allowed_users == [5]
    assert load_table(tmp_path, "telegram", TelegramConfig).allow_groups is True
    (tmp_path / "config.toml").write_text('[discord]\ntoken = "x"\n')
    with pytest.raises(SetupError, match=r"discord\.token: the bot token is never read"):
        load_table(tmp_path, "discord", DiscordConfig)


def test_discord_process_stores_a_token_and_exits_2_without_one(tmp_path: Path) -> None:
    """R82: ``python -m agentrio.frontends.discord --store-token`` stores stdin's line;
    without any token the process exits 2 (a setup error: the daemon does not restart
    it) and says what to do."""
    env = {k: v for k, v in os.environ.items() if k != "AGENTRIO_DISCORD_TOKEN"}
    module = [sys.executable, "-m", "agentrio.frontends.discord", "--home", str(tmp_path)]
    missing = subprocess.run(module, env=env, capture_output=True, text=True, timeout=60)
    assert missing.returncode == 2
    assert "AGENTRIO_DISCORD_TOKEN" in missing.stderr
    token = "a" * 24 + ".bcdefg." + "h" * 27
    stored = subprocess.run(
        [*module, "--store-token"], env=env, input=f"{token}\n", capture_output=True, text=True
    )
    assert stored.returncode == 0
    assert (tmp_path / "discord.token").read_text() == f"{token}\n"
    assert stat.S_IMODE((tmp_path / "discord.token").stat().st_mode) == 0o600
