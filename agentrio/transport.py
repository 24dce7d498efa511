"""The client's one I/O boundary: WebSocket frames and HTTP requests to the daemon.

Everything below this module (trio-websocket, httpx, sockets) raises its own errors;
everything above it sees only `agentrio.errors`. `map_errors` holds the whole
translation table, and it is the only place that catches a library's exception:

=====================================  ==========================  ======================
library error                          while connecting            once open / over HTTP
=====================================  ==========================  ======================
`OSError` (refused, unknown host, …)   `Unreachable`               `Disconnected`
``trio.TooSlowError``,                 `Timeout`                   `Timeout`
``trio_websocket.ConnectionTimeout``
``trio_websocket.ConnectionRejected``  `HandshakeError` (status)   —
other ``trio_websocket.HandshakeError``  `HandshakeError`          `Disconnected`
``trio.BrokenResourceError``,          `HandshakeError`            `Disconnected`
``trio.ClosedResourceError``
``trio_websocket.ConnectionClosed``    `Disconnected` (4401 at     `Disconnected` (close
                                       ``hello``: `AuthRefused`)   code and reason kept)
``httpx.TimeoutException``             —                           `Timeout`
other ``httpx.HTTPError``              —                           `Unreachable`
``httpx.InvalidURL``                   —                           `ClientError` ``bad_url``
=====================================  ==========================  ======================

The library error stays reachable as ``__cause__``.

Frames: any number of tasks may send at once (trio-websocket frames each message
synchronously and writes it under its own FIFO lock, so messages go out whole and in
call order; a second lock here only cost each send one more scheduler pass, bench
B1). Reads happen in one task per connection. A frame the daemon sends that does not
decode raises `protocol.FrameDecodeError` (the connection stays usable).

**Who gets the token.** Over the daemon's Unix socket (``unix_socket``, found through
the home, `agentrio.home.read_socket`) ``hello`` carries the token: only the daemon of
that home can listen there. Over TCP it never does: `open_frame_connection` sends a
nonce, checks the daemon's proof in ``challenge`` and only then proves itself
(`agentrio.protocol.challenge`); a process that took a freed port gets a nonce and nothing else,
and the connection fails with `AuthRefused`. The connection's `FrameConnection.http_token`
is what its HTTP calls should send: the token over the socket, the connection's own HTTP
key over TCP (valid while the WebSocket is open).

This module owns each connection's stream (TCP or Unix) and wraps it before trio-websocket
sees it, so the socket is closed on every way out — including a daemon that dies in
the middle of the opening handshake (where trio-websocket's own
``open_websocket_url`` keeps waiting, then leaks the socket) and a daemon that closes
the WebSocket first (trio-websocket 0.12 then leaves the client's socket open). No
private attribute of trio-websocket is touched.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager, suppress
from types import TracebackType
from typing import Any, Final, Literal, cast
from urllib.parse import urlsplit

import attrs
import httpx
import trio
import trio_websocket

from agentrio.errors import (
    AuthRefused,
    ClientError,
    Disconnected,
    HandshakeError,
    Timeout,
    Unreachable,
)
from agentrio.protocol.challenge import client_proof, daemon_proof, http_key, new_nonce, proof_ok
from agentrio.protocol.codec import MAX_MESSAGE_BYTES, decode_server_frame, dumps
from agentrio.protocol.errors import CLOSE_AUTH_FAILED
from agentrio.protocol.frames import PROTOCOL_VERSION, Challenge, Hello, Prove, ServerFrame, Welcome
from agentrio.protocol.groups import sole_exception

__all__ = [
    "CLOSE_TIMEOUT_S",
    "CONNECT_TIMEOUT_S",
    "HTTP_TIMEOUT_S",
    "FrameConnection",
    "HttpApi",
    "HttpReply",
    "map_errors",
    "open_frame_connection",
    "open_http",
    "open_websocket",
]

#: Seconds for the TCP connect plus the opening handshake and ``welcome``.
CONNECT_TIMEOUT_S: Final = 10.0
#: Seconds the closing handshake may take before the socket is closed anyway.
CLOSE_TIMEOUT_S: Final = 2.0
#: Seconds an HTTP request waits for the daemon unless told otherwise.
HTTP_TIMEOUT_S: Final = 30.0

Phase = Literal["connect", "open", "http"]


# ---------------------------------------------------------------------- errors


def _translate(exc: BaseException, phase: Phase, where: str) -> ClientError | None:
    """The `ClientError` standing for library error ``exc``; None for anything else
    (cancellation, our own errors, programming errors)."""
    detail = str(exc) or type(exc).__name__
    opening = phase == "connect"
    match exc:
        case trio_websocket.ConnectionClosed():
            code = exc.reason.code if exc.reason is not None else None
            text = (exc.reason.reason if exc.reason is not None else None) or ""
            message = text or (
                f"closed with code {code}" if code is not None else "the connection is closed"
            )
            return Disconnected(message, close_code=code, close_reason=text)
        case trio_websocket.ConnectionTimeout() | trio.TooSlowError() | httpx.TimeoutException():
            return Timeout(f"no answer in time ({detail})", where=where)
        case trio_websocket.ConnectionRejected():
            return HandshakeError(
                f"the daemon refused the upgrade with HTTP {exc.status_code}", where=where
            )
        case (
            trio_websocket.HandshakeError()
            | trio.BrokenResourceError()
            | (trio.ClosedResourceError())
        ):
            if opening:
                return HandshakeError(detail, where=where)
            return Disconnected(detail)
        case httpx.InvalidURL():
            return ClientError("bad_url", detail, where=where)
        case httpx.HTTPError():
            return Unreachable(detail, where=where)
        case OSError():
            return Unreachable(detail, where=where) if phase != "open" else Disconnected(detail)
    return None


class map_errors:
    """``with map_errors(phase, where):`` — library errors leaving the block become
    `ClientError`\\s (the table in the module docstring), raised ``from`` the original.

    An instance holds no state between uses, so a connection keeps one and enters it
    around every send and receive (no allocation per frame).
    """

    __slots__ = ("phase", "where")

    def __init__(self, phase: Phase, where: str = "") -> None:
        self.phase = phase
        self.where = where

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if exc is None:
            return
        translated = _translate(exc, self.phase, self.where)
        if translated is not None:
            raise translated from exc


# ---------------------------------------------------------------------- WebSocket


class FrameConnection:
    """A client's view of ``/v1/ws``: `send` frames, `receive` frames.

    Made by `open_frame_connection` (or `open_websocket`); wrapping an already open
    ``trio_websocket.WebSocketConnection`` yourself is allowed (its owner then closes
    its stream). Every failure is a `ClientError`: `Disconnected` once it closed.
    """

    def __init__(self, ws: trio_websocket.WebSocketConnection, *, where: str = "") -> None:
        self._ws = ws
        self._errors = map_errors("open", where)
        #: The daemon's ``welcome`` (None on a connection opened without ``hello``).
        self.welcome: Welcome | None = None
        #: The bearer value for HTTP calls next to this connection (module doc).
        self.http_token = ""

    async def send(self, frame: Any) -> None:
        with self._errors:
            await self._ws.send_message(dumps(frame))

    async def send_raw(self, text: str) -> None:
        """Send text as it is (tests use it to send malformed frames)."""
        with self._errors:
            await self._ws.send_message(text)

    async def receive(self) -> ServerFrame:
        """The next frame; `protocol.FrameDecodeError` when it does not decode,
        `Disconnected` once the connection closed and every frame was read."""
        with self._errors:
            message = await self._ws.get_message()
        return decode_server_frame(message)

    async def aclose(self, code: int = 1000, reason: str = "") -> None:
        """Start the closing handshake and wait for it (the stream's owner bounds
        it: see `open_websocket`)."""
        with self._errors:
            await self._ws.aclose(code, reason)

    @property
    def closed(self) -> bool:
        return self._ws.closed is not None


@asynccontextmanager
async def open_frame_connection(
    url: str,
    token: str,
    *,
    client: str = "script",
    origin: str | None = None,
    connect_timeout: float = CONNECT_TIMEOUT_S,
    unix_socket: str | None = None,
) -> AsyncIterator[FrameConnection]:
    """Connect to ``url`` (``ws://host:port/v1/ws``), say ``hello``, await ``welcome``.

    With ``unix_socket`` (an address from `agentrio.home.read_socket`) the connection
    goes there and ``url`` only names the path; over TCP the token never leaves this
    process (the mutual challenge of the module doc).

    Raises `Unreachable` when nothing listens, `Timeout` when the connect, the
    opening handshake and ``welcome`` take longer than ``connect_timeout`` seconds,
    `HandshakeError` when the daemon goes away during the handshake, `AuthRefused`
    when it refuses ``hello`` (4401) or cannot prove it knows the token,
    `Disconnected` when it closes before ``welcome``. Leaving is bounded (see
    `open_websocket`); the body's own exception leaves as itself.
    """
    deadline = trio.current_time() + connect_timeout
    async with _open(url, origin=origin, deadline=deadline, unix_socket=unix_socket) as conn:
        if unix_socket is not None:
            await conn.send(Hello(token=token, client=client, protocol=PROTOCOL_VERSION))
            conn.http_token = token
        else:
            conn.http_token = await _challenge(conn, token, client, deadline, url)
        await _welcome(conn, deadline, url)
        yield conn


@asynccontextmanager
async def open_websocket(
    url: str,
    *,
    origin: str | None = None,
    connect_timeout: float = CONNECT_TIMEOUT_S,
    unix_socket: str | None = None,
) -> AsyncIterator[FrameConnection]:
    """A WebSocket to ``url`` (over ``unix_socket`` when given) without ``hello``
    (tests of the daemon's first-frame checks and the benchmarks use it; everything
    else wants `open_frame_connection`).

    The socket is closed on every way out; the closing handshake gets
    `CLOSE_TIMEOUT_S`, then the stream is closed regardless.
    """
    deadline = trio.current_time() + connect_timeout
    async with _open(url, origin=origin, deadline=deadline, unix_socket=unix_socket) as c:
        yield c


async def _challenge(
    conn: FrameConnection, token: str, client: str, deadline: float, url: str
) -> str:
    """The mutual challenge: a nonce out, the daemon's proof checked, ours sent only
    then. Returns the connection's HTTP key."""
    nonce = new_nonce()
    await conn.send(Hello(nonce=nonce, client=client, protocol=PROTOCOL_VERSION))
    challenge = await _first_answer(conn, deadline, url)
    if not isinstance(challenge, Challenge):
        raise AuthRefused(f"expected challenge, got {type(challenge).TYPE}", where=url)
    if not proof_ok(challenge.proof, daemon_proof(token, nonce, challenge.nonce)):
        raise AuthRefused(
            "wrong token, or what answers here is not the daemon of this token: its proof "
            "does not match (the token was not sent)",
            where=url,
        )
    await conn.send(Prove(proof=client_proof(token, nonce, challenge.nonce)))
    return http_key(token, nonce, challenge.nonce)


async def _welcome(conn: FrameConnection, deadline: float, url: str) -> None:
    first = await _first_answer(conn, deadline, url)
    if not isinstance(first, Welcome):
        raise AuthRefused(f"expected welcome, got {type(first).TYPE}", where=url)
    conn.welcome = first


async def _first_answer(conn: FrameConnection, deadline: float, url: str) -> ServerFrame:
    """The daemon's next frame during authentication (4401 is `AuthRefused`)."""
    with trio.move_on_at(deadline) as waiting:
        try:
            return await conn.receive()
        except Disconnected as exc:
            if exc.close_code == CLOSE_AUTH_FAILED:
                raise AuthRefused(exc.close_reason or "authentication failed", where=url) from exc
            raise
    assert waiting.cancelled_caught
    raise Timeout("no welcome in time", where=url)


@asynccontextmanager
async def _open(
    url: str, *, origin: str | None, deadline: float, unix_socket: str | None = None
) -> AsyncIterator[FrameConnection]:
    parts = urlsplit(url)
    if parts.scheme != "ws" or parts.hostname is None:
        raise ValueError(f"expected ws://host:port/path, got {url!r}")
    if parts.port is None and unix_socket is None:
        raise ValueError(f"expected ws://host:port/path, got {url!r}")
    host = parts.hostname if parts.port is None else f"{parts.hostname}:{parts.port}"
    headers = [(b"Origin", origin.encode())] if origin else None
    where = url if unix_socket is None else f"unix:{unix_socket}"
    connecting = map_errors("connect", where)
    with connecting, trio.move_on_at(deadline) as timer:
        if unix_socket is not None:
            raw = await trio.open_unix_socket(unix_socket)
        else:
            assert parts.port is not None
            raw = await trio.open_tcp_stream(parts.hostname, parts.port)
    if timer.cancelled_caught:
        raise Timeout("no connection in time", where=where)
    stream = _WatchedStream(raw)
    # The body's own exception is kept out of the reader nursery (which would wrap it
    # in an ExceptionGroup) and raised as it is once the connection is closed.
    body_error: BaseException | None = None
    try:
        async with trio.open_nursery() as reader_nursery:
            ws = await _open_handshake(
                reader_nursery,
                stream,
                host=host,
                resource=parts.path or "/",
                headers=headers,
                deadline=deadline,
                where=url,
            )
            conn = FrameConnection(ws, where=url)
            try:
                try:
                    yield conn
                except BaseException as exc:
                    body_error = exc
            finally:
                with trio.CancelScope(shield=True):
                    with trio.move_on_after(CLOSE_TIMEOUT_S), suppress(ClientError):
                        await conn.aclose()
                    await stream.aclose()  # ends the reader task: the nursery can exit
    except BaseExceptionGroup as group:
        if body_error is None:
            sole = sole_exception(group, trio.Cancelled)
            if sole is None:
                raise
            raise (_translate(sole, "connect", url) or sole) from sole
    finally:
        with trio.CancelScope(shield=True):
            await stream.aclose()
    if body_error is not None:
        raise body_error


async def _open_handshake(
    reader_nursery: trio.Nursery,
    stream: _WatchedStream,
    *,
    host: str,
    resource: str,
    headers: list[tuple[bytes, bytes]] | None,
    deadline: float,
    where: str,
) -> trio_websocket.WebSocketConnection:
    """The client's opening handshake, ended early when the peer goes away."""
    opened: list[trio_websocket.WebSocketConnection] = []

    async def handshake(race: trio.CancelScope) -> None:
        with map_errors("connect", where):
            opened.append(
                await trio_websocket.wrap_client_stream(
                    reader_nursery,
                    # Typed for a SocketStream; trio-websocket uses only the Stream methods.
                    cast(trio.SocketStream, stream),
                    host,
                    resource,
                    extra_headers=headers,
                    max_message_size=MAX_MESSAGE_BYTES * 4,
                )
            )
        race.cancel()

    async def peer_gone(race: trio.CancelScope) -> None:
        await stream.peer_gone.wait()
        race.cancel()

    with trio.move_on_at(deadline) as timer:
        async with trio.open_nursery() as race:
            race.start_soon(handshake, race.cancel_scope)
            race.start_soon(peer_gone, race.cancel_scope)
    if opened:
        return opened[0]
    if timer.cancelled_caught:
        raise Timeout("no opening handshake in time", where=where)
    raise HandshakeError("the daemon closed the connection during the handshake", where=where)


class _WatchedStream(trio.abc.HalfCloseableStream):
    """A client's TCP stream that notes when the peer is gone (EOF or a broken socket),
    which trio-websocket does not report while its opening handshake is pending."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self._stream = stream
        self.peer_gone = trio.Event()

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self._stream.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self._stream.wait_send_all_might_not_block()

    async def send_eof(self) -> None:
        await self._stream.send_eof()

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        try:
            data = await self._stream.receive_some(max_bytes)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self.peer_gone.set()
            raise
        if not data:
            self.peer_gone.set()
        return bytes(data)

    async def aclose(self) -> None:
        await self._stream.aclose()


# ---------------------------------------------------------------------- HTTP


@attrs.frozen
class HttpReply:
    """A response of the daemon's HTTP API, read whole (any status: the caller
    decides what an error status means)."""

    status: int
    content: bytes = b""
    reason: str = ""

    def json(self) -> Any:
        """The body as JSON; raises `ValueError` when it is not."""
        return json.loads(self.content)

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", errors="replace")


class HttpApi:
    """Requests to the daemon's HTTP routes. Make one with `open_http`.

    Every transport failure is a `ClientError` (`Unreachable`, `Timeout`); an HTTP
    error status is not a failure here, it comes back in the `HttpReply`.
    """

    def __init__(self, http: httpx.AsyncClient) -> None:
        self._http = http

    async def request(
        self,
        method: str,
        url: str,
        *,
        params: Mapping[str, str] | None = None,
        json: Any = None,
        token: str | None = None,
        timeout_s: float | None = None,
    ) -> HttpReply:
        """``method url`` (a path below the base URL, or an absolute URL). ``token``
        replaces the bearer token given to `open_http`; ``timeout_s`` its timeout."""
        headers = {"Authorization": f"Bearer {token}"} if token is not None else None
        with map_errors("http", f"{method} {url}"):
            response = await self._http.request(
                method,
                url,
                params=params,
                json=json,
                headers=headers,
                timeout=timeout_s if timeout_s is not None else httpx.USE_CLIENT_DEFAULT,
            )
        return HttpReply(
            status=response.status_code, content=response.content, reason=response.reason_phrase
        )


@asynccontextmanager
async def open_http(
    base_url: str = "",
    *,
    token: str = "",
    timeout_s: float = HTTP_TIMEOUT_S,
    verify: ssl.SSLContext | bool = True,
    transport: httpx.AsyncBaseTransport | None = None,
    unix_socket: str | None = None,
) -> AsyncIterator[HttpApi]:
    """An `HttpApi` for the daemon at ``base_url`` (``http://host:port``; empty when
    every request names an absolute URL), sending ``token`` as its bearer token. A
    request waits at most ``timeout_s`` seconds per network step (connect, each read,
    each write).

    ``verify`` is the TLS context (the REPL passes one with no trust roots: it never
    speaks https, and loading the CA bundle costs its cold start); ``transport``
    replaces the network (tests pass ``httpx.MockTransport``); ``unix_socket`` sends
    every request to the daemon's Unix socket whatever host the URL names.
    """
    if unix_socket is not None and transport is None:
        if verify is True:
            # Plain HTTP over the socket: a context without trust roots keeps httpx from
            # loading the CA bundle (tens of milliseconds of every start).
            verify = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        transport = httpx.AsyncHTTPTransport(uds=unix_socket, verify=verify)
    headers = {"Authorization": f"Bearer {token}"} if token else None
    async with httpx.AsyncClient(
        base_url=base_url, headers=headers, timeout=timeout_s, verify=verify, transport=transport
    ) as http:
        yield HttpApi(http)
