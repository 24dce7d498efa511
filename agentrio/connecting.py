"""Opening a `Client`: `connect` (find the daemon, open the WebSocket and HTTP, start
the reader) and `open_client` (the same over a connection you already have).

Both run the block inside the reader's nursery but raise the block's own exception
as it is, so ``except ClientError:`` around ``async with connect()`` works (a
nursery would wrap it in an ExceptionGroup).
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Final
from urllib.parse import urlsplit

import trio

from agentrio.client import Client, Connection
from agentrio.errors import ClientError, Disconnected
from agentrio.home import default_home, read_address, read_socket, read_token
from agentrio.inbox import Limits
from agentrio.protocol.errors import FrameDecodeError
from agentrio.protocol.frames import ServerFrame
from agentrio.transport import HTTP_TIMEOUT_S, HttpApi, open_frame_connection, open_http

__all__ = ["CLIENT_NAME", "LOCAL_URL", "connect", "new_window_hash", "open_client"]

#: How the client names itself in ``hello``.
CLIENT_NAME: Final = "agentrio-client/1"


@asynccontextmanager
async def open_client(
    conn: Connection,
    http: HttpApi,
    *,
    ws_url: str = "",
    base_url: str = "",
    token: str = "",
    limits: Limits | None = None,
    on_frame: Callable[[ServerFrame], None] | None = None,
    on_unreadable: Callable[[FrameDecodeError], None] | None = None,
) -> AsyncIterator[Client]:
    """A `Client` over an open connection (after ``welcome``) and an `HttpApi` for the
    daemon at ``base_url``: starts its reader task, and on exit stops it (the caller
    closes ``conn`` and ``http``).

    ``limits`` bounds what the client buffers (`agentrio.inbox`). ``on_frame`` is
    called by the reader task with every frame before the client routes it,
    ``on_unreadable`` with every frame it could not decode; both must return at once
    (they run on the connection's only reader).
    """
    body_error: BaseException | None = None
    async with trio.open_nursery() as nursery:
        client = Client(
            conn,
            http,
            nursery,
            ws_url=ws_url,
            base_url=base_url,
            token=token,
            limits=limits,
            on_frame=on_frame,
            on_unreadable=on_unreadable,
        )
        nursery.start_soon(client._read_loop)
        try:
            yield client
        except BaseException as exc:
            body_error = exc
        finally:
            client._shut(Disconnected("the client closed the connection"))
            nursery.cancel_scope.cancel()
    if body_error is not None:
        raise body_error


@asynccontextmanager
async def connect(
    url: str | None = None,
    token: str | None = None,
    *,
    home: str | Path | None = None,
    client_name: str = CLIENT_NAME,
    unix_socket: str | None = None,
    limits: Limits | None = None,
    http: HttpApi | None = None,
    http_timeout_s: float = HTTP_TIMEOUT_S,
    on_frame: Callable[[ServerFrame], None] | None = None,
    on_unreadable: Callable[[FrameDecodeError], None] | None = None,
) -> AsyncIterator[Client]:
    """Connect to the daemon and say ``hello``; the `Client` lives inside the block.

    ``url`` (``http://host:port`` or ``ws://host:port/v1/ws``) and ``token`` default to
    the home's ``daemon.json`` and ``token``. Found through the home, the daemon is
    reached over its Unix socket ``<home>/daemon.sock`` (``unix_socket``: an address
    of `agentrio.home.read_socket`); over TCP the token itself is never sent, the
    ``hello`` is the mutual challenge (`agentrio.transport`, docs/security.md). An
    ``http`` given for a Unix socket is not used (HTTP goes over the socket too).
    Raises `DaemonNotFound`, `Unreachable`
    (nothing listens; its kinds `Timeout` and `HandshakeError`: it did not answer)
    or `AuthRefused` (wrong token). ``http`` reuses an `HttpApi` (else one is opened
    for the block); ``limits``, ``on_frame`` and ``on_unreadable`` as in
    `open_client`.

    On exit the connection closes; the daemon then cancels the runs it started with
    cause ``disconnected`` (kept resumable, R43) and fails its open asks (R6).
    """
    if url is None or token is None:  # read from the home: small blocking file reads
        where = await trio.to_thread.run_sync(_resolve, url, token, home, unix_socket)
    else:
        where = _resolve(url, token, home, unix_socket)
    ws_url, base_url, the_token, socket_address = where
    async with AsyncExitStack() as stack:
        conn = await stack.enter_async_context(
            open_frame_connection(ws_url, the_token, client=client_name, unix_socket=socket_address)
        )
        if http is None or socket_address is not None:
            http = await stack.enter_async_context(
                open_http(
                    base_url,
                    token=conn.http_token,
                    timeout_s=http_timeout_s,
                    unix_socket=socket_address,
                )
            )
        client = await stack.enter_async_context(
            open_client(
                conn,
                http,
                ws_url=ws_url,
                base_url=base_url,
                token=conn.http_token,
                limits=limits,
                on_frame=on_frame,
                on_unreadable=on_unreadable,
            )
        )
        yield client


def _urls(url: str) -> tuple[str, str]:
    """``(ws_url, base_url)`` of a ``ws://…/v1/ws`` or ``http://host:port`` address."""
    parts = urlsplit(url)
    if parts.scheme in ("ws", "wss"):
        http_scheme = "https" if parts.scheme == "wss" else "http"
        return url, f"{http_scheme}://{parts.netloc}"
    if parts.scheme in ("http", "https"):
        ws_scheme = "wss" if parts.scheme == "https" else "ws"
        return f"{ws_scheme}://{parts.netloc}/v1/ws", f"{parts.scheme}://{parts.netloc}"
    raise ClientError("bad_url", f"expected ws://host:port/v1/ws or http://host:port, got {url!r}")


#: The URL of requests over the Unix socket (the daemon does not check its host there).
LOCAL_URL: Final = "http://localhost"


def _resolve(
    url: str | None, token: str | None, home: str | Path | None, unix_socket: str | None
) -> tuple[str, str, str, str | None]:
    """``(ws_url, base_url, token, unix socket address)``, read from the home where
    not given (blocking then, and only then): with no ``url``, the home's Unix socket
    when its ``daemon.json`` names one, else its TCP address."""
    if url is None or token is None:
        the_home = Path(home).expanduser() if home is not None else default_home()
        if url is None and unix_socket is None:
            unix_socket = read_socket(the_home)
            if unix_socket is None:
                host, port = read_address(the_home)
                url = f"http://{host}:{port}"
        if token is None:
            token = read_token(the_home)
    ws_url, base_url = _urls(url or LOCAL_URL)
    return ws_url, base_url, token, unix_socket


def new_window_hash() -> str:
    """A random window hash, for scripts that want asks of ``cli-`` runs (R5)."""
    return f"w{secrets.token_hex(8)}"
