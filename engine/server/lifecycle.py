"""Running the daemon: one instance per home, ``daemon.json``, signals, logging (R27, R53).

`run_daemon` is what ``agentrio daemon`` calls. In order it:

1. takes ``flock`` on the home directory itself (`instance_lock`; ``daemon.lock`` only
   records the pid) before touching anything — a second daemon on the same home prints
   who holds it (pid and address from ``daemon.json``) and exits 1;
2. sets up logging to ``<home>/daemon.log`` and stderr (never tokens, never
   passwords; the log file is 0600);
3. makes the home owner-only (folders 0700, files 0600, `agentrio.engine.store.files`),
   logging once what it had to tighten in a home made earlier with looser modes (but
   never the person's ``config.toml``: a too-open one is warned about); ends
   the processes a killed predecessor left running (`agentrio.engine.processes.orphans`), clears
   ``<home>/sessions/*/background/`` (background work does not survive a
   restart, R27), makes or reads the token, opens the engine and purges expired
   online markers;
4. serves HTTP and WebSocket on one port and on ``<home>/daemon.sock``, the Unix
   socket local clients use (`open_server`, `agentrio.protocol.local`), then removes the note
   of a deliberate stop (``daemon.stopped``, below) and writes ``<home>/daemon.json``
   ``{pid, host, port, socket, started_at, version}`` atomically; and starts the enabled chat
   front-ends as supervised children (`agentrio.engine.frontends_supervisor`, R82);
5. on SIGINT, SIGTERM or ``POST /v1/shutdown`` (``agentrio stop``): first leaves
   ``<home>/daemon.stopped`` ``{pid, at, reason}`` -- the stop was deliberate, so an
   open REPL does not start a new daemon (a crash leaves no note and is restarted) --
   then stops the front-ends, cancels every task with cause ``shutdown`` (their
   ``done`` frames still go out), closes connections, stops the server, closes the
   store, removes ``daemon.json`` and exits 0 — within 5 s (R53).

`open_server` is the reusable part: tests serve an in-process engine with it.
"""

from __future__ import annotations

import errno
import fcntl
import gc
import importlib.metadata
import json
import logging
import os
import shutil
import signal
import sys
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import ExitStack, asynccontextmanager, contextmanager
from functools import partial
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

import attrs
import hypercorn.trio
import trio
from hypercorn.config import Config as HypercornConfig

from agentrio.engine.assembly import open_engine
from agentrio.engine.config import Config
from agentrio.engine.core import Engine
from agentrio.engine.errors import ConfigError
from agentrio.engine.frontends_supervisor import enabled_frontends, statuses_of, supervise_frontends
from agentrio.engine.nursery_tasks import cancel_scope
from agentrio.engine.processes.orphans import kill_orphans, mark_children
from agentrio.engine.processes.reaper import adopting_orphans
from agentrio.engine.server.app import ServerContext, create_app
from agentrio.engine.server.auth import load_or_create_token, own_hosts, own_origins
from agentrio.engine.server.cluster import open_cluster
from agentrio.engine.server.home_modes import tighten_home_logged
from agentrio.engine.server.ownership import refuse_unsafe_home
from agentrio.engine.server.ports import note_fallback, port_to_serve
from agentrio.engine.server.sockets import abort_connections
from agentrio.engine.server.startup import STARTUP_EXIT, startup_message
from agentrio.engine.server.ws import CLOSE_TIMEOUT_S
from agentrio.engine.store.base import StoreError
from agentrio.engine.store.files import make_home, open_private, write_private_atomic
from agentrio.protocol.causes import Cause
from agentrio.protocol.local import SOCKET_FILE, fits, via_directory_fd

__all__ = [
    "DAEMON_JSON",
    "GRACEFUL_S",
    "LOCK_FILE",
    "LOG_FILE",
    "STOPPED_FILE",
    "AlreadyRunning",
    "RunningServer",
    "clear_background",
    "configure_logging",
    "daemon_version",
    "instance_lock",
    "open_server",
    "read_daemon_json",
    "remove_daemon_json",
    "remove_stop_note",
    "run_daemon",
    "serve",
    "write_daemon_json",
    "write_stop_note",
]

log = logging.getLogger("agentrio.daemon")

DAEMON_JSON: Final = "daemon.json"
LOCK_FILE: Final = "daemon.lock"
LOG_FILE: Final = "daemon.log"
#: The note of a deliberate stop (module doc, step 5); `agentrio.repl.daemon` reads it.
STOPPED_FILE: Final = "daemon.stopped"
#: How long hypercorn lets open connections finish once the server stops.
GRACEFUL_S: Final = 1.0
#: Largest WebSocket message hypercorn buffers. Messages above 1 MiB (the protocol
#: limit) and up to this get an ``error`` frame and the connection lives on; beyond it
#: hypercorn closes the connection with 1009 (message too big), docs/protocol.md.
WS_BUFFER_BYTES: Final = 16 * 1024 * 1024


def daemon_version() -> str:
    """The installed ``agentrio`` version, or ``0.0.0+unknown`` from a bare checkout."""
    try:
        return importlib.metadata.version("agentrio")
    except importlib.metadata.PackageNotFoundError:
        return "0.0.0+unknown"


# ---------------------------------------------------------------------- home files


class AlreadyRunning(Exception):
    """Another daemon holds this home's lock; the message says which one."""


@contextmanager
def instance_lock(home: Path) -> Iterator[None]:
    """Hold the home itself: ``flock`` on a descriptor of the home *directory*, kept
    open for the daemon's lifetime and released by the kernel even on ``kill -9``.

    Why the directory and not ``daemon.lock``: a file can be deleted and re-created
    while its holder runs, and a second daemon's ``flock`` on the new inode would then
    succeed (issue 18: it killed the first daemon's leg and took over ``daemon.json``).
    The directory cannot be replaced under a daemon that has it open and works in it.
    The lock is taken before anything in the home is touched; only then is our pid
    written to ``daemon.lock``, which is now information for people, not the lock.
    Raises `AlreadyRunning` naming the holder.
    """
    make_home(home)
    fd = os.open(home, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            raise AlreadyRunning(_describe_holder(home, home / LOCK_FILE)) from None
        _write_pid(home / LOCK_FILE)
        yield
    finally:
        os.close(fd)


def _write_pid(path: Path) -> None:
    """Leave our pid in ``daemon.lock`` for `_describe_holder` (held under the lock)."""
    pid_fd = open_private(path, os.O_RDWR)
    try:
        os.ftruncate(pid_fd, 0)
        os.write(pid_fd, f"{os.getpid()}\n".encode())
    finally:
        os.close(pid_fd)


def _describe_holder(home: Path, lock: Path) -> str:
    info = read_daemon_json(home)
    if info is not None:
        return (
            f"an agentrio daemon is already running for {home} "
            f"(pid {info.get('pid')}, http://{info.get('host')}:{info.get('port')})"
        )
    try:
        pid = lock.read_text(encoding="utf-8").strip() or "?"
    except OSError:
        pid = "?"
    return f"an agentrio daemon is already running for {home} (pid {pid}, still starting)"


def read_daemon_json(home: Path) -> dict[str, Any] | None:
    """``<home>/daemon.json`` as a dict, or None when absent or unreadable."""
    try:
        data = json.loads((home / DAEMON_JSON).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def write_daemon_json(home: Path, info: dict[str, Any]) -> None:
    """Write ``daemon.json`` atomically (temp file made 0600, fsync, ``os.replace``)."""
    path = home / DAEMON_JSON
    tmp = path.with_name(f".{DAEMON_JSON}.{os.getpid()}.tmp")
    write_private_atomic(path, json.dumps(info, indent=2).encode(), tmp=tmp)


def remove_daemon_json(home: Path, pid: int) -> None:
    """Remove ``daemon.json`` if it still names ``pid`` (never another daemon's)."""
    info = read_daemon_json(home)
    if info is not None and info.get("pid") == pid:
        (home / DAEMON_JSON).unlink(missing_ok=True)


def write_stop_note(home: Path, pid: int, reason: str) -> None:
    """Leave ``daemon.stopped`` ``{pid, at, reason}`` (atomically, 0600): this daemon
    stops on purpose. ``reason`` is kept printable and short. A failure is logged, not
    raised: it must not keep the daemon from shutting down (R53)."""
    shown = "".join(ch for ch in reason if ch.isprintable())[:120]
    note = {"pid": pid, "at": time.time(), "reason": shown}
    path = home / STOPPED_FILE
    tmp = path.with_name(f".{STOPPED_FILE}.{os.getpid()}.tmp")
    try:
        write_private_atomic(path, json.dumps(note).encode(), tmp=tmp)
    except OSError as exc:
        log.warning("cannot write %s (an open REPL may restart the daemon): %s", path, exc)


def remove_stop_note(home: Path) -> None:
    """A daemon serves again: the last stop is no longer news (a failure is logged)."""
    try:
        (home / STOPPED_FILE).unlink(missing_ok=True)
    except OSError as exc:
        log.warning("cannot remove %s: %s", home / STOPPED_FILE, exc)


def clear_background(home: Path) -> int:
    """Delete every ``<home>/sessions/*/background/`` folder (R27); return how many."""
    cleared = 0
    for folder in sorted((home / "sessions").glob("*/background")):
        if folder.is_dir() and not folder.is_symlink():
            shutil.rmtree(folder, ignore_errors=True)
            cleared += 1
    return cleared


def configure_logging(home: Path, *, level: int = logging.INFO) -> list[logging.Handler]:
    """Log ``agentrio.*`` to ``<home>/daemon.log`` (0600) and to stderr — but not twice
    when stderr already is that file (a daemon the REPL started). Returns the handlers,
    so the caller can remove them."""
    make_home(home)
    path = home / LOG_FILE
    # Created (or set back to) 0600 before the handler opens it for appending.
    os.close(open_private(path, os.O_WRONLY | os.O_APPEND))
    formatter = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    handlers: list[logging.Handler] = [logging.FileHandler(path, encoding="utf-8")]
    if not _stderr_is(path):
        handlers.append(logging.StreamHandler(sys.stderr))
    logger = logging.getLogger("agentrio")
    logger.setLevel(level)
    logger.propagate = False
    for handler in handlers:
        handler.setFormatter(formatter)
        logger.addHandler(handler)
    return handlers


def _stderr_is(path: Path) -> bool:
    try:
        mine, theirs = os.fstat(sys.stderr.fileno()), path.stat()
    except (OSError, ValueError, AttributeError):
        return False
    return (mine.st_dev, mine.st_ino) == (theirs.st_dev, theirs.st_ino)


# ---------------------------------------------------------------------- the server


@attrs.frozen(kw_only=True)
class RunningServer:
    """Where `open_server` listens."""

    host: str
    port: int
    context: ServerContext
    #: The Unix socket it also listens on (None: TCP only).
    unix_socket: Path | None = None

    @property
    def base_url(self) -> str:
        return f"http://{_url_host(self.host)}:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://{_url_host(self.host)}:{self.port}/v1/ws"


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def _hypercorn_config(host: str, port: int, unix_address: str | None = None) -> HypercornConfig:
    config = HypercornConfig()
    config.bind = [f"{_url_host(host)}:{port}"]
    if unix_address is not None:
        config.bind.append(f"unix:{unix_address}")
        # The socket is made 0600 (the home around it is 0700 anyway).
        config.umask = 0o177
    config.graceful_timeout = GRACEFUL_S
    config.accesslog = None
    config.errorlog = logging.getLogger("agentrio.hypercorn")
    config.websocket_max_message_size = WS_BUFFER_BYTES
    # A script may send many requests on one keep-alive connection.
    config.max_requests = None
    return config


@asynccontextmanager
async def open_server(
    engine: Engine,
    *,
    token: str,
    host: str = "127.0.0.1",
    port: int = 0,
    version: str | None = None,
    allowed_origins: Sequence[str] = (),
    allowed_hosts: Sequence[str] = (),
    unix_socket: Path | None = None,
) -> AsyncIterator[RunningServer]:
    """Serve ``engine`` over HTTP and WebSocket on ``host:port`` (0: any free port),
    and on the Unix socket ``unix_socket`` when given (`agentrio.protocol.local`), until the
    block exits; then close every WebSocket (4001) and event stream and stop the
    server, letting in-flight requests finish for up to `GRACEFUL_S`, and remove the
    socket file."""
    ctx = ServerContext(
        engine=engine,
        token=token,
        version=version or daemon_version(),
        allowed_origins=tuple(allowed_origins),
        allowed_hosts=tuple(allowed_hosts),
    )
    app = create_app(ctx)
    stop = trio.Event()
    served = trio.Event()
    async with open_cluster(engine, token=token) as cluster, trio.open_nursery() as nursery:
        ctx.commands.cluster = cluster
        with _unix_address(unix_socket) as address:
            binds: list[str] = await nursery.start(
                _serve_hypercorn, app, _hypercorn_config(host, port, address), stop, served
            )
        bound = next(p for p in (urlsplit(b).port for b in binds) if p is not None)
        ctx.own_origins = own_origins(host, bound)
        ctx.own_hosts = own_hosts(host, bound, allowed_origins=allowed_origins)
        try:
            yield RunningServer(host=host, port=bound, context=ctx, unix_socket=unix_socket)
        finally:
            ctx.closing.set()
            stop.set()
            nursery.start_soon(_abort_stuck_connections, bound, served, unix_socket)


@contextmanager
def _unix_address(path: Path | None) -> Iterator[str | None]:
    """The address to bind ``path`` at: itself, or through its directory's descriptor
    when it is too long for a Unix socket address (held open while binding)."""
    if path is None or fits(path):
        yield None if path is None else str(path)
        return
    fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        yield via_directory_fd(fd, path.name)
    finally:
        os.close(fd)


async def _serve_hypercorn(
    app: Any,
    config: HypercornConfig,
    stop: trio.Event,
    served: trio.Event,
    *,
    task_status: trio.TaskStatus[list[str]],
) -> None:
    """hypercorn's Trio server until ``stop``; ``served`` is set once it returned."""
    try:
        await hypercorn.trio.serve(
            app,
            config,
            shutdown_trigger=stop.wait,
            mode="asgi",
            task_status=task_status,
        )
    finally:
        served.set()


async def _abort_stuck_connections(
    port: int, served: trio.Event, unix_socket: Path | None = None
) -> None:
    """Once the graceful period is over, abort the connections still open (clients
    that stopped reading hold hypercorn's shielded writes), until the server ended:
    shutdown takes seconds whatever clients do (R53, R81). Then remove the socket
    file (a stale one would only be refused, but it is clutter)."""
    try:
        await _abort_until_served(port, served, unix_socket)
    finally:
        if unix_socket is not None:
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(partial(unix_socket.unlink, missing_ok=True))


async def _abort_until_served(port: int, served: trio.Event, unix_socket: Path | None) -> None:
    delay = GRACEFUL_S + CLOSE_TIMEOUT_S
    while not served.is_set():
        with trio.move_on_after(delay):
            await served.wait()
            return
        aborted = await trio.to_thread.run_sync(abort_connections, port, unix_socket)
        if aborted:
            log.info("shutdown: aborted %d connection(s) that stopped reading", aborted)
        delay = 0.5


async def serve(
    config: Config,
    *,
    host: str | None = None,
    port: int | None = None,
    stop: trio.Event | None = None,
    free_port_if_taken: bool = False,
) -> None:
    """The daemon: steps 3-5 of the module doc. Returns after a clean shutdown, which
    SIGINT, SIGTERM or ``stop`` (for callers that are not the main thread) begins.

    ``free_port_if_taken`` (the REPL's started daemons): when the port is the default
    one (no ``port`` given, none configured) and something holds it -- typically another
    home's daemon -- listen on a free port instead, say so once in the log, and record
    the taken one in ``daemon.json`` (`PORT_FALLBACK_KEY`) for the REPL to say."""
    home = config.home_path
    host = host or config.server.host
    port, taken = await port_to_serve(config, host, port, free_port_if_taken=free_port_if_taken)
    await trio.to_thread.run_sync(tighten_home_logged, home)
    orphans = await trio.to_thread.run_sync(kill_orphans, home)
    if orphans:
        log.info("ended %d process group(s) left running by a previous daemon", orphans)
    cleared = await trio.to_thread.run_sync(clear_background, home)
    if cleared:
        log.info("cleared %d background folder(s) left from a previous run", cleared)
    token = await trio.to_thread.run_sync(load_or_create_token, home)
    version = daemon_version()
    pid = os.getpid()
    with _signals() as signals:
        # Orphans of our commands come to the daemon, which reaps them (fast cancels).
        async with adopting_orphans(), open_engine(config) as engine:
            purged = await engine.store.purge_expired_markers(now=time.time())
            if purged:
                log.info("purged %d expired online marker(s)", purged)
            async with open_server(
                engine,
                token=token,
                host=host,
                port=port,
                version=version,
                allowed_origins=config.server.allowed_origins,
                allowed_hosts=config.server.allowed_hosts,
                unix_socket=home / SOCKET_FILE,
            ) as server:
                await trio.to_thread.run_sync(remove_stop_note, home)
                info: dict[str, Any] = {
                    "pid": pid,
                    "host": server.host,
                    "port": server.port,
                    "socket": SOCKET_FILE,
                    "started_at": time.time(),
                    "version": version,
                }
                if taken is not None:
                    note_fallback(info, taken=taken, host=host)
                await trio.to_thread.run_sync(write_daemon_json, home, info)
                log.info(
                    "agentrio %s serving %s (pid %d, home %s)", version, server.base_url, pid, home
                )
                try:
                    async with trio.open_nursery() as frontends:
                        # Chat front-ends (R82): children of the daemon, stopped first.
                        specs = enabled_frontends(config)
                        server.context.frontends = statuses_of(specs)
                        frontends.start_soon(supervise_frontends, specs, server.context.frontends)
                        why = await _wait_for_stop(signals, stop, server.context)
                        await trio.to_thread.run_sync(write_stop_note, home, pid, why)
                        cancel_scope(frontends.cancel_scope, Cause.SHUTDOWN)
                    log.info("shutting down: cancelling %d task(s)", engine.task_count)
                    await engine.shutdown()
                finally:
                    with trio.CancelScope(shield=True):
                        await trio.to_thread.run_sync(remove_daemon_json, home, pid)
    log.info("stopped")


@contextmanager
def _signals() -> Iterator[AsyncIterator[int] | None]:
    """SIGINT/SIGTERM as a channel; None off the main thread (tests stop via ``stop``)."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield None
        return
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as receiver:
        yield receiver


async def _wait_for_stop(
    signals: AsyncIterator[int] | None, stop: trio.Event | None, ctx: ServerContext
) -> str:
    """Wait for a signal, ``stop`` or ``POST /v1/shutdown``; return which (the reason
    ``daemon.stopped`` records)."""
    why: list[str] = []
    async with trio.open_nursery() as nursery:

        def stopping(reason: str) -> None:
            why.append(reason)
            cancel_scope(nursery.cancel_scope, Cause.SHUTDOWN)

        async def on_signal() -> None:
            assert signals is not None
            async for signum in signals:
                name = signal.Signals(signum).name
                log.info("received %s", name)
                stopping(name)
                return

        async def on_stop() -> None:
            assert stop is not None
            await stop.wait()
            stopping("stop requested")

        async def on_request() -> None:
            await ctx.shutdown_requested.wait()
            log.info("shutdown requested over HTTP (%r)", ctx.shutdown_reason)
            stopping(ctx.shutdown_reason)

        if signals is not None:
            nursery.start_soon(on_signal)
        if stop is not None:
            nursery.start_soon(on_stop)
        nursery.start_soon(on_request)
    return why[0] if why else "stopped"


def run_daemon(
    config: Config,
    *,
    host: str | None = None,
    port: int | None = None,
    free_port_if_taken: bool = False,
) -> int:
    """``agentrio daemon``: run in the foreground until SIGINT/SIGTERM. Exit codes: 0
    after a clean shutdown, 1 when another daemon holds the home, `STARTUP_EXIT` (2)
    when it cannot start (home unwritable or read-only, disk full, corrupt store, port
    in use, a home, token or config another user owns or may write,
    `agentrio.engine.server.ownership`): then one line on stderr names the path or port and the
    fix, no traceback.
    """
    home = config.home_path
    bind_host = host or config.server.host
    bind_port = config.server.port if port is None else port
    refused = refuse_unsafe_home(home)
    if refused is not None:
        return refused
    try:
        with ExitStack() as stack:
            try:
                stack.enter_context(instance_lock(home))
            except AlreadyRunning as exc:
                print(f"agentrio daemon: {exc}", file=sys.stderr)
                return 1
            stack.enter_context(_logging_to(home))
            mark_children(home)
            trio.run(
                partial(serve, config, host=host, port=port, free_port_if_taken=free_port_if_taken)
            )
            # Everything is closed; the process ends. Frozen, the heap is not walked by
            # the interpreter's final collection, which took 1-2 s (more on a busy
            # machine) once the model SDKs were imported, against the 5 s of R53.
            gc.freeze()
    except (OSError, StoreError, ConfigError, BaseExceptionGroup) as exc:
        line = startup_message(exc, home=home, host=bind_host, port=bind_port)
        if line is None:
            raise
        print(f"agentrio daemon: {line}", file=sys.stderr)
        return STARTUP_EXIT
    return 0


@contextmanager
def _logging_to(home: Path) -> Iterator[None]:
    handlers = configure_logging(home)
    try:
        yield
    finally:
        logger = logging.getLogger("agentrio")
        for handler in handlers:
            logger.removeHandler(handler)
            handler.close()
