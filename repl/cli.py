"""``agentrio``: open the REPL (default), or run one of `COMMANDS` (``agentrio status``,
``agentrio daemon …``, ``agentrio doctor``, …).

Each command is its own module's ``main``, imported only when that command runs: the
REPL itself speaks only the protocol and must start without importing the engine, and
the REPL's modules (prompt_toolkit, the Trio client, httpx) are imported only once
`main` knows it opens the REPL, so ``agentrio daemon`` and ``agentrio --help`` do not
pay for them (cold start, bench B7). The top-level parser (`build_parser`) knows every
command by name and one line of help, which is what ``--help`` lists; each command's
own parser has its options (``agentrio status --help``), and `agentrio.repl.completion` walks
them all for the shell completion scripts.

A word that is no command gets the closest one (``agentrio stauts``: did you mean
``status``?), exit 2. ``--home DIR`` given before a command is handed to the command.
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Final, NoReturn

__all__ = [
    "COMMANDS",
    "SESSION_ID",
    "add_home_option",
    "add_session_option",
    "build_parser",
    "main",
    "version",
]

#: What ``--session ID`` accepts: a ``cli-`` session id.
SESSION_ID: Final = re.compile(r"cli-[A-Za-z0-9_-]{1,124}")

#: ``name: (one line of help, "module:function")``: the function takes the arguments
#: from the command's name on (``["status", "--json"]``) and returns the exit status.
COMMANDS: Final = {
    "daemon": (
        "run the daemon in the foreground (agentrio daemon --help)",
        "agentrio.engine.cli:main",
    ),
    "status": (
        "whether the home's daemon runs: address, pid, tasks, sandbox",
        "agentrio.repl.control:main",
    ),
    "stop": ("stop the home's daemon; running tasks stay resumable", "agentrio.repl.control:main"),
    "start": ("start a detached daemon for the home", "agentrio.repl.control:main"),
    "doctor": (
        "check the sandbox, store, model, bots, MCP servers and ports, with what to do",
        "agentrio.engine.cli:main",
    ),
    "logs": (
        "print the daemon's log (<home>/daemon.log); -f follows it",
        "agentrio.repl.logs:main",
    ),
    "exec": (
        "run one task without the REPL: its text to stdout, an exit code for its ending",
        "agentrio.repl.exec_run:main",
    ),
    "completion": (
        "print a bash or zsh completion script",
        "agentrio.repl.completion:main",
    ),
    "telegram": (
        "run the Telegram front-end by hand (docs/frontends.md)",
        "agentrio.repl.cli:_frontend",
    ),
    "discord": (
        "run the Discord front-end by hand (docs/frontends.md)",
        "agentrio.repl.cli:_frontend",
    ),
}


def version() -> str:
    """The installed agentrio's version (``0+unknown`` from a bare checkout)."""
    import importlib.metadata

    try:
        return importlib.metadata.version("agentrio")
    except importlib.metadata.PackageNotFoundError:
        return "0+unknown"


class _Version(argparse.Action):
    """``--version``: the version is read (importlib.metadata) only when asked for, not
    on every start of the REPL (cold start, B7)."""

    def __init__(self, option_strings: list[str], dest: str, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser: argparse.ArgumentParser, *args: object) -> None:
        print(f"agentrio {version()}")
        parser.exit()


class _Parser(argparse.ArgumentParser):
    """An unknown command gets the closest one in its error (issue 30)."""

    def error(self, message: str) -> NoReturn:
        said = re.search(r"invalid choice: '([^']*)'", message)
        if said:
            message = unknown_command(said.group(1))
        super().error(message)


def unknown_command(word: str) -> str:
    import difflib  # only for a mistyped command (cold start, B7)

    close = difflib.get_close_matches(word, COMMANDS, n=1, cutoff=0.5)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"unknown command {word!r}{hint} (agentrio --help lists them)"


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="agentrio",
        description=(
            "Open the agentrio REPL. It connects to the daemon named in "
            "<home>/daemon.json and starts a detached one when none answers "
            "(its output goes to <home>/daemon.log). Type /help inside for commands. "
            "With a COMMAND, run that instead (agentrio COMMAND --help for its options)."
        ),
        epilog="Home: --home DIR, else $AGENTRIO_HOME, else ~/.config/agentrio.",
    )
    parser.add_argument("--version", action=_Version, help="print agentrio's version and exit")
    add_home_option(parser)
    add_session_option(parser)
    commands = parser.add_subparsers(dest="command", title="commands")
    for name, (line, _) in COMMANDS.items():
        commands.add_parser(name, help=line, add_help=False)
    return parser


def add_home_option(parser: argparse.ArgumentParser) -> None:
    """``--home DIR``, as every command of the REPL's side takes it."""
    parser.add_argument(
        "--home",
        metavar="DIR",
        help="agentrio home (default: $AGENTRIO_HOME or ~/.config/agentrio)",
    )


def add_session_option(parser: argparse.ArgumentParser) -> None:
    """``--session ID`` (checked against `SESSION_ID` by the caller)."""
    parser.add_argument(
        "--session", metavar="ID", help="continue session ID (cli-…) instead of a new one"
    )


def _split(argv: list[str]) -> tuple[list[str], str | None, list[str]]:
    """``(options before the command, the command word or None, what follows it)``."""
    index = 0
    while index < len(argv):
        word = argv[index]
        if word in ("--home", "--session"):
            index += 2
        elif word.startswith("-"):
            index += 1
        else:
            return argv[:index], word, argv[index + 1 :]
    return argv, None, []


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    before, command, after = _split(argv)
    if command is not None:
        if command not in COMMANDS:
            build_parser().error(f"invalid choice: {command!r}")
        if before:
            # Only --home DIR may come before a command; the command takes it too.
            given = _Parser(prog=f"agentrio … {command}", add_help=False)
            given.add_argument("--home", metavar="DIR")
            home = given.parse_args(before).home
            after = [*after, "--home", home] if home else after
        return _run_command(command, after)
    args = build_parser().parse_args(argv)
    if args.session and not SESSION_ID.fullmatch(args.session):
        print(f"agentrio: --session must look like cli-<letters, digits, _ or ->: {args.session!r}")
        return 2
    return _run_repl(args)


def _run_command(command: str, argv: list[str]) -> int:
    module, _, function = COMMANDS[command][1].partition(":")
    try:
        run: Callable[[list[str]], int | None] = getattr(importlib.import_module(module), function)
    except ImportError as exc:
        print(f"agentrio {command}: not available in this install: {exc}", file=sys.stderr)
        return 2
    return int(run([command, *argv]) or 0)


#: ``agentrio <name> …`` runs a chat front-end by hand (docs/frontends.md); the daemon
#: starts the enabled ones itself.
FRONTENDS: Final = {
    "telegram": "agentrio.frontends.telegram.main",
    "discord": "agentrio.frontends.discord.main",
}


def _frontend(argv: list[str]) -> int:
    frontend = importlib.import_module(FRONTENDS[argv[0]])
    return int(frontend.main(argv[1:]) or 0)


def _run_repl(args: argparse.Namespace) -> int:
    # The REPL's own modules, imported here and not at the top (module doc).
    import asyncio

    from agentrio.repl.app import ReplApp
    from agentrio.repl.bridge import FrameSink, run_with_trio
    from agentrio.repl.commands import new_session_id, new_window_hash
    from agentrio.repl.daemon import default_home, model_label
    from agentrio.repl.history_file import private_history
    from agentrio.repl.state import ReplState

    if args.home:
        # Set, not just used: a daemon this REPL starts must share the home.
        os.environ["AGENTRIO_HOME"] = str(Path(args.home).expanduser().resolve())
    home = default_home()
    session = args.session or new_session_id()
    home.mkdir(parents=True, exist_ok=True)
    sink = FrameSink()
    state = ReplState(
        session_id=session,
        window_hash=new_window_hash(),
        send=sink,
        model=model_label(home),
        home=str(home),
        workdir=os.path.realpath(os.getcwd()),  # where the person opened the REPL (R86)
        reopened=bool(args.session),  # its last exchanges are printed first
    )
    app = ReplApp(state, history=private_history(home / "repl_history"))
    asyncio.run(run_with_trio(app, sink, home=home))
    return 0
