"""``agentrio status``, ``agentrio stop``, ``agentrio start``: a home's daemon from the
command line (issue 19).

``status`` puts together what the home says (``daemon.json``, who holds the home's
lock, ``daemon.stopped``) and what the daemon says (``GET /v1/health``, and with the
token the resumable tasks of each origin). ``stop`` asks the daemon to stop over HTTP,
``POST /v1/shutdown``, and waits for its process to end. Why a request and not a
signal to the pid in ``daemon.json``: the request is authenticated by the home's token
like every other call, it reaches exactly the process serving that address (a
``daemon.json`` left by a crash names a pid that may belong to another program by now),
it says why the daemon stops (the note that keeps an open REPL from restarting it),
and its answer says what the stop ends. A signal is sent only by ``--force``, and only
to the pid holding the home's ``flock`` (read in ``/proc/locks``): the one process that
is this home's daemon by definition.

Everything is asked over the daemon's Unix socket ``<home>/daemon.sock`` when
``daemon.json`` names one (issue 29 finding 3): a process that took the TCP port of a
killed daemon is never asked, never sent the token, and never makes a dead daemon look
"running". A daemon of an earlier release (no socket) is asked for its health over
TCP but never sent the token: its pending tasks show as unknown, and ``stop`` sends
SIGTERM to the process holding the home's lock instead of ``POST /v1/shutdown``.

Exit statuses: ``status`` 0 running, 1 there but not answering (starting or stuck), 3
not running; ``stop`` 0 when no daemon runs at the end (stopped now, or none ran), 1
when it still runs; ``start`` 0 when one answers, 1 when it could not be started.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any, Final, Literal

import attrs
import trio

from agentrio import ClientError, DaemonNotFound
from agentrio.connecting import LOCAL_URL
from agentrio.home import read_socket
from agentrio.protocol.codec import decode
from agentrio.protocol.errors import FrameDecodeError
from agentrio.protocol.http import ShutdownAccepted
from agentrio.protocol.wording import plural
from agentrio.repl.client import no_trust_roots
from agentrio.repl.daemon import (
    STOPPED_FILE,
    DaemonStartError,
    StopNote,
    default_home,
    ensure_daemon,
    home_lock_holder,
    process_state,
    read_daemon_info,
    read_stopped,
    read_token,
)
from agentrio.repl.parts_view import frontend_lines, mcp_status_lines, store_line
from agentrio.transport import HttpApi, HttpReply, open_http

__all__ = [
    "COMMANDS",
    "EXIT_FAILED",
    "EXIT_NOT_RUNNING",
    "STOP_WAIT_S",
    "Probe",
    "build_parser",
    "main",
    "probe",
]

COMMANDS: Final = ("status", "stop", "start")
EXIT_FAILED: Final = 1
EXIT_NOT_RUNNING: Final = 3
#: How long ``stop`` waits for the daemon's process to end (R53 promises 5 s).
STOP_WAIT_S: Final = 15.0
#: After SIGKILL, how long ``stop --force`` waits for the process to go.
_KILL_WAIT_S: Final = 5.0
_POLL_S: Final = 0.05
#: Origins whose resumable tasks ``status`` counts (``agentrio.engine.ids.ORIGINS``).
_ORIGINS: Final = ("cli-", "chat-", "tg-", "dc-")
#: What ``agentrio stop`` tells the daemon; the REPL shows it.
STOP_REASON: Final = "agentrio stop"

State = Literal["running", "not answering", "starting", "not running"]


@attrs.frozen(kw_only=True)
class Probe:
    """What is known of a home's daemon. ``holder`` is the pid holding the home's lock
    (None: nobody, or ``/proc/locks`` is unreadable); ``stale`` is set when
    ``daemon.json`` names a daemon that no longer runs."""

    home: Path
    state: State
    info: dict[str, Any] | None
    holder: int | None
    health: dict[str, Any] | None
    stopped: StopNote | None
    #: The Unix socket address the daemon is asked at (None: TCP only, no token).
    socket: str | None = None

    @property
    def url(self) -> str:
        info = self.info or {}
        return f"http://{info.get('host')}:{info.get('port')}"

    @property
    def pid(self) -> int | None:
        pid = (self.info or {}).get("pid")
        return pid if isinstance(pid, int) and not isinstance(pid, bool) else self.holder

    @property
    def stale(self) -> bool:
        return self.state == "not running" and self.info is not None


def _socket_of(home: Path) -> str | None:
    try:
        return read_socket(home)
    except DaemonNotFound:
        return None


async def _ask(
    found: Probe | str | None,
    http: HttpApi,
    method: str,
    path: str,
    *,
    base: str = "",
    **options: Any,
) -> HttpReply:
    """One request to the daemon: over its Unix socket when it has one (``found`` is a
    `Probe` or a socket address), else over TCP at ``base`` with ``http``."""
    address = found.socket if isinstance(found, Probe) else found
    if address is None:
        return await http.request(method, base + path, **options)
    async with open_http(LOCAL_URL, unix_socket=address) as local:
        return await local.request(method, path, **options)


async def probe(home: Path, http: HttpApi) -> Probe:
    """Read the home, then ask the daemon ``daemon.json`` names for its health (over
    its Unix socket when it names one). "running" needs the answer *and* a live
    daemon: over TCP (no socket) only while some process holds the home's lock (a
    listener on a freed port is not the daemon)."""
    info = await trio.to_thread.run_sync(read_daemon_info, home)
    holder = await trio.to_thread.run_sync(home_lock_holder, home)
    stopped = await trio.to_thread.run_sync(read_stopped, home)
    socket = await trio.to_thread.run_sync(_socket_of, home)
    health: dict[str, Any] | None = None
    if info is not None and "host" in info and "port" in info:
        base = f"http://{info['host']}:{info['port']}"
        try:
            reply = await _ask(socket, http, "GET", "/v1/health", base=base, timeout_s=2.0)
            body = reply.json() if reply.status == 200 else None
            health = body if isinstance(body, dict) and body.get("ok") is True else None
        except (ClientError, ValueError):
            health = None
        if socket is None and holder is None and _locks_readable():
            health = None  # not the daemon: none holds the home
    state: State
    if health is not None:
        state = "running"
    elif holder is not None:
        state = "not answering" if info is not None else "starting"
    else:
        state = "not running"
    return Probe(
        home=home,
        state=state,
        info=info,
        holder=holder,
        health=health,
        stopped=stopped,
        socket=socket,
    )


def _locks_readable() -> bool:
    return os.access("/proc/locks", os.R_OK)


# ---------------------------------------------------------------------- status


async def _pending(found: Probe, http: HttpApi) -> dict[str, int] | None:
    """Resumable tasks per origin (authenticated, so over the Unix socket only), or
    None when the token is refused, the daemon stops answering or has no socket."""
    if found.socket is None:
        return None
    token = await trio.to_thread.run_sync(read_token, found.home)
    counts: dict[str, int] = {}
    for origin in _ORIGINS:
        try:
            reply = await _ask(
                found, http, "GET", "/v1/pending", params={"origin": origin}, token=token
            )
            tasks = reply.json().get("tasks") if reply.status == 200 else None
        except (ClientError, ValueError, AttributeError):
            return None
        if not isinstance(tasks, list):
            return None
        counts[origin] = len(tasks)
    return counts


def _ago(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes:02d} min"
    return f"{hours // 24} days"


def _absent_line(found: Probe) -> str:
    """One line for a home whose daemon does not answer."""
    home = found.home
    if found.state == "starting":
        return f"an agentrio daemon (pid {found.holder}) is starting for {home}"
    if found.state == "not answering":
        return (
            f"the agentrio daemon of {home} (pid {found.holder}) does not answer at "
            f"{found.url}; see {home / 'daemon.log'}"
        )
    line = f"no agentrio daemon runs for {home}"
    if found.stopped is not None:
        ago = _ago(time.time() - found.stopped.at)
        line += f" (pid {found.stopped.pid} was stopped {ago} ago: {found.stopped.reason})"
    if found.stale:
        line += f"; its daemon.json is stale (pid {found.pid} is not running)"
    return line


def _status_json(found: Probe, pending: dict[str, int] | None) -> dict[str, Any]:
    health = found.health or {}
    statistics = health.get("statistics") or {}
    stopped = attrs.asdict(found.stopped) if found.stopped is not None else None
    result: dict[str, Any] = {
        "state": found.state,
        "running": found.state == "running",
        "home": str(found.home),
        "pid": found.pid if found.state != "not running" else None,
        "stale_daemon_json": found.stale,
        "stopped": stopped,
    }
    if found.state != "running":
        return result
    return result | {
        "address": found.url,
        "version": health.get("version"),
        "uptime_s": health.get("uptime_s"),
        "sandbox": health.get("sandbox"),
        "store": health.get("store"),
        "frontends": health.get("frontends") or [],
        "mcp": health.get("mcp") or [],
        "tasks_running": statistics.get("tasks_running", health.get("tasks")),
        "tasks_queued": statistics.get("tasks_queued", 0),
        "legs": health.get("legs"),
        "pending": None if pending is None else {"total": sum(pending.values()), **pending},
        "connections": statistics.get("connections"),
        "event_streams": statistics.get("event_streams"),
        "sessions": statistics.get("sessions"),
        "asks": statistics.get("asks"),
    }


def _status_lines(found: Probe, pending: dict[str, int] | None) -> list[str]:
    data = _status_json(found, pending)
    sandbox = data["sandbox"] or {}
    active = "active" if sandbox.get("active") else "inactive (every command asks)"
    detail = f": {sandbox['detail']}" if sandbox.get("detail") else ""
    if pending is None:
        waiting = (
            "unknown (the token in <home>/token was refused)"
            if found.socket is not None
            else "unknown (a daemon without a Unix socket is not sent the token over TCP)"
        )
    else:
        total = sum(pending.values())
        parts = ", ".join(f"{origin} {n}" for origin, n in pending.items() if n)
        waiting = f"{total} resumable" + (f" ({parts})" if parts else "")
    return [
        f"agentrio daemon running for {found.home}",
        f"  address   {data['address']}",
        f"  pid       {data['pid']}",
        f"  version   {data['version']}",
        f"  uptime    {_ago(float(data['uptime_s'] or 0))}",
        f"  sandbox   {active}{detail}",
        f"  store     {store_line(data['store'])}",
        *frontend_lines(data["frontends"]),
        *mcp_status_lines(data["mcp"]),
        f"  tasks     {data['tasks_running']} running, {data['tasks_queued']} queued; "
        f"{plural(int(data['legs'] or 0), 'background leg')}",
        f"  pending   {waiting}",
        *_asks_lines(data["asks"]),
        f"  clients   {plural(int(data['connections'] or 0), 'WebSocket connection')}, "
        f"{plural(int(data['event_streams'] or 0), 'event stream')}; "
        f"{plural(int(data['sessions'] or 0), 'session')} in memory",
    ]


def _asks_lines(asks: dict[str, int] | None) -> list[str]:
    """The open asks (issue 34, R97): how many, and those a front-end was shown but has
    not acknowledged for a few seconds (a frozen REPL, a page that never drew it)."""
    if not asks or not asks.get("open"):
        return []
    line = f"  asks      {asks['open']} open ({asks.get('acknowledged', 0)} acknowledged"
    line += f", {asks.get('waiting', 0)} waiting for a front-end)"
    if asks.get("late"):
        line += f"; {asks['late']} shown but not acknowledged yet"
    return [line]


async def status(home: Path, args: argparse.Namespace, http: HttpApi) -> int:
    found = await probe(home, http)
    pending = await _pending(found, http) if found.state == "running" else None
    if args.json:
        print(json.dumps(_status_json(found, pending), indent=2))
    elif found.state == "running":
        print("\n".join(_status_lines(found, pending)))
    else:
        print(_absent_line(found))
    if found.state == "running":
        return 0
    return EXIT_NOT_RUNNING if found.state == "not running" else EXIT_FAILED


# ---------------------------------------------------------------------- stop


def _gone(home: Path, pid: int) -> bool:
    """Whether daemon ``pid`` has ended: it no longer holds the home's lock and its
    process is gone (or a zombie its parent has not reaped yet)."""
    return home_lock_holder(home) != pid and process_state(pid) in (None, "Z")


async def _wait_gone(home: Path, pid: int, wait_s: float) -> bool:
    with trio.move_on_after(wait_s):
        while True:
            if await trio.to_thread.run_sync(_gone, home, pid):
                return True
            await trio.sleep(_POLL_S)
    return False


def _leave_stop_note(home: Path, pid: int, reason: str) -> None:
    """``daemon.stopped`` for a daemon that could not leave it itself (killed)."""
    note = json.dumps({"pid": pid, "at": time.time(), "reason": reason}).encode()
    fd = os.open(home / STOPPED_FILE, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, note)
    finally:
        os.close(fd)


def _forget_daemon_json(home: Path, pid: int) -> None:
    """Remove the ``daemon.json`` a killed daemon left, if it still names ``pid``."""
    info = read_daemon_info(home)
    if info is not None and info.get("pid") == pid:
        (home / "daemon.json").unlink(missing_ok=True)


async def _kill(home: Path, pid: int, waited_s: float) -> int:
    """``--force``: SIGKILL ``pid`` once it is verified to hold the home's lock."""
    holder = await trio.to_thread.run_sync(home_lock_holder, home)
    if holder != pid:
        print(
            f"agentrio stop: cannot verify that pid {pid} is the daemon of {home} "
            "(it does not hold the home's lock); not killing it",
            file=sys.stderr,
        )
        return EXIT_FAILED
    os.kill(pid, signal.SIGKILL)
    if not await _wait_gone(home, pid, _KILL_WAIT_S):
        print(f"agentrio stop: pid {pid} still runs after SIGKILL", file=sys.stderr)
        return EXIT_FAILED
    await trio.to_thread.run_sync(_leave_stop_note, home, pid, "agentrio stop --force")
    await trio.to_thread.run_sync(_forget_daemon_json, home, pid)
    print(
        f"killed the agentrio daemon (pid {pid}) of {home} with SIGKILL after {waited_s:g} s; "
        "the tasks it ran become resumable once their online markers expire"
    )
    return 0


async def _request_stop(found: Probe, http: HttpApi) -> ShutdownAccepted | str:
    """``POST /v1/shutdown`` over the Unix socket; the daemon's answer, or why it was
    not asked. A daemon without a socket (an earlier release) is sent SIGTERM instead,
    if it holds the home's lock: the token never goes over TCP."""
    if found.socket is None:
        return await trio.to_thread.run_sync(_terminate, found)
    token = await trio.to_thread.run_sync(read_token, found.home)
    try:
        reply = await _ask(
            found, http, "POST", "/v1/shutdown", json={"reason": STOP_REASON}, token=token
        )
    except ClientError as exc:
        return f"cannot reach the daemon at {found.url}: {exc.message}"
    if reply.status == 401:
        return f"the daemon refused the token in {found.home / 'token'}"
    if reply.status != 202:
        return f"the daemon answered HTTP {reply.status} to POST /v1/shutdown: {reply.text[:200]}"
    try:
        accepted: ShutdownAccepted = decode(reply.content, ShutdownAccepted)
    except FrameDecodeError as exc:
        return f"unexpected answer to POST /v1/shutdown: {exc}"
    return accepted


def _terminate(found: Probe) -> ShutdownAccepted | str:
    """SIGTERM to the holder of the home's lock (the daemon by definition); the same
    deliberate stop as ``POST /v1/shutdown`` (it leaves ``daemon.stopped``)."""
    holder = home_lock_holder(found.home)
    if holder is None or holder != found.pid:
        return f"cannot verify that pid {found.pid} is the daemon of {found.home}; not stopping it"
    os.kill(holder, signal.SIGTERM)
    health = found.health or {}
    tasks, legs = health.get("tasks", 0), health.get("legs", 0)
    return ShutdownAccepted(
        pid=holder,
        tasks=tasks if isinstance(tasks, int) else 0,
        legs=legs if isinstance(legs, int) else 0,
    )


def _kept(accepted: ShutdownAccepted) -> str:
    if accepted.tasks == 0:
        kept = "no task was running"
    else:
        kept = f"{plural(accepted.tasks, 'running task')} kept in /pending"
    if accepted.legs:
        kept += f"; {plural(accepted.legs, 'background leg')} ended"
    return kept


async def stop(home: Path, args: argparse.Namespace, http: HttpApi) -> int:
    found = await probe(home, http)
    if found.state == "not running":
        print(_absent_line(found) + "; nothing to stop")
        return 0
    if found.state != "running":
        assert found.holder is not None
        print(_absent_line(found), file=sys.stderr)
        if not args.force:
            print("agentrio stop: `agentrio stop --force` kills it", file=sys.stderr)
            return EXIT_FAILED
        return await _kill(home, found.holder, 0)
    accepted = await _request_stop(found, http)
    if isinstance(accepted, str):
        print(f"agentrio stop: {accepted}", file=sys.stderr)
        return EXIT_FAILED
    pid = accepted.pid
    if await _wait_gone(home, pid, args.timeout):
        print(f"stopped the agentrio daemon (pid {pid}) of {home}; {_kept(accepted)}")
        return 0
    print(
        f"agentrio stop: the daemon (pid {pid}) has not exited {args.timeout:g} s after it "
        f"was asked to stop; see {home / 'daemon.log'}",
        file=sys.stderr,
    )
    if args.force:
        return await _kill(home, pid, args.timeout)
    print("agentrio stop: `agentrio stop --force` kills it", file=sys.stderr)
    return EXIT_FAILED


# ---------------------------------------------------------------------- start


async def start(home: Path, args: argparse.Namespace, http: HttpApi) -> int:
    found = await probe(home, http)
    if found.state == "running":
        print(f"an agentrio daemon already runs for {home} (pid {found.pid}, {found.url})")
        return 0
    try:
        endpoint = await ensure_daemon(home, http, status=lambda s: print(s.text))
    except DaemonStartError as exc:
        print(f"agentrio start: {exc}", file=sys.stderr)
        return EXIT_FAILED
    info = await trio.to_thread.run_sync(read_daemon_info, home) or {}
    print(f"agentrio daemon running for {home} at {endpoint.http_base} (pid {info.get('pid')})")
    return 0


# ---------------------------------------------------------------------- command line


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agentrio",
        description="See, stop or start the agentrio daemon of a home.",
        epilog=(
            "Exit status: status 0 running, 1 there but not answering (starting or stuck), "
            "3 not running; stop 0 when no daemon runs afterwards, 1 when it still runs; "
            "start 0 when one answers. Home: --home, else $AGENTRIO_HOME, else "
            "~/.config/agentrio."
        ),
    )
    home = argparse.ArgumentParser(add_help=False)
    home.add_argument("--home", metavar="DIR", help="agentrio home")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    status_cmd = commands.add_parser(
        "status",
        parents=[home],
        help="whether the daemon runs, its address, pid, version, uptime, sandbox and work",
        description=(
            "Whether the home's daemon runs; if it does, its address, pid, version, "
            "uptime, sandbox, running and queued tasks, background legs, resumable tasks "
            "per origin and connected clients (from GET /v1/health and the token)."
        ),
        epilog=(
            "Exit status: 0 running; 1 a process holds the home but does not answer "
            "(starting, or stuck); 3 not running (also when daemon.json is stale)."
        ),
    )
    status_cmd.add_argument("--json", action="store_true", help="one JSON object, for scripts")
    stop_cmd = commands.add_parser(
        "stop",
        parents=[home],
        help="stop the daemon; running tasks end with cause shutdown and stay resumable",
        description=(
            "Ask the daemon to stop (POST /v1/shutdown) and wait until its process has "
            "ended. Running tasks end with cause 'shutdown' and stay in /pending; "
            "background legs end. An open REPL does not restart a daemon stopped this "
            "way (it reconnects when one runs again: `agentrio start`)."
        ),
        epilog=(
            "Exit status: 0 when no daemon runs afterwards (stopped now, or none ran); "
            "1 when it still runs. --force signals only the process holding the home's "
            "lock (/proc/locks): the home's daemon and nothing else."
        ),
    )
    stop_cmd.add_argument(
        "--timeout",
        type=float,
        default=STOP_WAIT_S,
        metavar="S",
        help=f"seconds to wait for the daemon to exit (default {STOP_WAIT_S:g})",
    )
    stop_cmd.add_argument(
        "--force",
        action="store_true",
        help="SIGKILL the daemon if it has not exited by then (or does not answer)",
    )
    commands.add_parser(
        "start",
        parents=[home],
        help="start a detached daemon unless one runs (log: daemon.log)",
        description=(
            "Start a detached daemon for the home unless one answers, as the REPL does "
            "(output appended to <home>/daemon.log), and wait until it answers. "
            "Exit status: 0 when one answers, 1 when it could not be started."
        ),
    )
    return parser


Command = Callable[[Path, argparse.Namespace, HttpApi], Awaitable[int]]
_RUN: Final[dict[str, Command]] = {"status": status, "stop": stop, "start": start}


async def _run(command: Command, home: Path, args: argparse.Namespace) -> int:
    async with open_http(timeout_s=10.0, verify=no_trust_roots()) as http:
        return await command(home, args, http)


def main(argv: list[str]) -> int:
    """``agentrio status|stop|start [options]``; returns the exit status."""
    args = build_parser().parse_args(argv)
    if args.home:
        # Set, not just used: a daemon `start` spawns must share the home.
        os.environ["AGENTRIO_HOME"] = str(Path(args.home).expanduser().resolve())
    home = default_home()
    return trio.run(partial(_run, _RUN[args.command], home, args))
