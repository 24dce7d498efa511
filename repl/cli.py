"""``agentrio``: open the REPL (default), run the daemon (``agentrio daemon …``), or see,
stop and start it (``agentrio status|stop|start``, `agentrio.repl.control`).

The daemon subcommand imports ``agentrio.engine.cli`` lazily, inside `main`: the REPL itself
speaks only the protocol and must start without importing the engine. The other way
round too: the REPL's modules (prompt_toolkit, the Trio client, httpx) are imported only
once `main` knows it opens the REPL, so ``agentrio daemon`` and ``agentrio --help`` do
not pay for them (cold start, bench B7).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

__all__ = ["build_parser", "main"]

_SESSION = re.compile(r"cli-[A-Za-z0-9_-]{1,124}")

#: ``agentrio <name> …`` runs a chat front-end by hand (docs/frontends.md); the daemon
#: starts the enabled ones itself. Imported only when asked for, like the daemon.
FRONTENDS = {
    "telegram": "agentrio.frontends.telegram.main",
    "discord": "agentrio.frontends.discord.main",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agentrio",
        description=(
            "Open the agentrio REPL. It connects to the daemon named in "
            "<home>/daemon.json and starts a detached one when none answers "
            "(its output goes to <home>/daemon.log). Type /help inside for commands."
        ),
        epilog=(
            "agentrio daemon [--port N] ...  runs the daemon in the foreground "
            "(see: agentrio daemon --help). agentrio status [--json] | stop [--force] | "
            "start  shows, stops or starts the home's daemon (see: agentrio status --help). "
            "agentrio telegram|discord [--home DIR] [--store-token]  runs a chat "
            "front-end by hand (docs/frontends.md). "
            "Home: $AGENTRIO_HOME or ~/.config/agentrio."
        ),
    )
    parser.add_argument(
        "--home",
        metavar="DIR",
        help="agentrio home (default: $AGENTRIO_HOME or ~/.config/agentrio)",
    )
    parser.add_argument(
        "--session", metavar="ID", help="continue session ID (cli-…) instead of a new one"
    )
    return parser


def _run_daemon(argv: list[str]) -> int:
    try:
        from agentrio.engine import cli as engine_cli  # type: ignore[attr-defined,unused-ignore]
    except ImportError as exc:
        print(f"agentrio: the daemon is not available: {exc}", file=sys.stderr)
        return 2
    code = engine_cli.main(argv)  # type: ignore[attr-defined,unused-ignore]
    return int(code or 0)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["daemon"]:
        return _run_daemon(argv)
    if argv and argv[0] in FRONTENDS:
        import importlib

        frontend = importlib.import_module(FRONTENDS[argv[0]])
        return int(frontend.main(argv[1:]) or 0)
    if argv[:1] in (["status"], ["stop"], ["start"]):
        from agentrio.repl import control

        return control.main(argv)
    args = build_parser().parse_args(argv)
    if args.session and not _SESSION.fullmatch(args.session):
        print(f"agentrio: --session must look like cli-<letters, digits, _ or ->: {args.session!r}")
        return 2
    return _run_repl(args)


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
    )
    app = ReplApp(state, history=private_history(home / "repl_history"))
    asyncio.run(run_with_trio(app, sink, home=home))
    return 0
