"""Finding the daemon, and starting a detached one when none answers (SPEC §11).

The daemon advertises itself in ``<home>/daemon.json`` ``{pid, host, port, …}`` while
it serves; ``GET /v1/health`` (no auth) says whether it really answers. A daemon this
REPL starts runs in its own session (``setsid``), so closing the terminal or the REPL
does not take it down, with stdout and stderr appended to ``<home>/daemon.log``.
"""

from __future__ import annotations

import os
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Final

import attrs
import trio

from agentrio import ClientError, DaemonNotFound, default_home
from agentrio.home import read_address
from agentrio.home import read_token as read_token_or_raise
from agentrio.transport import HttpApi
from repl.messages import Status

__all__ = [
    "HEALTH_TIMEOUT_S",
    "DaemonStartError",
    "Endpoint",
    "default_home",
    "ensure_daemon",
    "health_ok",
    "model_label",
    "read_endpoint",
    "read_token",
    "spawn_daemon",
]

#: How long a freshly started daemon has to answer ``/v1/health``.
HEALTH_TIMEOUT_S: Final = 10.0
#: How often a started daemon is looked for: each look is one small file read (and a
#: health call once ``daemon.json`` names it), and every poll period the REPL sleeps
#: past the daemon's readiness is added to its first connection (cold start, B7).
_POLL_S: Final = 0.025


class DaemonStartError(Exception):
    """No daemon answered and starting one did not help (or was not allowed yet); the
    message says which, and names the log."""


@attrs.frozen(kw_only=True)
class Endpoint:
    """Where a serving daemon listens, and the bearer token it wants."""

    host: str
    port: int
    token: str = ""

    @property
    def http_base(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://{self.host}:{self.port}/v1/ws"


def read_endpoint(home: Path) -> Endpoint | None:
    """The address in ``daemon.json``, or None when it is absent or unreadable
    (a daemon that is starting or has just stopped: the caller checks health anyway)."""
    try:
        host, port = read_address(home)
    except DaemonNotFound:
        return None
    return Endpoint(host=host, port=port)


def read_token(home: Path) -> str:
    """The bearer token (``<home>/token``); empty when the daemon has not made one yet."""
    try:
        return read_token_or_raise(home)
    except DaemonNotFound:
        return ""


def model_label(home: Path) -> str:
    """``provider`` or ``provider:name`` from ``[model]`` of ``config.toml``, for the
    toolbar; ``builtin`` (the default) when the file or key is missing or invalid."""
    try:
        with (home / "config.toml").open("rb") as f:
            model = tomllib.load(f).get("model", {})
    except (OSError, tomllib.TOMLDecodeError):
        return "builtin"
    provider = model.get("provider", "builtin") if isinstance(model, dict) else "builtin"
    name = model.get("name", "") if isinstance(model, dict) else ""
    return f"{provider}:{name}" if name else str(provider)


async def health_ok(http: HttpApi, endpoint: Endpoint) -> bool:
    """Whether ``GET /v1/health`` (no token) says ``ok`` within 2 s."""
    try:
        reply = await http.request("GET", endpoint.http_base + "/v1/health", timeout_s=2.0)
        return reply.status == 200 and reply.json().get("ok") is True
    except (ClientError, ValueError, AttributeError):
        return False


def spawn_daemon(home: Path, argv: list[str] | None = None) -> int:
    """Start ``python -m engine daemon`` detached (own session, stdin from /dev/null,
    output appended to ``<home>/daemon.log``); return its pid.

    `os.posix_spawn` rather than `subprocess.Popen`: a Popen object that is collected
    while its child still runs warns, and this child is meant to outlive us.
    """
    home.mkdir(parents=True, exist_ok=True)
    log = home / "daemon.log"
    argv = argv or [sys.executable, "-m", "engine", "daemon"]
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
    actions = [
        (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
        (os.POSIX_SPAWN_OPEN, 1, str(log), flags, 0o600),
        (os.POSIX_SPAWN_DUP2, 1, 2),
    ]
    return os.posix_spawn(argv[0], argv, dict(os.environ), file_actions=actions, setsid=True)


def _reaped(pid: int) -> bool:
    """True when our child ``pid`` has exited (and reap it, so it leaves no zombie)."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return done == pid


async def ensure_daemon(
    home: Path,
    http: HttpApi,
    *,
    status: Callable[[Status], None],
    start: bool = True,
    spawn: Callable[[Path], int] = spawn_daemon,
    exited: Callable[[int], bool] | None = None,
    wait_s: float = HEALTH_TIMEOUT_S,
) -> Endpoint:
    """The endpoint of a healthy daemon, starting one when none answers and ``start``.

    ``exited(pid)`` tells whether the started process has ended (default: reap our
    child without blocking).

    While waiting, ``daemon.json`` is re-read on every poll: if another REPL started a
    daemon at the same moment, ours loses the port and exits, and we use theirs.
    """
    endpoint = await trio.to_thread.run_sync(read_endpoint, home)
    if endpoint is not None and await health_ok(http, endpoint):
        return attrs.evolve(endpoint, token=await trio.to_thread.run_sync(read_token, home))
    log = home / "daemon.log"
    if not start:
        raise DaemonStartError("no daemon answers")
    has_exited = exited or _reaped
    pid = await trio.to_thread.run_sync(spawn, home)
    status(Status(text=f"no daemon answered; started one (pid {pid}), its log: {log}"))
    gone = False
    with trio.move_on_after(wait_s):
        while True:
            endpoint = await trio.to_thread.run_sync(read_endpoint, home)
            if endpoint is not None and await health_ok(http, endpoint):
                token = await trio.to_thread.run_sync(read_token, home)
                return attrs.evolve(endpoint, token=token)
            if gone:
                break
            gone = has_exited(pid)
            await trio.sleep(_POLL_S)
    why = "exited" if gone else f"did not answer within {wait_s:g} s"
    raise DaemonStartError(f"the daemon {why}; see its log: {log}")
