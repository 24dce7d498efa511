"""The REPL's Trio side: one connection to the daemon at a time, frames ⇄ state.

`run_client` finds (or starts) the daemon, connects, and moves items both ways until the
connection breaks; then it says so and connects again, to the same daemon once it is
back or to a new one it starts. Frames the UI queued for a connection that died are
dropped, never replayed on the next one: a ``reply`` or ``cancel`` names asks and tasks
the new connection never started (R43: those runs were cancelled with ``disconnected``).
"""

from __future__ import annotations

import ssl
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any, Final, Protocol

import httpx
import trio
import trio_websocket

from protocol.errors import FrameDecodeError
from protocol.frames import ClientFrame, ServerFrame
from protocol.transport import AuthRefused, open_frame_connection
from repl.daemon import DaemonStartError, Endpoint, ensure_daemon
from repl.messages import (
    Connected,
    Disconnected,
    HttpCall,
    HttpResult,
    Incoming,
    Outgoing,
    Status,
)

__all__ = [
    "CLIENT_NAME",
    "RESTART_GRACE_S",
    "RETRY_DELAYS",
    "START_BACKOFF_S",
    "Connection",
    "do_http",
    "no_trust_roots",
    "pump",
    "run_client",
]

CLIENT_NAME: Final = "agentrio-repl/0.1.0"
#: Seconds between reconnect attempts (the last one repeats).
RETRY_DELAYS: Final = (0.2, 0.5, 1.0, 2.0)
#: After losing a daemon, how long to wait for it to come back (a restart) before
#: starting one ourselves: a restart by hand must not race with the REPL's own start.
RESTART_GRACE_S: Final = 5.0
#: After a daemon we started failed, how long before starting another (meanwhile we
#: keep looking for one that answers, e.g. started by hand after fixing its config).
START_BACKOFF_S: Final = 30.0


class Connection(Protocol):
    """What `pump` needs of a `protocol.transport.FrameConnection`."""

    async def send(self, frame: Any) -> None: ...

    async def receive(self) -> ServerFrame: ...


Connect = Callable[[str, str], AbstractAsyncContextManager[Connection]]
#: ``locate(client, may_start)``: a healthy daemon's endpoint; may start one if allowed.
Locate = Callable[[httpx.AsyncClient, bool], Awaitable[Endpoint]]


def no_trust_roots() -> ssl.SSLContext:
    """The TLS context of the REPL's HTTP client, which only ever speaks plain ``http://``
    to the daemon named in ``daemon.json``: verification stays on but no trust roots are
    loaded, so an ``https`` URL could never verify (it fails, it is not trusted), and the
    start skips reading the system CA bundle, tens of milliseconds (cold start, B7)."""
    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)


def _default_connect(url: str, token: str) -> AbstractAsyncContextManager[Connection]:
    return open_frame_connection(url, token, client=CLIENT_NAME)


async def do_http(client: httpx.AsyncClient, endpoint: Endpoint, call: HttpCall) -> HttpResult:
    """Run one authenticated API call; every failure becomes a result, never a raise."""
    try:
        response = await client.request(
            call.method,
            endpoint.http_base + call.path,
            params=call.params,
            headers={"Authorization": f"Bearer {endpoint.token}"},
        )
    except httpx.HTTPError as exc:
        return HttpResult(call=call, status=0, error=str(exc) or type(exc).__name__)
    body: Any = None
    if response.content:
        try:
            body = response.json()
        except ValueError:
            body = None
    return HttpResult(call=call, status=response.status_code, body=body)


async def pump(
    conn: Connection,
    outgoing: trio.MemoryReceiveChannel[Outgoing],
    deliver: Callable[[Incoming], None],
    http: Callable[[HttpCall], Awaitable[HttpResult]],
) -> str:
    """Move frames both ways until the connection ends; return why it ended."""
    reason = "connection closed"
    async with trio.open_nursery() as nursery:

        async def writer() -> None:
            async for item in outgoing:
                if isinstance(item, HttpCall):
                    nursery.start_soon(_http_task, item)
                    continue
                frame: ClientFrame = item
                try:
                    await conn.send(frame)
                except trio_websocket.ConnectionClosed:
                    return

        async def _http_task(call: HttpCall) -> None:
            deliver(await http(call))

        nursery.start_soon(writer)
        while True:
            try:
                deliver(await conn.receive())
            except FrameDecodeError as exc:
                deliver(Status(text=f"unreadable frame from the daemon: {exc}", error=True))
            except trio_websocket.ConnectionClosed as exc:
                if exc.reason is not None and exc.reason.reason:
                    reason = exc.reason.reason
                elif exc.reason is not None:
                    reason = f"closed with code {exc.reason.code}"
                break
        nursery.cancel_scope.cancel()
    return reason


def _drain(outgoing: trio.MemoryReceiveChannel[Outgoing]) -> None:
    while True:
        try:
            outgoing.receive_nowait()
        except trio.WouldBlock:
            return


def _delay(attempt: int) -> float:
    return RETRY_DELAYS[min(attempt, len(RETRY_DELAYS) - 1)]


async def run_client(
    *,
    home: Path,
    outgoing: trio.MemoryReceiveChannel[Outgoing],
    deliver: Callable[[Incoming], None],
    locate: Locate | None = None,
    connect: Connect = _default_connect,
) -> None:
    """Keep one daemon connection alive until cancelled (the REPL exits)."""

    async def default_locate(client: httpx.AsyncClient, may_start: bool) -> Endpoint:
        return await ensure_daemon(home, client, status=deliver, start=may_start)

    find = locate or default_locate
    connected_once = False
    last_problem = ""
    attempt = 0
    lost_at: float | None = None
    failed_start_at: float | None = None
    async with httpx.AsyncClient(timeout=10.0, verify=no_trust_roots()) as client:
        while True:
            problem = ""
            reason = ""
            session_up = False
            may_start = True
            try:
                now = trio.current_time()
                may_start = (lost_at is None or now - lost_at >= RESTART_GRACE_S) and (
                    failed_start_at is None or now - failed_start_at >= START_BACKOFF_S
                )
                endpoint = await find(client, may_start)
                async with connect(endpoint.ws_url, endpoint.token) as conn:
                    _drain(outgoing)
                    welcome = getattr(conn, "welcome", None)
                    deliver(
                        Connected(
                            url=endpoint.http_base,
                            daemon_version=getattr(welcome, "daemon_version", ""),
                            reconnect=connected_once,
                        )
                    )
                    connected_once = session_up = True
                    last_problem = ""
                    attempt = 0
                    lost_at = None

                    async def http(call: HttpCall, endpoint: Endpoint = endpoint) -> HttpResult:
                        return await do_http(client, endpoint, call)

                    reason = await pump(conn, outgoing, deliver, http)
            except AuthRefused as exc:
                problem = f"the daemon refused our token ({exc}); retrying"
            except DaemonStartError as exc:
                if may_start:
                    problem = str(exc)
                    failed_start_at = trio.current_time()
                elif failed_start_at is not None:
                    problem = last_problem
                else:
                    problem = (
                        f"waiting for the daemon to come back (or {RESTART_GRACE_S:g} s to "
                        "start a new one)"
                    )
            except (OSError, trio_websocket.HandshakeError, trio_websocket.ConnectionClosed) as exc:
                problem = f"cannot reach the daemon: {str(exc) or type(exc).__name__}"
            if session_up:
                deliver(Disconnected(reason=reason or problem))
                lost_at = trio.current_time()
            elif problem and problem != last_problem:
                deliver(Status(text=problem, error=True))
                last_problem = problem
            await trio.sleep(_delay(attempt))
            attempt += 1
