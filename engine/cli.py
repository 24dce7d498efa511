"""``agentrio daemon`` / ``python -m agentrio.engine daemon``: the daemon's command line, and
``agentrio doctor`` (`agentrio.engine.doctor`), which reads the same configuration.

`main` takes the arguments after the program name (``["daemon", "--port", "0"]``), so
the REPL's ``agentrio`` entry point can hand ``agentrio daemon …`` straight to it.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import attrs

from agentrio.engine.config import DEFAULT_PORT, default_home, load_config, locate_error
from agentrio.engine.errors import ConfigError
from agentrio.engine.extras import EXTRAS, missing_for, missing_message
from agentrio.engine.startup_gc import hold_collector, release_collector

__all__ = ["build_parser", "main"]


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"port must be 0-65535 (0 = any free port), got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agentrio",
        description="agentrio's daemon: runs agent tasks and serves the REPL and scripts.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    daemon = commands.add_parser(
        "daemon",
        help="run the daemon in the foreground",
        description=(
            "Run the agentrio daemon in the foreground: HTTP API and WebSocket (/v1/ws) on "
            "one port, bound to 127.0.0.1 unless told otherwise. Once it serves it writes "
            "<home>/daemon.json {pid, host, port, started_at, version}, which clients read "
            "to find it; every call but /v1/health needs the token in <home>/token "
            "(created 0600 at the first start). One daemon per home: a second one exits "
            "with status 1 and says which process holds the home; one that cannot start "
            "(home unwritable or read-only, disk full, corrupt store, port in use) prints one "
            "line naming the path or port and the fix, and exits 2. `agentrio stop` (POST "
            "/v1/shutdown), SIGINT or SIGTERM stops it: running tasks are cancelled with "
            "cause 'shutdown' and stay resumable, it leaves <home>/daemon.stopped (an open "
            "REPL then does not restart it), and it exits 0 within 5 seconds."
        ),
        epilog=(
            "Logs go to <home>/daemon.log and stderr. Home: --home, else $AGENTRIO_HOME, "
            "else ~/.config/agentrio. Other settings live in <home>/config.toml."
        ),
    )
    daemon.add_argument(
        "--port",
        type=_port,
        metavar="N",
        help=f"TCP port to listen on; 0 picks a free one (default: [server] port, {DEFAULT_PORT})",
    )
    daemon.add_argument(
        "--host",
        metavar="H",
        help=(
            "address to bind (default: [server] host, 127.0.0.1); binding anything but "
            "loopback exposes the daemon, token-protected, to the network"
        ),
    )
    daemon.add_argument(
        "--home",
        metavar="DIR",
        help="agentrio home (default: $AGENTRIO_HOME or ~/.config/agentrio)",
    )
    daemon.add_argument(
        "--cwd",
        metavar="DIR",
        help=(
            "working directory of a session nobody named one for: the web page, the "
            "bots, scripts without cwd (default: [agent] cwd, else the home's parent or $HOME)"
        ),
    )
    daemon.add_argument(
        "--free-port-if-taken",
        action="store_true",
        help=(
            "when the default port is held by another program (another home's daemon), "
            "listen on a free port instead of failing; daemon.json records it (the REPL "
            "starts its daemons so)"
        ),
    )
    doctor = commands.add_parser(
        "doctor",
        help="check the sandbox, store, model, bots, MCP servers and ports",
        description=(
            "Check what a daemon of this home needs, one line each with what to do: "
            "config.toml, the sandbox (bubblewrap), the store (SQLite or Redis), the model "
            "(reachable?), the chat bots (library, token, allowed users), MCP servers and "
            "the port. Exit status: 0 when nothing failed, 1 otherwise."
        ),
    )
    doctor.add_argument(
        "--home",
        metavar="DIR",
        help="agentrio home (default: $AGENTRIO_HOME or ~/.config/agentrio)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` (default ``sys.argv[1:]``) and run the command; returns the exit
    status. ``--help`` and usage errors exit through argparse (0 and 2)."""
    args = build_parser().parse_args(sys.argv[1:] if argv is None else list(argv))
    home: Path | None = None
    if args.home:
        home = Path(args.home).expanduser().resolve()
        # Set, not just passed: anything the daemon starts must share the home.
        os.environ["AGENTRIO_HOME"] = str(home)
    if args.command == "doctor":
        release_collector()  # held by ``python -m agentrio.engine`` for a daemon only
        from agentrio.engine.doctor import main as doctor

        return doctor(home)
    hold_collector()  # until the engine runs (`agentrio.engine.startup_gc`, bench B7)
    try:
        return _daemon(args, home)
    finally:
        release_collector()


def _daemon(args: argparse.Namespace, home: Path | None) -> int:
    """``agentrio daemon``: refuse an unsafe home or a bad config in one line (exit 2),
    else serve until stopped."""
    from agentrio.engine.server.lifecycle import run_daemon
    from agentrio.engine.server.ownership import refuse_unsafe_home

    # Before its config.toml is read: a planted home is refused, not parsed (issue 29).
    refused = refuse_unsafe_home(home or default_home())
    if refused is not None:
        return refused
    try:
        config = load_config(home)
    except ConfigError as exc:
        print(f"agentrio daemon: {exc}", file=sys.stderr)
        return 2
    if args.cwd:  # the session's default directory for this run (R86)
        where = str(Path(args.cwd).expanduser().resolve())
        config = attrs.evolve(config, agent=attrs.evolve(config.agent, cwd=where))
    missing = missing_for(config)
    if missing:
        key = EXTRAS[missing[0]].config_key
        line = locate_error(
            config.home_path / "config.toml", f"{key}: {missing_message(missing[0])}"
        )
        print(f"agentrio daemon: {line}", file=sys.stderr)
        return 2
    return run_daemon(
        config, host=args.host, port=args.port, free_port_if_taken=args.free_port_if_taken
    )
