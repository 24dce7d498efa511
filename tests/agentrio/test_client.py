"""The client over a scripted fake daemon (no sockets): routing, the control-call
path, what a closed connection does to everything waiting, bounded inboxes that never
stall the reader, and the REPL's observer mode.

The fake answers each control frame the way the daemon does when it carries a
``request_id``: its list frame for a query, an ``error`` naming it, or ``ok``."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import httpx
import pytest
import trio
import trio.testing

from agentrio import Client, ClientError, Disconnected, Limits, StartFailed, open_client
from agentrio.protocol.events import Done, Text, Workdir
from agentrio.protocol.frames import (
    Accepted,
    Ask,
    Cancel,
    DoneFrame,
    ErrorFrame,
    EventFrame,
    Listen,
    ListPending,
    Ok,
    PendingList,
    Run,
    ServerFrame,
    Welcome,
    Withdrawn,
)
from agentrio.transport import open_http

HASH = "a" * 32


class FakeDaemon:
    """A frame connection whose far side is this test: frames it 'sends' are pushed
    with `push`; control frames are answered as the daemon answers them."""

    def __init__(self) -> None:
        self.sent: list[Any] = []
        self.welcome: Welcome | None = Welcome(protocol=1, daemon_version="t")
        self._send, self._receive = trio.open_memory_channel[ServerFrame | None](1000)
        self.errors: dict[type, ErrorFrame] = {}
        self.gone = False

    def push(self, *frames: ServerFrame) -> None:
        for frame in frames:
            self._send.send_nowait(frame)

    def close(self) -> None:
        self._send.send_nowait(None)

    async def send(self, frame: Any) -> None:
        await trio.lowlevel.checkpoint()
        if self.gone:
            raise Disconnected("closed")
        self.sent.append(frame)
        request_id = getattr(frame, "request_id", "")
        if not request_id or isinstance(frame, Run):
            return
        if type(frame) in self.errors:
            self.push(attrs.evolve(self.errors[type(frame)], ref=request_id))
        elif isinstance(frame, ListPending):
            self.push(PendingList(session_id=frame.session_id, tasks=[], request_id=request_id))
        else:
            self.push(Ok(request_id=request_id))

    async def receive(self) -> ServerFrame:
        item = await self._receive.receive()
        if item is None:
            self.gone = True
            raise Disconnected("daemon shutting down", close_code=4001)
        return item


@asynccontextmanager
async def client_of(
    daemon: FakeDaemon,
    *,
    limits: Limits | None = None,
    on_frame: Callable[[ServerFrame], None] | None = None,
) -> AsyncIterator[Client]:
    def no_http(request: httpx.Request) -> httpx.Response:
        raise AssertionError("no HTTP here")

    async with (
        open_http(transport=httpx.MockTransport(no_http)) as http,
        open_client(daemon, http, limits=limits, on_frame=on_frame) as client,
    ):
        yield client


def ask(ask_id: str, session: str = "chat-x", task_hash: str = "b" * 32) -> Ask:
    return Ask(id=ask_id, kind="tool_confirm", session_id=session, task_hash=task_hash)


def text(seq: int, session: str = "cli-1", task_hash: str = HASH) -> EventFrame:
    return EventFrame(session_id=session, task_hash=task_hash, event=Text(seq=seq, at=0, text="x"))


async def test_control_calls_return_their_list_or_raise_their_error() -> None:
    """§8: a control request is answered by name: a list is its result, an ``ok``
    returns, an ``error`` raises `ClientError` with the protocol's code."""
    daemon = FakeDaemon()
    daemon.errors[Cancel] = ErrorFrame(code="not_found", message="no such task")
    async with client_of(daemon) as client:
        assert await client.pending("cli-1") == []
        with pytest.raises(ClientError) as info:
            await client.cancel(HASH)
        assert (info.value.code, info.value.message) == ("not_found", "no such task")
        await client.listen("chat-")
    assert [type(f) for f in daemon.sent] == [ListPending, Cancel, Listen]
    assert [f.request_id for f in daemon.sent] == [
        "agentrio-control-1",
        "agentrio-control-2",
        "agentrio-control-3",
    ]


async def test_asks_go_to_the_run_then_the_longest_prefix_then_client_asks() -> None:
    """R2, R8: an ask of a run started here goes to that run; another goes to the
    listener with the longest matching prefix, else to `Client.asks`; a withdrawn
    notice follows its ask."""
    daemon = FakeDaemon()
    async with client_of(daemon) as client:
        short, long = await client.listen("chat-"), await client.listen("chat-x")
        daemon.push(Accepted(request_id="r1", session_id="cli-1", task_hash=HASH))
        run = await client.run("cli-1", "hi")
        daemon.push(
            ask("1", "cli-1", HASH),
            ask("2", "chat-xy"),
            ask("3", "chat-a"),
            ask("4", "tg-1"),
            Withdrawn(id="2", reason="answered elsewhere"),
        )
        await trio.testing.wait_all_tasks_blocked()
        assert run.asks().receive_nowait() == ask("1", "cli-1", HASH)
        assert [long.receive_nowait(), long.receive_nowait()] == [
            ask("2", "chat-xy"),
            Withdrawn(id="2", reason="answered elsewhere"),
        ]
        assert short.receive_nowait() == ask("3", "chat-a")
        assert client.asks().receive_nowait() == ask("4", "tg-1")


async def test_a_closed_connection_reaches_everything_waiting() -> None:
    """R43: when the daemon closes, a run's `wait_done`, a control call and later
    calls raise `Disconnected` (close code kept); iterators end; `wait_closed` says why."""
    daemon = FakeDaemon()
    async with client_of(daemon) as client:
        listener = await client.listen("")
        daemon.push(Accepted(request_id="r1", session_id="cli-1", task_hash=HASH))
        run = await client.run("cli-1", "hi")
        daemon.close()
        with pytest.raises(Disconnected) as info:
            await run.wait_done()
        assert info.value.close_code == 4001
        assert [notice async for notice in listener] == []
        with pytest.raises(Disconnected):
            await client.pending("cli-1")
        with pytest.raises(Disconnected):
            await client.send_frame(ListPending(session_id="cli-1"))
        assert await client.wait_closed() is info.value


async def test_a_run_refused_before_acceptance_is_start_failed() -> None:
    """R37: a ``done`` before ``accepted`` raises `StartFailed` with its error."""
    daemon = FakeDaemon()
    daemon.push(
        DoneFrame(
            request_id="p1", task_hash="", status="failed", error="[Conflict] pending task: running"
        )
    )
    async with client_of(daemon) as client:
        with pytest.raises(StartFailed) as info:
            await client.resume("cli-1", HASH)
    assert info.value.code == "conflict"


async def test_an_unread_listener_never_stalls_the_connection(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A listener nobody reads keeps its newest asks up to its limit and counts the
    rest; meanwhile the reader goes on, so a control call still gets its answer (no
    deadlock), and the first drop is logged."""
    daemon = FakeDaemon()
    async with client_of(daemon, limits=Limits(notices=3)) as client:
        listener = await client.listen("chat-")
        daemon.push(*(ask(str(n)) for n in range(10)))
        with caplog.at_level(logging.WARNING, logger="agentrio.client"):
            assert await client.pending("cli-1") == []
        stats = listener.statistics()
        assert (stats.buffered, stats.dropped, stats.peak_buffered) == (3, 7, 3)
        assert [listener.receive_nowait().id for _ in range(3)] == ["7", "8", "9"]
    assert "listener 'chat-' is full (3): dropped its oldest item" in caplog.text


async def test_subscriptions_and_runs_keep_a_bounded_number_of_events() -> None:
    """A subscription drops its oldest events past its limit (copies of one event
    counted once); a run keeps its newest events, counts the dropped, and a cursor
    continues from the oldest kept; the final text survives."""
    daemon = FakeDaemon()
    async with client_of(daemon, limits=Limits(events=4)) as client:
        subscription = await client.subscribe("cli-1")
        daemon.push(Accepted(request_id="r1", session_id="cli-1", task_hash=HASH))
        run = await client.run("cli-1", "hi")
        cursor = run.events()
        for seq in range(1, 10):
            daemon.push(text(seq), text(seq))  # once for the run, once for the subscription
        daemon.push(
            EventFrame(session_id="cli-1", task_hash=HASH, event=Done(seq=10, at=0, text="bye")),
            DoneFrame(request_id="r1", task_hash=HASH, status="finished"),
        )
        assert (await run.wait_done()).status == "finished"
        assert [e.seq async for e in cursor] == [7, 8, 9, 10]
        assert run.events_dropped == 6
        assert run.final_text == "bye"
        assert [e.seq for e in run.events_so_far] == [7, 8, 9, 10]
        assert subscription.statistics().dropped == 6
        assert [subscription.receive_nowait().event.seq for _ in range(4)] == [7, 8, 9, 10]


async def test_an_observer_sees_every_frame_and_nothing_else_queues() -> None:
    """The REPL's mode: ``on_frame`` gets every frame in order; frames no API call
    waits for (asks, lists, errors) stop there, nothing piles up in `Client.asks`."""
    daemon = FakeDaemon()
    seen: list[ServerFrame] = []
    frames: list[ServerFrame] = [
        ask("1"),
        Withdrawn(id="1", reason="gone"),
        PendingList(session_id="cli-1", tasks=[]),
        ErrorFrame(code="not_found", message="no"),
        text(1),
    ]
    async with client_of(daemon, on_frame=seen.append) as client:
        daemon.push(*frames)
        await client.send_frame(Run(request_id="x", session_id="cli-1", input="hi"))
        await trio.testing.wait_all_tasks_blocked()
        assert seen == frames
        assert client.asks().statistics().buffered == 0
    assert daemon.sent == [Run(request_id="x", session_id="cli-1", input="hi")]


async def test_a_run_is_sent_where_the_script_is_or_the_session_moved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R86: ``run`` sends the process's working directory as ``cwd`` by default; an
    absolute ``cwd`` given, or a ``workdir`` event (a ``cd``) of the session, is where
    its next default start goes; ``cwd=""`` sends none; another session is unmoved."""
    monkeypatch.chdir(tmp_path)
    daemon = FakeDaemon()
    async with client_of(daemon) as client:

        async def start(session: str, cwd: str | None = None) -> str:
            number = sum(isinstance(f, Run) for f in daemon.sent) + 1
            daemon.push(Accepted(request_id=f"r{number}", session_id=session, task_hash=HASH))
            kwargs = {} if cwd is None else {"cwd": cwd}
            await client.run(session, "run: pwd", **kwargs)
            sent = daemon.sent[-1]
            assert isinstance(sent, Run)
            assert sent.request_id == f"r{number}"
            return sent.cwd

        assert await start("cli-1") == str(tmp_path)
        assert await start("cli-1", "/srv/project") == "/srv/project"
        assert await start("cli-1") == "/srv/project"
        moved = Workdir(seq=1, at=0, path="/srv/project/sub")
        daemon.push(EventFrame(session_id="cli-1", task_hash=HASH, event=moved))
        await trio.testing.wait_all_tasks_blocked()
        assert client.default_cwd("cli-1") == "/srv/project/sub"
        assert await start("cli-1") == "/srv/project/sub"
        assert await start("cli-1", "") == ""
        assert await start("cli-2") == str(tmp_path)
