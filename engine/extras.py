"""The optional parts of an install (``pip install 'agentrio[EXTRA]'``, issue 30) and the
one-line start-up error of a configuration that needs one that is missing.

A chat front-end's library, the Redis store's client and the watcher's fast path are
extras: most installs need none of them, and Hyperscan's wheel exists for x86-64 Linux
only. What is missing is found with `importlib.util.find_spec`, which locates a module
without importing it (coredis alone takes ~0.2 s to import: cold start, B7).
"""

from __future__ import annotations

import importlib.util
from typing import Final

import attrs

from agentrio.engine.config import Config

__all__ = ["EXTRAS", "Extra", "installed", "missing_for", "missing_message"]


@attrs.frozen(kw_only=True)
class Extra:
    """One extra: its name in ``agentrio[…]``, the module it provides, the distribution
    that module comes from, and what needs it."""

    name: str
    module: str
    distribution: str
    needed_by: str
    #: The key of config.toml that turns it on ("" for none).
    config_key: str = ""

    @property
    def install(self) -> str:
        return f"pip install 'agentrio[{self.name}]'"


EXTRAS: Final = {
    extra.name: extra
    for extra in (
        Extra(
            name="telegram",
            module="telegram",
            distribution="python-telegram-bot",
            needed_by="the Telegram front-end ([telegram] enabled = true)",
            config_key="telegram.enabled",
        ),
        Extra(
            name="discord",
            module="discord",
            distribution="discord.py",
            needed_by="the Discord front-end ([discord] enabled = true)",
            config_key="discord.enabled",
        ),
        Extra(
            name="redis",
            module="coredis",
            distribution="coredis",
            needed_by='the Redis store ([store] backend = "redis")',
            config_key="store.backend",
        ),
        Extra(
            name="fast",
            module="hyperscan",
            distribution="hyperscan",
            needed_by="the watcher's fast path (without it the plain path runs)",
        ),
    )
}


def installed(extra: str) -> bool:
    """Whether the module of ``extra`` can be imported (found, not imported)."""
    try:
        return importlib.util.find_spec(EXTRAS[extra].module) is not None
    except (ImportError, ValueError):
        return False


def missing_message(extra: str) -> str:
    """One line: what needs ``extra``, that it is missing, and the command to install it."""
    spec = EXTRAS[extra]
    return (
        f"{spec.needed_by} needs {spec.distribution}, which is not installed: "
        f"{spec.install} (or `make run` in a checkout)"
    )


def missing_for(config: Config) -> list[str]:
    """The extras ``config`` turns on that are not installed, in a stable order. The
    watcher's fast path is never required: the plain path runs without it."""
    wanted = [
        name
        for name, on in (
            ("telegram", config.telegram.enabled),
            ("discord", config.discord.enabled),
            ("redis", config.store.backend == "redis"),
        )
        if on
    ]
    return [name for name in wanted if not installed(name)]
