"""The REPL's Trio side: its reconnect policy around the one client (`agentrio`).

`run_client` finds (or starts) the daemon, connects with `agentrio.connect`, and hands
items both ways until the connection breaks; then it says so and connects again, to
the same daemon once it is back or to a new one it starts. Frames the UI queued for a
connection that died are dropped, never replayed on the next one: a ``reply`` or
``cancel`` names asks and tasks the new connection never started (R43: those runs were
cancelled with ``disconnected``).

The client does the I/O: its reader task hands every frame to the state (through
``deliver``), `forward` sends the frames the state builds and runs its HTTP calls.
Every failure arrives here as an `agentrio.ClientError`; this module only decides
what to say and when to try again.

It never starts a daemon that stopped on purpose (``agentrio stop``, SIGTERM, SIGINT:
``<home>/daemon.stopped``, `agentrio.repl.daemon.read_stopped`): once connected, it says so and
only waits for one to answer again (``agentrio start``). A daemon that crashed leaves
no such note and is restarted after `RESTART_GRACE_S`. The first connection of a REPL
starts one in any case: opening the REPL is asking for a daemon.
"""

from __future__ import annotations

import ssl
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any, Final, Protocol

import attrs
import trio

from agentrio import AuthRefused, Client, ClientError, Disconnected, connect
from agentrio.connecting import LOCAL_URL
from agentrio.protocol.errors import FrameDecodeError
from agentrio.protocol.frames import REPL_CLIENT, ServerFrame
from agentrio.repl.daemon import DaemonStartError, Endpoint, StopNote, ensure_daemon, read_stopped
from agentrio.repl.messages import (
    Connected,
    HttpCall,
    HttpResult,
    Incoming,
    Outgoing,
    Status,
)
from agentrio.repl.messages import (
    Disconnected as Lost,
)
from agentrio.transport import HttpApi, open_http

__all__ = [
    "CLIENT_NAME",
    "HTTP_TIMEOUT_S",
    "RESTART_GRACE_S",
    "RETRY_DELAYS",
    "START_BACKOFF_S",
    "Connect",
    "connect_endpoint",
    "do_http",
    "forward",
    "no_trust_roots",
    "run_client",
    "stopped_text",
]

CLIENT_NAME: Final = f"{REPL_CLIENT}/0.1.0"
#: Seconds an HTTP call of the REPL waits for the daemon.
HTTP_TIMEOUT_S: Final = 10.0
#: Seconds between reconnect attempts (the last one repeats).
RETRY_DELAYS: Final = (0.2, 0.5, 1.0, 2.0)
#: After losing a daemon, how long to wait for it to come back (a restart) before
#: starting one ourselves: a restart by hand must not race with the REPL's own start.
RESTART_GRACE_S: Final = 5.0
#: After a daemon we started failed, how long before starting another (meanwhile we
#: keep looking for one that answers, e.g. started by hand after fixing its config).
START_BACKOFF_S: Final = 30.0


class Connect(Protocol):
    """Opens the client of one connection; ``on_frame``/``on_unreadable`` as in
    `agentrio.open_client` (tests pass a client over a fake connection)."""

    def __call__(
        self,
        endpoint: Endpoint,
        http: HttpApi,
        *,
        on_frame: Callable[[ServerFrame], None],
        on_unreadable: Callable[[FrameDecodeError], None],
    ) -> AbstractAsyncContextManager[Client]: ...


#: ``locate(http, may_start)``: a healthy daemon's endpoint; may start one if allowed.
Locate = Callable[[HttpApi, bool], Awaitable[Endpoint]]
#: ``stopped()``: the note of a daemon stopped on purpose, or None.
Stopped = Callable[[], Awaitable[StopNote | None]]


def stopped_text(note: StopNote) -> str:
    """What the REPL says while the daemon it used stays stopped on purpose."""
    return (
        f"the daemon was stopped ({note.reason}); this REPL does not restart it and "
        "reconnects once one runs again: start it with `agentrio start`"
    )


def no_trust_roots() -> ssl.SSLContext:
    """The TLS context of the REPL's HTTP client, which only ever speaks plain ``http://``
    to the daemon named in ``daemon.json``: verification stays on but no trust roots are
    loaded, so an ``https`` URL could never verify (it fails, it is not trusted), and the
    start skips reading the system CA bundle, tens of milliseconds (cold start, B7)."""
    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)


def connect_endpoint(
    endpoint: Endpoint,
    http: HttpApi,
    *,
    on_frame: Callable[[ServerFrame], None] | None = None,
    on_unreadable: Callable[[FrameDecodeError], None] | None = None,
    client_name: str = CLIENT_NAME,
) -> AbstractAsyncContextManager[Client]:
    """`agentrio.connect` to the daemon `ensure_daemon` found: over its Unix socket
    when it has one, else TCP (the REPL's and ``agentrio exec``'s one way in).
    ``client_name`` is the front-end's name its asks are said to be shown on."""
    return connect(
        LOCAL_URL if endpoint.socket else endpoint.http_base,
        endpoint.token,
        client_name=client_name,
        unix_socket=endpoint.socket or None,
        http=http,
        on_frame=on_frame,
        on_unreadable=on_unreadable,
    )


async def do_http(client: Client, call: HttpCall) -> HttpResult:
    """Run one authenticated API call; every failure becomes a result, never a raise."""
    try:
        reply = await client.request(call.method, call.path, params=call.params)
    except ClientError as exc:
        return HttpResult(call=call, status=0, error=exc.message)
    body: Any = None
    if reply.content:
        try:
            body = reply.json()
        except ValueError:
            body = None
    return HttpResult(call=call, status=reply.status, body=body)


def close_reason(closed: ClientError) -> str:
    """How the REPL names the end of a connection."""
    if isinstance(closed, Disconnected):
        if closed.close_reason:
            return closed.close_reason
        if closed.close_code is not None:
            return f"closed with code {closed.close_code}"
    return "connection closed"


async def forward(
    client: Client,
    outgoing: trio.MemoryReceiveChannel[Outgoing],
    deliver: Callable[[Incoming], None],
) -> str:
    """Hand the UI's items to ``client`` (frames sent as they are, HTTP calls run
    aside, their results delivered) until the connection ends; return why it ended."""
    async with trio.open_nursery() as nursery:

        async def writer() -> None:
            async for item in outgoing:
                if isinstance(item, HttpCall):
                    nursery.start_soon(_http_task, item)
                    continue
                try:
                    await client.send_frame(item)
                except ClientError:
                    return

        async def _http_task(call: HttpCall) -> None:
            deliver(await do_http(client, call))

        nursery.start_soon(writer)
        closed = await client.wait_closed()
        nursery.cancel_scope.cancel()
    return close_reason(closed)


def _drain(outgoing: trio.MemoryReceiveChannel[Outgoing]) -> None:
    while True:
        try:
            outgoing.receive_nowait()
        except trio.WouldBlock:
            return


def _delay(attempt: int) -> float:
    return RETRY_DELAYS[min(attempt, len(RETRY_DELAYS) - 1)]


@attrs.define
class _Starts:
    """When `run_client` may start a daemon itself, and what it says when none answers."""

    connected_once: bool = False
    lost_at: float | None = None
    failed_start_at: float | None = None
    last_problem: str = ""

    def may_start(self, now: float) -> bool:
        """Not within `RESTART_GRACE_S` of losing one (a restart by hand must not race
        ours) nor `START_BACKOFF_S` of a failed start."""
        lost, failed = self.lost_at, self.failed_start_at
        return (lost is None or now - lost >= RESTART_GRACE_S) and (
            failed is None or now - failed >= START_BACKOFF_S
        )

    def problem(self, exc: DaemonStartError, *, may_start: bool, note: StopNote | None) -> str:
        if note is not None:
            return stopped_text(note)
        if may_start:
            self.failed_start_at = trio.current_time()
            return str(exc)
        if self.failed_start_at is not None:
            return self.last_problem
        return f"waiting for the daemon to come back (or {RESTART_GRACE_S:g} s to start a new one)"


async def run_client(
    *,
    home: Path,
    outgoing: trio.MemoryReceiveChannel[Outgoing],
    deliver: Callable[[Incoming], None],
    locate: Locate | None = None,
    connect: Connect = connect_endpoint,
    stopped: Stopped | None = None,
) -> None:
    """Keep one daemon connection alive until cancelled (the REPL exits)."""

    async def default_locate(http: HttpApi, may_start: bool) -> Endpoint:
        return await ensure_daemon(home, http, status=deliver, start=may_start)

    async def default_stopped() -> StopNote | None:
        return await trio.to_thread.run_sync(read_stopped, home)

    def unreadable(exc: FrameDecodeError) -> None:
        deliver(Status(text=f"unreadable frame from the daemon: {exc}", error=True))

    find = locate or default_locate
    stopped_note = stopped or default_stopped
    starts = _Starts()
    attempt = 0
    async with open_http(timeout_s=HTTP_TIMEOUT_S, verify=no_trust_roots()) as http:
        while True:
            problem = ""
            reason = ""
            session_up = False
            may_start = True
            note: StopNote | None = None
            try:
                may_start = starts.may_start(trio.current_time())
                if may_start and starts.connected_once:
                    note = await stopped_note()
                    may_start = note is None
                endpoint = await find(http, may_start)
                async with connect(
                    endpoint, http, on_frame=deliver, on_unreadable=unreadable
                ) as client:
                    _drain(outgoing)
                    deliver(
                        Connected(
                            url=endpoint.http_base,
                            daemon_version=client.welcome.daemon_version if client.welcome else "",
                            reconnect=starts.connected_once,
                        )
                    )
                    starts.connected_once = session_up = True
                    starts.last_problem = ""
                    attempt = 0
                    starts.lost_at = None
                    reason = await forward(client, outgoing, deliver)
            except AuthRefused as exc:
                problem = f"the daemon refused our token ({exc.message}); retrying"
            except DaemonStartError as exc:
                if note is None and starts.connected_once:
                    note = await stopped_note()
                problem = starts.problem(exc, may_start=may_start, note=note)
            except ClientError as exc:
                problem = f"cannot reach the daemon: {exc.message}"
            if session_up:
                deliver(Lost(reason=reason or problem))
                starts.lost_at = trio.current_time()
            elif problem and problem != starts.last_problem:
                deliver(Status(text=problem, error=True))
                starts.last_problem = problem
            await trio.sleep(_delay(attempt))
            attempt += 1
