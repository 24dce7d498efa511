"""``GET /v1/session/{id}/events``: SSE replay + live, and subscribers as listeners (R8 B)."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from pathlib import Path

import trio

from agentrio.protocol.codec import decode, structure
from agentrio.protocol.events import Confirm, Done, Event, TaskStarted, ToolResult
from agentrio.protocol.http import SendStarted
from tests.engine.server.conftest import Served


async def sse_events(lines: AsyncIterator[str]) -> AsyncGenerator[tuple[str, str, Event]]:
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


class RawEventStream:
    """A plain-socket SSE client (httpx's nested body iterators cannot all be closed
    under Trio's async-generator hooks): status, headers, then de-chunked lines."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self._stream = stream
        self._raw = b""
        self._data = b""
        self.status = 0
        self.headers: dict[str, str] = {}

    async def _more(self) -> None:
        chunk = await self._stream.receive_some(65536)
        assert chunk, "stream ended"
        self._raw += chunk

    async def start(self, path: str, token: str) -> None:
        await self._stream.send_all(
            f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Authorization: Bearer {token}\r\n\r\n".encode()
        )
        while b"\r\n\r\n" not in self._raw:
            await self._more()
        head, _, self._raw = self._raw.partition(b"\r\n\r\n")
        status_line, *header_lines = head.decode().split("\r\n")
        self.status = int(status_line.split(" ")[1])
        for line in header_lines:
            name, _, value = line.partition(":")
            self.headers[name.strip().lower()] = value.strip()
        assert self.headers["transfer-encoding"] == "chunked"

    async def lines(self) -> AsyncGenerator[str]:
        while True:
            while b"\n" not in self._data:
                size_line, sep, rest = self._raw.partition(b"\r\n")
                size = int(size_line, 16) if sep else -1
                if size < 0 or len(rest) < size + 2:
                    await self._more()
                    continue
                self._data += rest[:size]
                self._raw = rest[size + 2 :]
            line, _, self._data = self._data.partition(b"\n")
            yield line.decode()


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
    async with await trio.open_tcp_stream("127.0.0.1", served.server.port) as stream:
        client = RawEventStream(stream)
        await client.start("/v1/session/chat-e/events", served.token)
        assert client.status == 200
        assert client.headers["content-type"].startswith("text/event-stream")
        async with aclosing(client.lines()) as lines, aclosing(sse_events(lines)) as events:
            assert await anext(lines) == ": subscribed"
            await answer_one_confirm(served, events, target)
    assert target.exists()


async def answer_one_confirm(
    served: Served, events: AsyncGenerator[tuple[str, str, Event]], target: Path
) -> None:
    """Replay of the first task, then a live confirmation answered over HTTP."""
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
