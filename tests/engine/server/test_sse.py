"""``GET /v1/session/{id}/events``: SSE replay + live, and subscribers as listeners (R8 B)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

from protocol.codec import decode, structure
from protocol.events import Confirm, Done, Event, TaskStarted, ToolResult
from protocol.http import SendStarted
from tests.engine.server.conftest import Served


async def sse_events(lines: AsyncIterator[str]) -> AsyncIterator[tuple[str, str, Event]]:
    """``(id, event kind, decoded event)`` of each SSE message; comments skipped."""
    fields: dict[str, str] = {}
    async for line in lines:
        if line.startswith(":"):
            continue
        if line:
            name, _, value = line.partition(": ")
            fields[name] = value
            continue
        if fields:
            yield fields["id"], fields["event"], structure(json.loads(fields["data"]), Event)
            fields = {}


async def test_events_stream_and_confirm_over_http(served: Served, tmp_path: Path) -> None:
    """R8 B, §7: the stream opens with ``: subscribed``, replays recent events, follows
    live; its client counts as a listener, so a chat task's confirmation is offered
    (``confirm`` event) and answered with POST …/confirm (then 410)."""
    first = await served.http.post("/v1/send", json={"input": "hi", "session_id": "chat-e"})
    first_hash = decode(first.content, SendStarted).task_hash
    run = served.engine.find_run(first_hash, "chat-e")
    if run is not None:
        await run.wait_done()
    target = tmp_path / "sse"
    async with served.http.stream("GET", "/v1/session/chat-e/events") as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        lines = response.aiter_lines()
        assert await anext(lines) == ": subscribed"
        events = sse_events(lines)
        seq, kind, event = await anext(events)
        assert (kind, type(event), seq) == ("task_started", TaskStarted, str(event.seq))
        while not isinstance(event, Done):
            seq, kind, event = await anext(events)
        second = await served.http.post(
            "/v1/send", json={"input": f"run: touch {target}", "session_id": "chat-e"}
        )
        assert second.status_code == 202
        while not isinstance(event, Confirm):
            _, kind, event = await anext(events)
        assert kind == "confirm"
        url = f"/v1/session/chat-e/confirm/{event.confirm_hash}"
        answered = await served.http.post(url, json={"approve": True})
        assert (answered.status_code, answered.json()) == (200, {})
        while not isinstance(event, ToolResult):
            _, kind, event = await anext(events)
        assert event.ok
        again = await served.http.post(url, json={"approve": True})
        assert again.status_code == 410
    assert target.exists()
