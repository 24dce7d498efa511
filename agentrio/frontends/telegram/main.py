"""``agentrio telegram``: the Telegram front-end as a process of its own.

python-telegram-bot runs on asyncio; the chat core and agentrio's Trio client run as a
Trio guest on the same thread (`agentrio.guest.run_with_guest`). The daemon starts this
process when ``[telegram] enabled`` (`engine.frontends_supervisor`); people may run it
by hand too. It reads ``[telegram]`` from ``<home>/config.toml`` and the bot token
from ``$AGENTRIO_TELEGRAM_TOKEN`` or ``<home>/telegram.token`` (0600), never from the
TOML file. SIGTERM or SIGINT stop it cleanly.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
import tomllib
from pathlib import Path

import cattrs

from protocol.codec import format_problem, install_strict_hooks
from protocol.frontends import (
    TELEGRAM_TOKEN_ENV,
    TELEGRAM_TOKEN_FILE,
    TOKEN_KEY_REFUSED,
    TelegramConfig,
)

__all__ = ["SetupError", "load_telegram_config", "main", "read_token", "store_token"]

log = logging.getLogger("agentrio.frontends.telegram")

_converter = cattrs.Converter(forbid_extra_keys=True)
install_strict_hooks(_converter)


class SetupError(Exception):
    """The front-end cannot start: the message says why and what to do."""


def load_telegram_config(home: Path) -> TelegramConfig:
    """``[telegram]`` of ``<home>/config.toml`` (defaults when absent)."""
    path = home / "config.toml"
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return TelegramConfig()
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise SetupError(f"{path}: {exc}") from None
    table = data.get("telegram", {})
    if not isinstance(table, dict):
        raise SetupError(f"{path}: telegram: expected a table")
    if "token" in table:
        raise SetupError(f"{path}: telegram.token: {TOKEN_KEY_REFUSED}")
    try:
        return _converter.structure(table, TelegramConfig)
    except Exception as exc:  # cattrs raises several kinds; all mean "bad table"
        messages = cattrs.transform_error(exc, path="telegram", format_exception=format_problem)
        raise SetupError(f"{path}: {messages[0] if messages else exc}") from None


def read_token(home: Path) -> str:
    """The bot token: ``$AGENTRIO_TELEGRAM_TOKEN``, else ``<home>/telegram.token``
    (which must be owner-only)."""
    token = os.environ.get(TELEGRAM_TOKEN_ENV, "").strip()
    if token:
        return token
    path = home / TELEGRAM_TOKEN_FILE
    try:
        mode = path.stat().st_mode
        token = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        raise SetupError(
            f"no bot token: set ${TELEGRAM_TOKEN_ENV} or run `agentrio telegram --store-token`"
        ) from None
    except OSError as exc:
        raise SetupError(f"{path}: cannot read ({exc.strerror})") from None
    if mode & 0o077:
        raise SetupError(f"{path} is readable by others: chmod 600 {path}")
    if not token:
        raise SetupError(f"{path} is empty")
    return token


def store_token(home: Path, token: str) -> Path:
    """Write ``token`` to ``<home>/telegram.token`` (0600, atomically)."""
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = home / TELEGRAM_TOKEN_FILE
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(token.strip() + "\n")
    os.replace(tmp, path)
    return path


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agentrio telegram",
        description="Run the Telegram front-end (docs/frontends.md).",
    )
    parser.add_argument("--home", metavar="DIR", help="agentrio home")
    parser.add_argument(
        "--store-token",
        action="store_true",
        help="read the bot token from stdin, store it in <home>/telegram.token (0600), exit",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    home = Path(args.home).expanduser() if args.home else _default_home()
    if args.store_token:
        path = store_token(home, sys.stdin.readline())
        print(f"stored the bot token in {path}")
        return 0
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    logging.getLogger("httpx").setLevel(logging.WARNING)  # its lines name the token
    try:
        config = load_telegram_config(home)
        token = read_token(home)
    except SetupError as exc:
        print(f"agentrio telegram: {exc}", file=sys.stderr)
        return 2
    if not config.allowed_users:
        log.warning("[telegram] allowed_users is empty: the bot refuses everyone")
    os.environ.setdefault("PTB_TIMEDELTA", "1")
    from agentrio.frontends.telegram.run import run_bot

    try:
        asyncio.run(run_bot(home, config, token))
    except SetupError as exc:
        print(f"agentrio telegram: {exc}", file=sys.stderr)
        return 2
    return 0


def _default_home() -> Path:
    from agentrio.home import default_home

    return default_home()
