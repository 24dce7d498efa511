"""What every chat front-end's process does before its bot runs: read its table of
``<home>/config.toml`` (``[telegram]``, ``[discord]``), read its bot token
(``$AGENTRIO_<NAME>_TOKEN`` or ``<home>/<name>.token``, owner-only; never the TOML file),
store a token (``--store-token``), parse its command line and set up its log.

A `SetupError` means the front-end cannot start as configured: its process exits 2 and
the daemon does not restart it (`agentrio.engine.frontends_supervisor`).
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import logging
import os
import re
import sys
import tomllib
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, Final, TypeVar

import cattrs

from agentrio.protocol.codec import format_problem, install_strict_hooks
from agentrio.protocol.frontends import token_key_refused

__all__ = [
    "BotRunner",
    "SetupError",
    "build_parser",
    "check_token_shape",
    "default_home",
    "load_table",
    "parse_args",
    "prompt_token",
    "read_token",
    "run_frontend",
    "setup_logging",
    "store_token",
]

C = TypeVar("C")

_converter = cattrs.Converter(forbid_extra_keys=True)
install_strict_hooks(_converter)


class SetupError(Exception):
    """The front-end cannot start: the message says why and what to do."""


def load_table(home: Path, name: str, cls: type[C]) -> C:
    """``[name]`` of ``<home>/config.toml`` as ``cls`` (its defaults when absent)."""
    path = home / "config.toml"
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return cls()
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise SetupError(f"{path}: {exc}") from None
    table = data.get(name, {})
    if not isinstance(table, dict):
        raise SetupError(f"{path}: {name}: expected a table")
    if "token" in table:
        raise SetupError(f"{path}: {name}.token: {token_key_refused(name)}")
    try:
        return _converter.structure(table, cls)
    except Exception as exc:  # cattrs raises several kinds; all mean "bad table"
        messages = cattrs.transform_error(exc, path=name, format_exception=format_problem)
        raise SetupError(f"{path}: {messages[0] if messages else exc}") from None


def read_token(home: Path, name: str) -> str:
    """The bot token: ``$AGENTRIO_<NAME>_TOKEN``, else ``<home>/<name>.token`` (which
    must be owner-only)."""
    variable = f"AGENTRIO_{name.upper()}_TOKEN"
    token = os.environ.get(variable, "").strip()
    if token:
        return token
    path = home / f"{name}.token"
    try:
        mode = path.stat().st_mode
        token = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        raise SetupError(
            f"no bot token: set ${variable} or run `agentrio {name} --store-token`"
        ) from None
    except OSError as exc:
        raise SetupError(f"{path}: cannot read ({exc.strerror})") from None
    if mode & 0o077:
        raise SetupError(f"{path} is readable by others: chmod 600 {path}")
    if not token:
        raise SetupError(f"{path} is empty")
    return token


#: What a bot token looks like, by front-end: Telegram's ``<bot id>:<secret>``
#: (BotFather's), Discord's three dot-separated base64url parts. Checked only when a
#: token is stored, so a line typed wrong (or empty) is refused before it is kept.
TOKEN_SHAPES: Final[dict[str, tuple[re.Pattern[str], str]]] = {
    "telegram": (
        re.compile(r"[0-9]{3,20}:[A-Za-z0-9_-]{30,}"),
        "digits, a colon and 30 or more letters, digits, - or _ (as BotFather gives it)",
    ),
    "discord": (
        re.compile(r"[A-Za-z0-9_-]{20,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{20,}"),
        "three parts of letters, digits, - or _ joined by dots (the Developer Portal's)",
    ),
}


def check_token_shape(name: str, token: str) -> str:
    """``token`` stripped, or `SetupError` when it does not look like a ``name`` bot
    token (the message never repeats what was typed: it may be a real secret)."""
    token = token.strip()
    if not token:
        raise SetupError("no token given: nothing stored")
    shape = TOKEN_SHAPES.get(name)
    if shape is not None and not shape[0].fullmatch(token):
        raise SetupError(f"that does not look like a {name} bot token ({shape[1]}): nothing stored")
    return token


def prompt_token(name: str, title: str) -> str:
    """The token to store: read hidden (``getpass``, with a prompt) on a terminal,
    else the first line of stdin (a pipe: ``… | agentrio telegram --store-token``)."""
    if sys.stdin.isatty():
        return getpass.getpass(f"{title} bot token (typing is hidden): ")
    return sys.stdin.readline()


def store_token(home: Path, name: str, token: str) -> Path:
    """Write ``token`` to ``<home>/<name>.token`` (0600, atomically), once it has the
    shape of a ``name`` token (`check_token_shape`)."""
    token = check_token_shape(name, token)
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = home / f"{name}.token"
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(token.strip() + "\n")
    os.replace(tmp, path)
    return path


def build_parser(name: str, title: str) -> argparse.ArgumentParser:
    """``agentrio <name>``'s parser (also walked by ``agentrio completion``)."""
    parser = argparse.ArgumentParser(
        prog=f"agentrio {name}",
        description=f"Run the {title} front-end (docs/frontends.md).",
    )
    parser.add_argument("--home", metavar="DIR", help="agentrio home")
    parser.add_argument(
        "--store-token",
        action="store_true",
        help=(
            f"read the bot token (hidden on a terminal, else stdin's first line), check "
            f"its shape, store it in <home>/{name}.token (0600), exit"
        ),
    )
    return parser


def parse_args(name: str, title: str, argv: list[str] | None) -> argparse.Namespace:
    """``--home DIR`` and ``--store-token``; ``home`` comes back resolved."""
    args = build_parser(name, title).parse_args(argv)
    args.home = Path(args.home).expanduser() if args.home else default_home()
    return args


def setup_logging() -> None:
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )


#: What a secret is replaced by wherever the front-end would write it.
REDACTED: Final = "[bot token]"


class _Redacting(logging.Formatter):
    """Formats as ``inner`` does, then replaces every secret in the whole text --
    message, arguments and traceback alike (a library's error quoting the token, a
    URL with the token in its path)."""

    def __init__(self, inner: logging.Formatter, secrets: tuple[str, ...]) -> None:
        super().__init__()
        self._inner = inner
        self._secrets = secrets

    def format(self, record: logging.LogRecord) -> str:
        return redact(self._inner.format(record), self._secrets)


def redact(text: str, secrets: tuple[str, ...]) -> str:
    for secret in secrets:
        text = text.replace(secret, REDACTED)
    return text


def redact_logs(*secrets: str) -> None:
    """From now on no log line of this process holds any of ``secrets`` (issue 33: a
    refused token was written whole to ``<home>/telegram.log``)."""
    kept = tuple(secret for secret in secrets if secret)
    for handler in logging.getLogger().handlers:
        handler.setFormatter(_Redacting(handler.formatter or logging.Formatter(), kept))


def default_home() -> Path:
    from agentrio.home import default_home as home

    return home()


#: A front-end's bot: ``run_bot(home, config, token)`` on asyncio until it is stopped.
BotRunner = Callable[[Path, C, str], Coroutine[Any, Any, None]]


def run_frontend(
    argv: list[str] | None,
    *,
    name: str,
    title: str,
    config_type: type[C],
    load_runner: Callable[[], BotRunner[C]],
) -> int:
    """The whole command line of a chat front-end (``agentrio <name>``): store a token
    and exit, or read the table and token, then run the bot that ``load_runner``
    returns (imported only now: the library is not loaded for ``--store-token`` or a
    setup error). A `SetupError` prints one line and exits 2."""
    args = parse_args(name, title, argv)
    home: Path = args.home
    if args.store_token:
        try:
            path = store_token(home, name, prompt_token(name, title))
        except SetupError as exc:
            print(f"agentrio {name}: {exc}", file=sys.stderr)
            return 2
        except (EOFError, KeyboardInterrupt):
            print(f"\nagentrio {name}: nothing stored", file=sys.stderr)
            return 2
        print(f"stored the bot token in {path}")
        return 0
    setup_logging()
    token = ""
    try:
        config = load_table(home, name, config_type)
        token = read_token(home, name)
        redact_logs(token)
        if not getattr(config, "allowed_users", True):
            logging.getLogger(f"agentrio.frontends.{name}").warning(
                "[%s] allowed_users is empty: the bot refuses everyone", name
            )
        asyncio.run(_loaded(name, load_runner)(home, config, token))
    except SetupError as exc:
        print(f"agentrio {name}: {redact(str(exc), (token,) if token else ())}", file=sys.stderr)
        return 2
    except Exception:
        # Not left to Python's own traceback print: that one would not be redacted.
        logging.getLogger(f"agentrio.frontends.{name}").exception("the %s front-end failed", name)
        return 1
    return 0


def _loaded(name: str, load_runner: Callable[[], BotRunner[C]]) -> BotRunner[C]:
    """The bot runner; a `SetupError` naming the extra when the platform's library is
    not installed (``pip install 'agentrio[<name>]'``, issue 30)."""
    try:
        return load_runner()
    except ModuleNotFoundError as exc:
        raise SetupError(
            f"{exc.name or 'its library'} is not installed: pip install 'agentrio[{name}]'"
            " (or `make run` in a checkout)"
        ) from None
