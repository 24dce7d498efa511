"""The environment an approved command gets (issue 29, finding 9; docs/configuration.md).

A person approves a command, not the daemon's credentials: operators put model API keys
and bot tokens in the daemon's environment (docs/frontends.md), and whatever an approved
command runs (a build script, a package's install hook) could send them anywhere. So:

- **Never passed on**, whatever the configuration: the daemon's own credentials -- each
  model's ``api_key_env`` (``[model]``, ``[decision_model]``), the bot tokens
  (``AGENTRIO_TELEGRAM_TOKEN``, ``AGENTRIO_DISCORD_TOKEN``), every other ``AGENTRIO_*``
  variable except `KEPT_AGENTRIO` (the home, and the tag by which the daemon finds
  its orphaned processes, `agentrio.engine.processes.orphans`) -- and any variable whose value
  is one of those credentials under another name.
- **The rest** follows ``[tools] command_env``: ``"inherit"`` (the default) passes the
  daemon's environment minus every variable matching ``[tools] env_withhold`` (globs,
  case-insensitive: ``*_TOKEN``, ``*_API_KEY``, ``*PASSWORD*``, …); ``"minimal"``
  passes only the variables matching ``[tools] env_keep`` (``PATH``, ``HOME``, the
  locale, …), and still none of ``env_withhold``.

Unasked commands never see any of this: the sandbox gives them a fixed environment
(`agentrio.engine.processes.sandbox.sandbox_environment`).
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Mapping
from typing import Final

from agentrio.engine.config import Config
from agentrio.protocol.frontends import DISCORD_TOKEN_ENV, TELEGRAM_TOKEN_ENV

__all__ = ["KEPT_AGENTRIO", "MIN_SECRET_CHARS", "command_environment", "credential_names"]

KEPT_AGENTRIO: Final = frozenset({"AGENTRIO_HOME", "AGENTRIO_OWNER"})
"""``AGENTRIO_*`` variables that hold no secret and that commands keep."""
MIN_SECRET_CHARS: Final = 8
"""A credential's value shorter than this is not looked for under other names (it
would match too much by chance; no real key is that short)."""


def credential_names(config: Config, environ: Mapping[str, str]) -> set[str]:
    """The variables of ``environ`` that hold the daemon's own credentials."""
    names = {TELEGRAM_TOKEN_ENV, DISCORD_TOKEN_ENV, config.model.api_key_env}
    if config.decision_model is not None:
        names.add(config.decision_model.api_key_env)
    names.update(name for name in environ if name.startswith("AGENTRIO_"))
    return {name for name in names if name and name not in KEPT_AGENTRIO}


def _matches(name: str, patterns: list[str]) -> bool:
    upper = name.upper()
    return any(fnmatch.fnmatchcase(upper, pattern.upper()) for pattern in patterns)


def command_environment(config: Config, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The whole environment of an approved command, from ``environ`` (the daemon's
    by default); see the module docstring."""
    source = os.environ if environ is None else environ
    tools = config.tools
    credentials = credential_names(config, source)
    secret_values = {
        source[name] for name in credentials if len(source.get(name, "")) >= MIN_SECRET_CHARS
    }
    env: dict[str, str] = {}
    for name, value in source.items():
        if name in credentials or value in secret_values:
            continue
        if _matches(name, tools.env_withhold):
            continue
        if tools.command_env == "minimal" and not _matches(name, tools.env_keep):
            continue
        env[name] = value
    return env
