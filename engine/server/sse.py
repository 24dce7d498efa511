"""``GET /v1/session/{id}/events``: a session's events as server-sent events (R8 B).

The stream opens with the comment line ``: subscribed`` once the subscription and the
passive listener are in place; from then on no event is missed. Recent events are
replayed first, then live ones follow, each as::

    id: <seq>
    event: <kind>
    task: <task hash>
    data: <the event as JSON, one line>

``task`` names the task the event belongs to (the WebSocket ``event`` frame carries it
as ``task_hash``); SSE readers ignore field names they do not know, so plain
``EventSource`` clients are unaffected, while the web dashboard uses it to put
questions, pause and cancel on the right task.

While the stream is open its client counts as a listener for the session's
confirmations (R8 B): a ``confirm`` event carries ``confirm_hash``, answered with
``POST …/confirm/{confirm_hash}``. A ``: keepalive`` comment every 15 s lets both
sides notice a dead peer. The stream ends when the client goes away or the daemon
shuts down; a subscriber that falls too far behind loses the oldest events and can
tell from the ``id`` gap. One that falls more than ``[server] subscriber_queue_bytes``
behind is dropped: the stream ends with the comment ``: dropped: <reason>`` (a new
request replays what the session still keeps). Every write to the client is
time-boxed at shutdown by the server (`agentrio.engine.server.sockets`).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Final

import trio
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from agentrio.engine.ids import check_session_id
from agentrio.engine.nursery_tasks import cancel_scope
from agentrio.engine.server.cluster import attached_events
from agentrio.engine.server.context import ServerContext
from agentrio.engine.sessions import SlowConsumer, Subscription
from agentrio.protocol.causes import Cause
from agentrio.protocol.codec import unstructure
from agentrio.protocol.events import Event

__all__ = ["KEEPALIVE_S", "event_stream", "events", "format_event"]

#: Seconds between keepalive comments on a quiet stream.
KEEPALIVE_S: Final = 15.0


def format_event(event: Event, task_hash: str = "") -> str:
    """One SSE message: ``id``, ``event``, ``task`` (when known) and a single-line
    ``data`` (JSON escapes any newline inside strings, so ``data`` never spans lines)."""
    data = json.dumps(unstructure(event), ensure_ascii=False, separators=(",", ":"))
    task = f"task: {task_hash}\n" if task_hash else ""
    return f"id: {event.seq}\nevent: {type(event).KIND}\n{task}data: {data}\n\n"


async def event_stream(ctx: ServerContext, session_id: str) -> AsyncIterator[str]:
    """The SSE text of one session, replay then live, until the client leaves (the
    response task is cancelled) or the daemon shuts down."""
    engine = ctx.engine
    session = engine.session(session_id)
    ctx.streams += 1
    try:
        async with attached_events(ctx.commands.cluster, session_id):
            with (
                engine.registry.listen("", session_id=session_id, passive=True),
                session.hub.subscribe(replay=True) as subscription,
            ):
                yield ": subscribed\n\n"
                while True:
                    try:
                        item = await _next_item(subscription, ctx.closing)
                    except* SlowConsumer as group:
                        item = f": dropped: {group.exceptions[0]}\n\n"
                    if isinstance(item, str) and item.startswith(": dropped"):
                        yield item
                        return
                    if item is _CLOSING:
                        return
                    if item is _QUIET:
                        yield ": keepalive\n\n"
                        continue
                    assert isinstance(item, tuple)
                    yield format_event(item[1], item[0])
    finally:
        ctx.streams -= 1


_CLOSING: Final = "closing"
_QUIET: Final = "quiet"


async def _next_item(subscription: Subscription, closing: trio.Event) -> tuple[str, Event] | str:
    """The next event, or `_QUIET` after `KEEPALIVE_S` without one, or `_CLOSING` once
    the daemon shuts down. No cancel scope is held across the generator's ``yield``;
    a cancelled `Subscription.receive` loses no event."""
    result: list[tuple[str, Event] | str] = []

    async def receive(scope: trio.CancelScope) -> None:
        result.append(await subscription.receive())
        cancel_scope(scope, Cause.SUPERSEDED)

    async def watch_closing(scope: trio.CancelScope) -> None:
        await closing.wait()
        result.append(_CLOSING)
        cancel_scope(scope, Cause.SHUTDOWN)

    with trio.move_on_after(KEEPALIVE_S):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(receive, nursery.cancel_scope)
            nursery.start_soon(watch_closing, nursery.cancel_scope)
    return result[0] if result else _QUIET


async def events(request: Request, ctx: ServerContext) -> Response:
    session_id = check_session_id(request.path_params["session_id"])
    return StreamingResponse(
        event_stream(ctx, session_id),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )
