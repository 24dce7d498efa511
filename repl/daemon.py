"""Finding the daemon, and starting a detached one when none answers (SPEC §11).

The daemon advertises itself in ``<home>/daemon.json`` ``{pid, host, port, socket, …}``
while it serves; ``GET /v1/health`` (no auth) says whether it really answers. It is
asked over the Unix socket ``<home>/daemon.sock`` whenever ``daemon.json`` names one,
and so is everything after: only the home's daemon can listen there, so the token is
never sent to a process that took the TCP port of a killed daemon (issue 29 finding
3). A daemon this REPL starts runs in its own session (``setsid``), so closing the
terminal or the REPL does not take it down, with stdout and stderr appended to
``<home>/daemon.log``.

A started daemon is still our child: whatever becomes of it, a thread waits for it
(`reap_later`), so it never stays a zombie while the REPL runs -- neither one that lost
the start to another REPL's daemon (ended too if it lingers) nor ours once it is
stopped. A daemon that stopped on purpose (``agentrio stop``, SIGTERM, SIGINT) leaves
``<home>/daemon.stopped`` (`read_stopped`), which the next daemon removes.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import attrs
import trio

from agentrio import ClientError, DaemonNotFound, default_home
from agentrio.connecting import LOCAL_URL
from agentrio.home import read_address, read_socket
from agentrio.home import read_token as read_token_or_raise
from agentrio.repl.messages import Status
from agentrio.transport import HttpApi, open_http

__all__ = [
    "HEALTH_TIMEOUT_S",
    "LOST_GRACE_S",
    "PORT_FALLBACK_KEY",
    "STOPPED_FILE",
    "DaemonStartError",
    "Endpoint",
    "StopNote",
    "default_home",
    "ensure_daemon",
    "health_ok",
    "home_lock_holder",
    "model_label",
    "process_state",
    "read_daemon_info",
    "read_endpoint",
    "read_stopped",
    "read_token",
    "reap_later",
    "spawn_daemon",
    "start_failure",
]

#: How long a freshly started daemon has to answer ``/v1/health``.
HEALTH_TIMEOUT_S: Final = 10.0
#: How often a started daemon is looked for: each look is one small file read (and a
#: health call once ``daemon.json`` names it), and every poll period the REPL sleeps
#: past the daemon's readiness is added to its first connection (cold start, B7).
_POLL_S: Final = 0.025
#: How long a daemon we started but another REPL's daemon beat has to exit by itself
#: (it fails to take the home's lock within a second or so) before we end it.
LOST_GRACE_S: Final = 10.0
#: Left in the home by a daemon that stopped on purpose; the same name as
#: ``agentrio.engine.server.lifecycle.STOPPED_FILE`` (the REPL does not import the engine).
STOPPED_FILE: Final = "daemon.stopped"
#: The key of ``daemon.json`` naming the default port a daemon found taken (it then
#: listens on another, ``port``); the same as ``agentrio.engine.server.ports.PORT_FALLBACK_KEY``.
PORT_FALLBACK_KEY: Final = "port_taken"


class DaemonStartError(Exception):
    """No daemon answered and starting one did not help (or was not allowed yet); the
    message says which, and names the log."""


@attrs.frozen(kw_only=True)
class Endpoint:
    """Where a serving daemon listens, and the bearer token it wants. ``socket`` is
    the address of its Unix socket (`agentrio.home.read_socket`), empty for a daemon
    that has none (an earlier release: then TCP, with the mutual challenge)."""

    host: str
    port: int
    token: str = ""
    socket: str = ""

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
        socket = read_socket(home) or ""
    except DaemonNotFound:
        return None
    return Endpoint(host=host, port=port, socket=socket)


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
    """Whether ``GET /v1/health`` (no token) says ``ok`` within 2 s: over the Unix
    socket when the endpoint has one (``http`` is then not used), else over TCP."""
    try:
        if endpoint.socket:
            async with open_http(LOCAL_URL, unix_socket=endpoint.socket) as local:
                reply = await local.request("GET", "/v1/health", timeout_s=2.0)
        else:
            reply = await http.request("GET", endpoint.http_base + "/v1/health", timeout_s=2.0)
        return reply.status == 200 and reply.json().get("ok") is True
    except (ClientError, ValueError, AttributeError):
        return False


def spawn_daemon(home: Path, argv: list[str] | None = None) -> int:
    """Start ``python -m agentrio.engine daemon --home HOME --free-port-if-taken`` detached (own
    session, stdin from /dev/null, output appended to ``<home>/daemon.log``); return its
    pid. ``--free-port-if-taken``: a default port held by another home's daemon is no
    reason to fail; the daemon takes a free one and ``daemon.json`` says which.

    `os.posix_spawn` rather than `subprocess.Popen`: a Popen object that is collected
    while its child still runs warns, and this child is meant to outlive us.
    """
    home.mkdir(parents=True, exist_ok=True)
    log = home / "daemon.log"
    argv = argv or [
        sys.executable,
        *("-m", "agentrio.engine", "daemon", "--home", str(home), "--free-port-if-taken"),
    ]
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
    actions = [
        (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
        (os.POSIX_SPAWN_OPEN, 1, str(log), flags, 0o600),
        (os.POSIX_SPAWN_DUP2, 1, 2),
    ]
    return os.posix_spawn(argv[0], argv, dict(os.environ), file_actions=actions, setsid=True)


def read_daemon_info(home: Path) -> dict[str, Any] | None:
    """``daemon.json`` as a dict (``pid``, ``host``, ``port``, ``started_at``,
    ``version``), or None when it is absent or unreadable."""
    try:
        data = json.loads((home / "daemon.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


@attrs.frozen(kw_only=True)
class StopNote:
    """``<home>/daemon.stopped``: which daemon stopped on purpose, when and why
    (``agentrio stop``, ``SIGTERM``, ``SIGINT``)."""

    pid: int
    at: float
    reason: str


def read_stopped(home: Path) -> StopNote | None:
    """The note of a daemon that stopped on purpose, or None (none, or a daemon started
    since: it removes the note)."""
    try:
        data = json.loads((home / STOPPED_FILE).read_text(encoding="utf-8"))
        note = StopNote(pid=int(data["pid"]), at=float(data["at"]), reason=str(data["reason"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    shown = "".join(ch for ch in note.reason if ch.isprintable())[:80]
    return attrs.evolve(note, reason=shown or "stopped")


def home_lock_holder(home: Path) -> int | None:
    """The pid holding the ``flock`` on the home directory -- by definition the daemon
    of this home (``agentrio.engine.server.lifecycle.instance_lock``) -- read from
    ``/proc/locks`` without touching the lock; None when nobody holds it, or when
    ``/proc/locks`` cannot be read (not Linux)."""
    try:
        st = os.stat(home)
        with open("/proc/locks", encoding="ascii", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    wanted = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    for line in lines:
        fields = line.split()
        # "1: FLOCK  ADVISORY  WRITE 1234 fe:00:2285655 0 EOF" ("->" marks waiters)
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == wanted:
            try:
                return int(fields[4])
            except ValueError:
                return None
    return None


def process_state(pid: int) -> str | None:
    """The state letter of ``pid`` in ``/proc/<pid>/stat`` (``R``, ``S``, ``Z`` for a
    zombie, …), or None when no such process exists (or it cannot be read)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()
    return fields[0] if fields else None


def reap_later(pid: int, *, lost: bool, grace_s: float = LOST_GRACE_S) -> None:
    """Wait for our child ``pid`` in a thread, so it is reaped whenever it exits.

    ``lost``: another daemon serves the home, so ours has no future: give it
    ``grace_s`` to exit by itself (it cannot take the home's lock), then SIGTERM it.
    Signalling is safe while the child is unreaped (its pid cannot be reused), and
    only this thread reaps it from here on. A pid that is not our child (tests pass
    made-up ones) is left alone.
    """
    threading.Thread(
        target=_reap, args=(pid, lost, grace_s), name=f"agentrio-reap-{pid}", daemon=True
    ).start()


def _reap(pid: int, lost: bool, grace_s: float) -> None:
    try:
        if lost:
            deadline = time.monotonic() + grace_s
            while True:
                done, _ = os.waitpid(pid, os.WNOHANG)
                if done == pid:
                    return
                if time.monotonic() >= deadline:
                    break
                time.sleep(0.05)
            os.kill(pid, signal.SIGTERM)
        os.waitpid(pid, 0)
    except ChildProcessError:
        return


def _reaped(pid: int) -> bool:
    """True when our child ``pid`` has exited (and reap it, so it leaves no zombie)."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return done == pid


def _read_named(home: Path) -> tuple[Endpoint | None, object]:
    """The address and the pid ``daemon.json`` names (read in one worker-thread call)."""
    return read_endpoint(home), (read_daemon_info(home) or {}).get("pid")


async def _answering(home: Path, http: HttpApi) -> tuple[Endpoint, object] | None:
    """The endpoint (with its token) of the daemon ``daemon.json`` names, and the pid
    it names, when that daemon answers health; else None."""
    endpoint, pid = await trio.to_thread.run_sync(_read_named, home)
    if endpoint is None or not await health_ok(http, endpoint):
        return None
    token = await trio.to_thread.run_sync(read_token, home)
    return attrs.evolve(endpoint, token=token), pid


async def ensure_daemon(
    home: Path,
    http: HttpApi,
    *,
    status: Callable[[Status], None],
    start: bool = True,
    spawn: Callable[[Path], int] = spawn_daemon,
    exited: Callable[[int], bool] | None = None,
    wait_s: float = HEALTH_TIMEOUT_S,
    lost_grace_s: float = LOST_GRACE_S,
) -> Endpoint:
    """The endpoint of a healthy daemon, starting one when none answers and ``start``.

    ``exited(pid)`` tells whether the started process has ended (default: reap our
    child without blocking).

    While waiting, ``daemon.json`` is re-read on every poll: if another REPL started a
    daemon at the same moment, ours loses the home's lock and exits, and we use theirs
    -- still waiting for it when ours exited first while theirs holds the lock. Our
    child is reaped either way (`reap_later`; ended after ``lost_grace_s`` when it lost
    and lingers).
    """
    found = await _answering(home, http)
    if found is not None:
        return found[0]
    log = home / "daemon.log"
    if not start:
        raise DaemonStartError("no daemon answers")
    has_exited = exited or _reaped
    log_start = await trio.to_thread.run_sync(_size, log)
    pid = await trio.to_thread.run_sync(spawn, home)
    status(Status(text=f"no daemon answered; started one (pid {pid}), its log: {log}"))
    gone = False
    try:
        with trio.move_on_after(wait_s):
            while True:
                found = await _answering(home, http)
                if found is not None:
                    if found[1] == pid:
                        await _say_port_fallback(home, status)
                    return found[0]
                if gone and await trio.to_thread.run_sync(home_lock_holder, home) is None:
                    break
                gone = gone or has_exited(pid)
                await trio.sleep(_POLL_S)
    finally:
        if not gone:
            lost = found is not None and isinstance(found[1], int) and found[1] != pid
            reap_later(pid, lost=lost, grace_s=lost_grace_s)
    if not gone:
        raise DaemonStartError(f"the daemon did not answer within {wait_s:g} s; see its log: {log}")
    reason = await trio.to_thread.run_sync(start_failure, log, log_start)
    if reason:
        raise DaemonStartError(f"the daemon could not start: {reason} (its log: {log})")
    raise DaemonStartError(f"the daemon exited; see its log: {log}")


#: How the daemon begins the one line that says why it cannot start (``agentrio
#: daemon: …``, `agentrio.engine.server.startup`, `agentrio.engine.cli`).
_REASON_PREFIX: Final = "agentrio daemon: "
#: The most of a started daemon's log read back for its reason.
_REASON_READ_BYTES: Final = 64 * 1024


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def start_failure(log: Path, start: int) -> str:
    """The daemon's own one-line reason for not starting: the last ``agentrio daemon:``
    line it wrote to ``log`` past byte ``start`` (where the log ended when it was
    started), without the prefix; "" when it wrote none."""
    try:
        with log.open("rb") as f:
            f.seek(max(start, _size(log) - _REASON_READ_BYTES))
            tail = f.read(_REASON_READ_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return ""
    said = [line for line in tail.splitlines() if line.startswith(_REASON_PREFIX)]
    shown = "".join(ch for ch in said[-1] if ch.isprintable()) if said else ""
    return shown.removeprefix(_REASON_PREFIX)


async def _say_port_fallback(home: Path, status: Callable[[Status], None]) -> None:
    """Once, for the daemon we started: the port it took when the default was held."""
    info = await trio.to_thread.run_sync(read_daemon_info, home) or {}
    taken, port = info.get(PORT_FALLBACK_KEY), info.get("port")
    if isinstance(taken, int) and isinstance(port, int):
        status(
            Status(
                text=(
                    f"port {taken} is in use (another home's daemon?): this home's daemon "
                    f"listens on port {port} instead (recorded in {home / 'daemon.json'})"
                )
            )
        )
