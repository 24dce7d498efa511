"""The daemon's ASGI app: every HTTP route of SPEC §7 plus the ``/v1/ws`` endpoint.

One Starlette app, served by hypercorn's Trio worker on one port. Each HTTP route is a
thin translation: check the bearer token, decode the path and body into protocol
objects, call one method of the command layer (`agentrio.engine.server.commands`, shared with
``/v1/ws``), encode the reply body. Errors never escape as tracebacks:

| raised | status | ``code`` |
|---|---|---|
| ``Host`` not the daemon's (TCP) | 421 | ``bad_request`` |
| missing or wrong token | 401 | ``unauthorized`` |
| body over 1 MiB | 413 | ``too_large`` |
| `FrameDecodeError` (bad JSON, wrong field) | 400 | ``bad_request`` |
| `AgentrioError` | its ``status`` | its ``code`` |
| unknown route / method | 404 / 405 | ``not_found`` / ``bad_request`` |
| anything else | 500 | ``internal`` (details only in ``daemon.log``) |

``GET /`` and ``GET /static/{name}`` serve the web dashboard (``engine/server/static/``)
without a token: the page holds nothing secret and asks for the token itself, keeping
it in ``sessionStorage`` and sending it as a bearer header (no cookie exists, so no
other origin can ride one). Every static response carries a Content-Security-Policy
of ``default-src 'self'``, so even a rendering bug cannot run injected script.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Awaitable, Callable, Mapping
from contextlib import aclosing
from pathlib import Path
from typing import Any, Final, TypeVar

import attrs
import trio
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route, WebSocketRoute
from starlette.types import ASGIApp, Receive, Scope, Send

from agentrio.engine.errors import AgentrioError, BadRequest, Forbidden, NotFound
from agentrio.engine.ids import check_session_id, check_task_hash
from agentrio.engine.pending import Entry
from agentrio.engine.recent import DEFAULT_RECENT
from agentrio.engine.server.auth import bearer_ok, host_allowed
from agentrio.engine.server.commands import check_ask_id
from agentrio.engine.server.context import ServerContext
from agentrio.engine.server.ws_limits import note_stream
from agentrio.engine.store.base import Store, StoreError
from agentrio.protocol.asks import AckRequest, OpenAsks, answer_fields
from agentrio.protocol.causes import Cause
from agentrio.protocol.codec import MAX_MESSAGE_BYTES, decode, dumps
from agentrio.protocol.errors import ErrorCode, FrameDecodeError
from agentrio.protocol.frames import (
    BackgroundCancel,
    Cancel,
    Compact,
    ForgetAllowed,
    ListAllowed,
    ListLegs,
    ListPending,
    Reply,
    SetModel,
)
from agentrio.protocol.http import (
    ConfirmRequest,
    ErrorBody,
    ErrorDetail,
    Health,
    ModelRequest,
    ResumeAccepted,
    ResumeRequest,
    SandboxInfo,
    SendRequest,
    SendStarted,
    ShutdownAccepted,
    ShutdownRequest,
    StoreInfo,
)

__all__ = [
    "STATIC_DIR",
    "STATIC_HEADERS",
    "ServerContext",
    "create_app",
    "error_response",
    "json_response",
]

log = logging.getLogger("agentrio.server")

T = TypeVar("T")

#: Default ``limit`` of the history list.
HISTORY_LIMIT: Final = 50
#: The web dashboard's files (package data) and their content types.
STATIC_DIR: Final = Path(__file__).resolve().parent / "static"
_STATIC_TYPES: Final = {
    "index.html": "text/html; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
}
#: Headers of every dashboard file: no script, style or connection but the daemon's
#: own, no framing (clickjacking), no referrer, no caching of a stale page.
STATIC_HEADERS: Final = {
    "Content-Security-Policy": (
        "default-src 'self'; img-src 'self' data:; base-uri 'none'; "
        "form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


class _BodyTooLarge(Exception):
    pass


Handler = Callable[[Request, ServerContext], Awaitable[Response]]


def json_response(body: Any, status: int = 200) -> Response:
    """A JSON response of a protocol body (encoded by the one codec)."""
    return Response(dumps(body), status_code=status, media_type="application/json")


def error_response(
    status: int, code: str, message: str, headers: Mapping[str, str] | None = None
) -> Response:
    """``{"error": {"code", "message"}}`` with ``status``."""
    body = ErrorBody(error=ErrorDetail(code=code, message=message))
    return Response(dumps(body), status_code=status, media_type="application/json", headers=headers)


def _context(request: Request) -> ServerContext:
    ctx: ServerContext = request.app.state.ctx
    return ctx


def _endpoint(handler: Handler, *, auth: bool = True) -> Callable[[Request], Awaitable[Response]]:
    """Wrap ``handler`` with the bearer check and the error mapping of the module doc."""

    async def endpoint(request: Request) -> Response:
        response = await answer(request)
        if response.status_code == 413:
            # The rest of an oversized body is not worth reading: end the connection.
            response.headers["connection"] = "close"
        else:
            await _drain(request)
        return response

    async def answer(request: Request) -> Response:
        ctx = _context(request)
        if auth and not _authorized(request.headers.get("authorization"), ctx):
            return error_response(
                401,
                ErrorCode.UNAUTHORIZED,
                "missing or wrong bearer token (see <home>/token)",
                headers={"WWW-Authenticate": "Bearer"},
            )
        try:
            return await handler(request, ctx)
        except _BodyTooLarge:
            return error_response(
                413, ErrorCode.TOO_LARGE, f"request body larger than {MAX_MESSAGE_BYTES} bytes"
            )
        except FrameDecodeError as exc:
            return error_response(400, ErrorCode.BAD_REQUEST, str(exc))
        except AgentrioError as exc:
            return error_response(exc.status, exc.code, str(exc) or type(exc).__name__)
        except Exception:
            log.exception("%s %s failed", request.method, request.url.path)
            return error_response(500, ErrorCode.INTERNAL, "internal error (see daemon.log)")

    return endpoint


def _authorized(authorization: str | None, ctx: ServerContext) -> bool:
    """The token itself, or the HTTP key of an open challenge connection
    (`agentrio.protocol.challenge.http_key`)."""
    return bearer_ok(authorization, ctx.token) or any(
        bearer_ok(authorization, key) for key in ctx.http_keys
    )


class HostCheck:
    """ASGI middleware: a request over TCP whose ``Host`` is not one of the daemon's
    own names is refused before any route sees it (DNS rebinding, issue 29 finding
    10): HTTP 421 with the usual error body, a WebSocket upgrade HTTP 403. Requests on
    the Unix socket (no server address) are not checked. It also notes a WebSocket's
    hypercorn stream for `agentrio.engine.server.ws_limits`."""

    def __init__(self, app: ASGIApp, ctx: ServerContext) -> None:
        self._app = app
        self._ctx = ctx

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        ctx = self._ctx
        note_stream(scope, send)
        if (
            scope["type"] in ("http", "websocket")
            and scope.get("server") is not None
            and ctx.own_hosts
        ):
            host = Headers(scope=scope).get("host")
            if not host_allowed(host, ctx.own_hosts | frozenset(ctx.allowed_hosts)):
                ctx.refusals.warning(
                    "host", "refused a request for host %r (not this daemon's)", (host or "")[:200]
                )
                if scope["type"] == "websocket":
                    await send({"type": "websocket.close", "code": 1008})
                    return
                response = error_response(
                    421,
                    ErrorCode.BAD_REQUEST,
                    "this daemon answers only for its own host names (see [server] allowed_hosts)",
                    headers={"connection": "close"},
                )
                await response(scope, receive, send)
                return
        await self._app(scope, receive, send)


async def _read_body(request: Request, cls: type[T]) -> T:
    """Decode the request body into ``cls``; an empty body counts as ``{}``.

    The size is checked while reading, so a client cannot make the daemon buffer more
    than 1 MiB (a lying ``Content-Length`` included).
    """
    declared = request.headers.get("content-length", "")
    if declared.isascii() and declared.isdigit() and int(declared) > MAX_MESSAGE_BYTES:
        raise _BodyTooLarge
    chunks: list[bytes] = []
    size = 0
    async with aclosing(request.stream()) as stream:
        async for chunk in stream:
            size += len(chunk)
            if size > MAX_MESSAGE_BYTES:
                raise _BodyTooLarge
            chunks.append(chunk)
    data = b"".join(chunks).strip() or b"{}"
    result: T = decode(data, cls)
    return result


def _session_id(request: Request) -> str:
    return check_session_id(request.path_params["session_id"])


def _task_hash(request: Request) -> str:
    return check_task_hash(request.path_params["task_hash"])


# ---------------------------------------------------------------------- routes


async def health(request: Request, ctx: ServerContext) -> Response:
    engine = ctx.engine
    statistics = engine.statistics()
    statistics["connections"] = ctx.connections
    statistics["event_streams"] = ctx.streams
    statistics["asks"] = ctx.engine.ask_life.counts()
    cluster = ctx.commands.cluster
    if cluster is not None:
        statistics["cluster"] = attrs.asdict(cluster.statistics())
    sandbox = engine.services.sandbox.status
    body = Health(
        ok=True,
        version=ctx.version,
        uptime_s=round(time.monotonic() - engine.started_at, 3),
        tasks=engine.task_count,
        legs=int(statistics.get("legs_running", 0)),
        sandbox=SandboxInfo(active=sandbox.active, detail=sandbox.detail),
        store=await _store_info(engine.store),
        frontends=[status.info() for status in ctx.frontends],
        mcp=engine.mcp.infos() if engine.mcp is not None else [],
        statistics=statistics,
    )
    return json_response(body)


#: Seconds ``/v1/health`` waits for the store to answer before calling it down.
STORE_PING_S: Final = 2.0


async def _store_info(store: Store) -> StoreInfo:
    """Whether the store answers now: a store with a ``ping`` (Redis) is asked; the
    SQLite file, opened at start, is always there."""
    backend = str(getattr(store, "backend", "sqlite"))
    ping = getattr(store, "ping", None)
    if ping is None:
        return StoreInfo(backend=backend, ok=True)
    with trio.move_on_after(STORE_PING_S):
        try:
            await ping()
        except StoreError as exc:
            return StoreInfo(backend=backend, ok=False, detail=str(exc))
        return StoreInfo(backend=backend, ok=True)
    return StoreInfo(backend=backend, ok=False, detail=f"no answer within {STORE_PING_S:g} s")


async def shutdown(request: Request, ctx: ServerContext) -> Response:
    """``POST /v1/shutdown``: 202 at once, then the daemon stops as on SIGTERM (R53).
    The reply says what the stop ends; a repeated request answers the same way."""
    body = await _read_body(request, ShutdownRequest)
    engine = ctx.engine
    legs = int(engine.statistics().get("legs_running", 0))
    reply = ShutdownAccepted(pid=os.getpid(), tasks=engine.task_count, legs=legs)
    if not ctx.shutdown_requested.is_set():
        ctx.shutdown_reason = (body.reason or "POST /v1/shutdown")[:120]
        ctx.shutdown_requested.set()
    return json_response(reply, 202)


async def send(request: Request, ctx: ServerContext) -> Response:
    """``POST /v1/send``: 202 started/resumed, 200 steered (R35)."""
    result = await ctx.commands.send(await _read_body(request, SendRequest))
    return json_response(result, 202 if isinstance(result, SendStarted) else 200)


async def cancel(request: Request, ctx: ServerContext) -> Response:
    """Cancel with cause ``user_canceled`` (R40); a task not running in this process
    is a stale cancel (`Commands.cancel`)."""
    frame = Cancel(session_id=_session_id(request), task_hash=_task_hash(request))
    return json_response(await ctx.commands.cancel(frame, receipt=True))


async def pause(request: Request, ctx: ServerContext) -> Response:
    """Cancel with cause ``paused`` (R41): the run stops, its pending record stays
    resumable. An addition to SPEC §7 (whose cancel route is ``user_canceled`` only),
    so the web dashboard can pause like the REPL's popup."""
    frame = Cancel(
        session_id=_session_id(request), task_hash=_task_hash(request), cause=Cause.PAUSED
    )
    return json_response(await ctx.commands.cancel(frame, receipt=True))


def _path_ask(request: Request, *, windowed: bool = True) -> tuple[str, Callable[[Entry], None]]:
    """The ask id a ``…/{confirm_hash}`` path names, and the check that an entry is of
    the session it names (404 otherwise; 403 for a REPL window's unless ``windowed``)."""
    session_id = _session_id(request)
    confirm_hash = check_ask_id(request.path_params["confirm_hash"])

    def authorize(entry: Entry) -> None:
        if entry.request.session_id != session_id:
            raise NotFound(f"no confirmation {confirm_hash} in session {session_id}")
        if entry.request.windowed and not windowed:
            raise Forbidden(f"ask {confirm_hash} belongs to a REPL window")

    return confirm_hash, authorize


async def confirm(request: Request, ctx: ServerContext) -> Response:
    """Answer one ask of the session the path names (R8 B); 410 when it is already
    resolved or gone, 404 when it belongs to another session, 403 for a ``password``
    (R7: the REPL's alone; the ask stays open)."""
    confirm_hash, authorize = _path_ask(request)
    body = await _read_body(request, ConfirmRequest)
    await ctx.commands.reply(
        _reply_of(confirm_hash, body), authorize=authorize, sessions=(_session_id(request),)
    )
    return json_response({})


async def acknowledge(request: Request, ctx: ServerContext) -> Response:
    """``POST …/ack/{confirm_hash}``: a front-end over HTTP (the page) drew the ask
    (issue 34, R97); 404 when it belongs to another session, 403 for a REPL window's.
    An ask already gone answers 200 with nothing to record, as the ``ack`` frame."""
    confirm_hash, authorize = _path_ask(request, windowed=False)
    body = await _read_body(request, AckRequest)
    await ctx.commands.acknowledge(
        confirm_hash, body.frontend, authorize=authorize, sessions=(_session_id(request),)
    )
    return json_response({})


async def open_asks(request: Request, ctx: ServerContext) -> Response:
    """``GET …/asks``: the session's open asks and their state (issue 34): waiting,
    shown on which front-end, acknowledged, late. Asks of its tasks running on
    another daemon are that daemon's to list."""
    return json_response(OpenAsks(asks=ctx.engine.ask_life.open(_session_id(request))))


def _reply_of(ask_id: str, body: ConfirmRequest) -> Reply:
    """The ``reply`` frame a confirm body is the HTTP form of."""
    return Reply(id=ask_id, **answer_fields(body))


async def pending_tasks(request: Request, ctx: ServerContext) -> Response:
    return json_response(await ctx.commands.pending(ListPending(session_id=_session_id(request))))


async def pending_by_origin(request: Request, ctx: ServerContext) -> Response:
    """``GET /v1/pending?origin=cli-``: the resumable tasks of every session of one
    origin, each naming its session (the HTTP form of ``list_pending`` by origin)."""
    origin = request.query_params.get("origin", "")
    return json_response(await ctx.commands.pending(ListPending(origin=origin)))


async def sessions(request: Request, ctx: ServerContext) -> Response:
    """``GET /v1/sessions?origin=chat-``: the origin's sessions that started a task."""
    return json_response(await ctx.commands.sessions(request.query_params.get("origin", "")))


async def questions(request: Request, ctx: ServerContext) -> Response:
    found = await ctx.commands.questions(_session_id(request), _task_hash(request))
    return json_response(found)


async def resume(request: Request, ctx: ServerContext) -> Response:
    """202 with the (possibly new, R36) task hash; 409 when claimed (R37); 404 unknown."""
    session_id, task_hash = _session_id(request), _task_hash(request)
    body = await _read_body(request, ResumeRequest)
    run = await ctx.commands.resume(session_id, task_hash, body)
    return json_response(ResumeAccepted(task_hash=run.task_hash), 202)


async def drop(request: Request, ctx: ServerContext) -> Response:
    await ctx.commands.drop(_session_id(request), _task_hash(request))
    return Response(status_code=204)


async def history(request: Request, ctx: ServerContext) -> Response:
    session_id = _session_id(request)
    keyword = request.query_params.get("keyword", "")
    raw_limit = request.query_params.get("limit", "") or str(HISTORY_LIMIT)
    if not (raw_limit.isascii() and raw_limit.isdigit()):  # "²".isdigit() is True
        raise BadRequest(f"limit: expected an integer, got {raw_limit[:32]!r}")
    found = await ctx.commands.history(session_id, keyword=keyword, limit=int(raw_limit))
    return json_response(found)


async def history_record(request: Request, ctx: ServerContext) -> Response:
    record = await ctx.commands.history_record(_session_id(request), _task_hash(request))
    return json_response(record)


async def recent(request: Request, ctx: ServerContext) -> Response:
    """The session's last exchanges, oldest first (issue 31): what a window reopened on
    it prints first. ``limit`` 0-50, default 5."""
    raw_limit = request.query_params.get("limit", "") or str(DEFAULT_RECENT)
    if not (raw_limit.isascii() and raw_limit.isdigit()):
        raise BadRequest(f"limit: expected an integer, got {raw_limit[:32]!r}")
    return json_response(await ctx.commands.recent(_session_id(request), int(raw_limit)))


async def legs(request: Request, ctx: ServerContext) -> Response:
    """The session's queued and running background legs (R44, the ``list_legs`` frame
    over HTTP)."""
    return json_response(ctx.commands.legs(ListLegs(session_id=_session_id(request))))


async def cancel_leg(request: Request, ctx: ServerContext) -> Response:
    """Cancel one leg, or every leg of the session with ``all`` (R44); 404 unknown."""
    frame = BackgroundCancel(session_id=_session_id(request), leg_id=request.path_params["leg_id"])
    return json_response(ctx.commands.cancel_leg(frame))


async def allowed(request: Request, ctx: ServerContext) -> Response:
    """The home's remembered rules (R76, R92)."""
    frame = ListAllowed(session_id=_session_id(request))
    return json_response(await ctx.commands.allowed(frame))


async def session_model(request: Request, ctx: ServerContext) -> Response:
    """The session's model (``GET``), or choose it (``PUT`` with a `ModelRequest`
    body; 400 naming the choices for an unknown name) (issue 31)."""
    name = ""
    if request.method == "PUT":
        name = (await _read_body(request, ModelRequest)).name or "default"
    return json_response(ctx.commands.model(SetModel(session_id=_session_id(request), name=name)))


async def compact(request: Request, ctx: ServerContext) -> Response:
    """Compact the session's conversation now: 200 with how many earlier exchanges
    were folded into its summary (issue 31 item 3)."""
    frame = Compact(session_id=_session_id(request))
    return json_response(await ctx.commands.compact(frame))


async def forget_allowed(request: Request, ctx: ServerContext) -> Response:
    """Remove one remembered rule (or ``all``): 200 with the rules left and those
    removed, 404 for an unknown rule (R76, R92)."""
    frame = ForgetAllowed(session_id=_session_id(request), rule_id=request.path_params["rule_id"])
    return json_response(await ctx.commands.forget_allowed(frame))


async def static_file(request: Request, ctx: ServerContext) -> Response:
    """``GET /`` (the page) and ``GET /static/{name}``; unknown names are 404."""
    name = request.path_params.get("name", "index.html")
    media_type = _STATIC_TYPES.get(name)
    if media_type is None:
        raise NotFound(f"no static file {name[:64]!r}")
    content = await trio.Path(STATIC_DIR / name).read_bytes()
    return Response(content, media_type=media_type, headers=STATIC_HEADERS)


#: How long an answer waits for the unread rest of a request body.
DRAIN_WAIT_S: Final = 2.0


async def _drain(request: Request) -> None:
    """Read and drop an unread request body (at most 1 MiB), so the keep-alive
    connection can serve the client's next request: answering before the body is
    consumed (a 401, or a 404 or 405 from routing) left hypercorn closing the
    connection under the next request. A client that announced a body and does not
    send it gets its answer after `DRAIN_WAIT_S` rather than never."""
    size = 0
    with trio.move_on_after(DRAIN_WAIT_S):
        try:
            async with aclosing(request.stream()) as stream:
                async for chunk in stream:
                    size += len(chunk)
                    if size > MAX_MESSAGE_BYTES:
                        return
        except (ClientDisconnect, RuntimeError):  # gone, or the body was read already
            return


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    await _drain(request)
    code = ErrorCode.NOT_FOUND if exc.status_code == 404 else ErrorCode.BAD_REQUEST
    if exc.status_code == 404:
        message = f"no route {request.method} {request.url.path}"
    else:
        message = str(exc.detail)
    return error_response(exc.status_code, code, message, headers=exc.headers)


def create_app(ctx: ServerContext) -> Starlette:
    """The ASGI app serving ``ctx.engine`` (see the module doc for the error mapping)."""
    from agentrio.engine.server.sse import events
    from agentrio.engine.server.ws import websocket_endpoint

    session = "/v1/session/{session_id}"
    task = session + "/task/{task_hash}"
    routes: list[BaseRoute] = [
        Route("/v1/health", _endpoint(health, auth=False), methods=["GET"]),
        Route("/v1/send", _endpoint(send), methods=["POST"]),
        Route("/v1/shutdown", _endpoint(shutdown), methods=["POST"]),
        Route("/v1/pending", _endpoint(pending_by_origin), methods=["GET"]),
        Route("/v1/sessions", _endpoint(sessions), methods=["GET"]),
        Route(session + "/cancel/{task_hash}", _endpoint(cancel), methods=["POST"]),
        Route(session + "/pause/{task_hash}", _endpoint(pause), methods=["POST"]),
        Route(session + "/confirm/{confirm_hash}", _endpoint(confirm), methods=["POST"]),
        Route(session + "/events", _endpoint(events), methods=["GET"]),
        Route(session + "/asks", _endpoint(open_asks), methods=["GET"]),
        Route(session + "/ack/{confirm_hash}", _endpoint(acknowledge), methods=["POST"]),
        Route(session + "/task", _endpoint(pending_tasks), methods=["GET"]),
        Route(session + "/task/history", _endpoint(history), methods=["GET"]),
        Route(session + "/recent", _endpoint(recent), methods=["GET"]),
        Route(task, _endpoint(drop), methods=["DELETE"]),
        Route(task + "/questions", _endpoint(questions), methods=["GET"]),
        Route(task + "/resume", _endpoint(resume), methods=["POST"]),
        Route(task + "/history", _endpoint(history_record), methods=["GET"]),
        Route(session + "/legs", _endpoint(legs), methods=["GET"]),
        Route(session + "/legs/{leg_id}/cancel", _endpoint(cancel_leg), methods=["POST"]),
        Route(session + "/allowed", _endpoint(allowed), methods=["GET"]),
        Route(session + "/model", _endpoint(session_model), methods=["GET", "PUT"]),
        Route(session + "/compact", _endpoint(compact), methods=["POST"]),
        Route(session + "/allowed/{rule_id}", _endpoint(forget_allowed), methods=["DELETE"]),
        Route("/", _endpoint(static_file, auth=False), methods=["GET"]),
        Route("/static/{name}", _endpoint(static_file, auth=False), methods=["GET"]),
        WebSocketRoute("/v1/ws", websocket_endpoint),
    ]
    app = Starlette(
        routes=routes,
        exception_handlers={HTTPException: _http_error},
        middleware=[Middleware(HostCheck, ctx=ctx)],
    )
    app.state.ctx = ctx
    return app
