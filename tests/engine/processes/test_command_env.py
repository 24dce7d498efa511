"""The environment of an approved command (issue 29 finding 9): the daemon's
credentials never pass, the rest follows ``[tools] command_env``."""

from __future__ import annotations

import attrs

from agentrio.engine.config import Config, ModelConfig, ToolsConfig
from agentrio.engine.processes.command_env import command_environment

KEY = "sk-model-key-0123456789"
DAEMON = {
    "PATH": "/usr/bin:/bin",
    "HOME": "/home/me",
    "LC_ALL": "C.UTF-8",
    "AGENTRIO_HOME": "/home/me/.config/agentrio",
    "AGENTRIO_OWNER": "/home/me/.config/agentrio",
    "AGENTRIO_TELEGRAM_TOKEN": "123:telegram-token",
    "AGENTRIO_DISCORD_TOKEN": "discord-token-value",
    "AGENTRIO_ANYTHING": "agentrio-secret-value",
    "ACME_LLM": KEY,
    "COPY": KEY,
    "github_token": "ghp-lowercase-name",
    "AWS_SECRET_ACCESS_KEY": "aws-secret",
    "PGPASSWORD": "pg-password",
    "CC": "gcc",
}


def _config(**tools: object) -> Config:
    return Config(
        model=ModelConfig(api_key_env="ACME_LLM"),
        decision_model=ModelConfig(api_key_env="DECIDER_KEY"),
        tools=attrs.evolve(ToolsConfig(), **tools),
    )


def test_inherit_passes_all_but_credentials() -> None:
    """Finding 9: the model key (also under another name), bot tokens, AGENTRIO_*
    secrets and credential-looking names are withheld; the rest passes."""
    env = command_environment(_config(), {**DAEMON, "DECIDER_KEY": "decider-key-value"})
    assert env == {
        "PATH": "/usr/bin:/bin",
        "HOME": "/home/me",
        "LC_ALL": "C.UTF-8",
        "AGENTRIO_HOME": "/home/me/.config/agentrio",
        "AGENTRIO_OWNER": "/home/me/.config/agentrio",
        "CC": "gcc",
    }


def test_the_daemons_credentials_never_pass_even_with_nothing_withheld() -> None:
    """Finding 9: emptying env_withhold passes ordinary secrets, never the daemon's."""
    env = command_environment(_config(env_withhold=[]), DAEMON)
    assert "github_token" in env
    assert "PGPASSWORD" in env
    for name in ("ACME_LLM", "COPY", "AGENTRIO_TELEGRAM_TOKEN", "AGENTRIO_DISCORD_TOKEN"):
        assert name not in env
    assert "AGENTRIO_ANYTHING" not in env


def test_minimal_passes_only_the_kept_names() -> None:
    """Finding 9: command_env = "minimal" keeps env_keep's globs (LC_*) and no more."""
    env = command_environment(_config(command_env="minimal"), DAEMON)
    assert sorted(env) == ["AGENTRIO_HOME", "AGENTRIO_OWNER", "HOME", "LC_ALL", "PATH"]
