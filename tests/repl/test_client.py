"""The Trio side: its reconnect policy around the one client, HTTP calls, finding or
starting the daemon (SPEC §11, R43). The real `agentrio` client over fake connections
and `httpx.MockTransport`; no daemon."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from agentrio import Client, Disconnected, open_client
from agentrio.protocol.errors import FrameDecodeError
from agentrio.protocol.frames import Accepted, ListLegs, Run, ServerFrame, Welcome
from agentrio.repl.client import do_http, forward, run_client
from agentrio.repl.daemon import (
    DaemonStartError,
    Endpoint,
    ensure_daemon,
    model_label,
    read_endpoint,
    read_token,
    spawn_daemon,
)
from agentrio.repl.messages import Connected, HttpCall, HttpResult, Incoming, Outgoing, Status
from agentrio.repl.messages import Disconnected as Lost
from agentrio.transport import HttpApi, open_http

#: What the fake daemon 'sends': a frame, an undecodable one, or None (it closes).
FakeItem = ServerFrame | FrameDecodeError | None


class FakeConnection:
    """Frames the daemon 'sends' come from a channel; frames we send are recorded."""

    def __init__(self) -> None:
        self.sent: list[Any] = []
        self.inbox_send, self.inbox = trio.open_memory_channel[FakeItem](10)
        self.welcome: Welcome | None = Welcome(protocol=1, daemon_version="9.9")

    async def send(self, frame: Any) -> None:
        self.sent.append(frame)

    async def receive(self) -> ServerFrame:
        item = await self.inbox.receive()
        if item is None:
            raise Disconnected(
                "daemon shutting down", close_code=4001, close_reason="daemon shutting down"
            )
        if isinstance(item, FrameDecodeError):
            raise item
        return item


def mock_http(handler: Callable[[httpx.Request], httpx.Response]) -> Any:
    return open_http(transport=httpx.MockTransport(handler))


def fake_client(
    conn: FakeConnection,
    http: HttpApi,
    deliver: Callable[[Incoming], None],
    base_url: str = "http://127.0.0.1:1",
) -> AbstractAsyncContextManager[Client]:
    """The REPL's client over a fake connection: every frame to ``deliver``."""

    def unreadable(exc: FrameDecodeError) -> None:
        deliver(Status(text=f"unreadable frame from the daemon: {exc}", error=True))

    return open_client(
        conn, http, base_url=base_url, token="t", on_frame=deliver, on_unreadable=unreadable
    )


async def test_forward_moves_frames_both_ways_and_reports_close() -> None:
    """SPEC §8: frames out go to the socket, frames in to deliver, HTTP calls run aside;
    a close ends the forwarding with its reason."""
    conn = FakeConnection()
    out_send, out_recv = trio.open_memory_channel[Outgoing](10)
    got: list[Incoming] = []
    call = HttpCall(method="GET", path="/x", purpose="history")

    def handler(request: httpx.Request) -> httpx.Response:
        assert str(request.url) == "http://127.0.0.1:1/x"
        return httpx.Response(200, json={"tasks": []})

    accepted = Accepted(request_id="r1", session_id="cli-1", task_hash="a" * 32)
    result: list[str] = []
    async with mock_http(handler) as http, fake_client(conn, http, got.append) as client:
        async with trio.open_nursery() as nursery:

            async def run() -> None:
                result.append(await forward(client, out_recv, got.append))

            nursery.start_soon(run)
            run_frame = Run(request_id="r1", session_id="cli-1", input="hi", window_hash="w")
            await out_send.send(run_frame)
            await out_send.send(call)
            await conn.inbox_send.send(accepted)
            await conn.inbox_send.send(FrameDecodeError("$.event", "bad"))
            await trio.testing.wait_all_tasks_blocked()
            assert conn.sent == [run_frame]
            assert sorted(got, key=lambda item: type(item).__name__) == [
                accepted,
                HttpResult(call=call, status=200, body={"tasks": []}),
                Status(text="unreadable frame from the daemon: $.event: bad", error=True),
            ]
            await conn.inbox_send.send(None)
    assert result == ["daemon shutting down"]


async def test_run_client_reconnects_and_drops_stale_frames(autojump_clock: Any) -> None:
    """R43, SPEC §11: after the connection drops the client says so, connects again
    (reconnect=True), and frames queued for the dead connection are not replayed."""
    conns: list[FakeConnection] = []
    starts: list[bool] = []

    async def locate(http: HttpApi, may_start: bool) -> Endpoint:
        starts.append(may_start)
        return Endpoint(host="127.0.0.1", port=1, token="t")

    def connect(
        endpoint: Endpoint,
        http: HttpApi,
        *,
        on_frame: Callable[[ServerFrame], None],
        on_unreadable: Callable[[FrameDecodeError], None],
    ) -> AbstractAsyncContextManager[Client]:
        assert (endpoint.ws_url, endpoint.token) == ("ws://127.0.0.1:1/v1/ws", "t")
        conn = FakeConnection()
        conns.append(conn)
        return open_client(
            conn, http, base_url=endpoint.http_base, token=endpoint.token, on_frame=on_frame
        )

    out_send, out_recv = trio.open_memory_channel[Outgoing](10)
    got: list[Incoming] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(
            lambda: run_client(
                home=Path("/nonexistent"),
                outgoing=out_recv,
                deliver=got.append,
                locate=locate,
                connect=connect,
            )
        )
        await trio.testing.wait_all_tasks_blocked()
        assert got == [Connected(url="http://127.0.0.1:1", daemon_version="9.9")]
        await conns[0].inbox_send.send(None)
        await trio.testing.wait_all_tasks_blocked()
        assert got[1] == Lost(reason="daemon shutting down")
        stale = ListLegs(session_id="old")
        await out_send.send(stale)
        await trio.sleep(1)
        assert len(conns) == 2
        assert got[2] == Connected(url="http://127.0.0.1:1", daemon_version="9.9", reconnect=True)
        assert starts == [True, False]
        fresh = ListLegs(session_id="new")
        await out_send.send(fresh)
        await trio.testing.wait_all_tasks_blocked()
        assert conns[1].sent == [fresh]
        nursery.cancel_scope.cancel()


async def test_run_client_reports_a_failed_start_once(autojump_clock: Any) -> None:
    """SPEC §11: a daemon that cannot start is reported once, with its log; starting is
    retried only after a back-off."""
    starts: list[bool] = []

    async def locate(http: HttpApi, may_start: bool) -> Endpoint:
        starts.append(may_start)
        raise DaemonStartError("the daemon exited; see its log: /h/daemon.log")

    got: list[Incoming] = []
    _, out_recv = trio.open_memory_channel[Outgoing](1)
    with trio.move_on_after(20):
        await run_client(home=Path("/x"), outgoing=out_recv, deliver=got.append, locate=locate)
    assert got == [Status(text="the daemon exited; see its log: /h/daemon.log", error=True)]
    assert starts[0] is True
    assert set(starts[1:]) == {False}


async def test_run_client_reports_an_unreachable_daemon_once() -> None:
    """SPEC §11: a daemon that answers health but not the WebSocket is reported once as
    unreachable (the client's own error, not a library's), and retried."""
    attempts: list[int] = []
    with trio.socket.socket() as sock:
        await sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, never listening: connects are refused

        async def locate(http: HttpApi, may_start: bool) -> Endpoint:
            attempts.append(1)
            return Endpoint(host="127.0.0.1", port=port, token="t")

        got: list[Incoming] = []
        _, out_recv = trio.open_memory_channel[Outgoing](1)
        with trio.move_on_after(1.5):
            await run_client(home=Path("/x"), outgoing=out_recv, deliver=got.append, locate=locate)
    assert len(attempts) > 1
    [status] = got
    assert isinstance(status, Status)
    assert status.error
    assert status.text.startswith("cannot reach the daemon: ")


async def test_do_http_sends_bearer_and_maps_failures() -> None:
    """R70: API calls carry the bearer token; network errors become results."""
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if request.method == "DELETE":
            return httpx.Response(204)
        return httpx.Response(200, json={"tasks": []})

    got: list[Incoming] = []
    call = HttpCall(method="GET", path="/v1/session/cli-1/task/history", params={"keyword": "a b"})
    async with (
        mock_http(handler) as http,
        fake_client(FakeConnection(), http, got.append, "http://127.0.0.1:9") as client,
    ):
        result = await do_http(client, call)
        assert result == HttpResult(call=call, status=200, body={"tasks": []})
        drop = HttpCall(method="DELETE", path="/v1/session/cli-1/task/" + "a" * 32)
        assert await do_http(client, drop) == HttpResult(call=drop, status=204)
    assert seen[0].headers["authorization"] == "Bearer t"
    assert str(seen[0].url) == "http://127.0.0.1:9/v1/session/cli-1/task/history?keyword=a+b"

    def broken(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused")

    async with (
        mock_http(broken) as http,
        fake_client(FakeConnection(), http, got.append) as client,
    ):
        result = await do_http(client, call)
    assert (result.status, result.error) == (0, "refused")


# ---------------------------------------------------------------- daemon discovery


def write_daemon_json(home: Path, port: int = 4242) -> None:
    info = {"pid": 1, "host": "127.0.0.1", "port": port, "started_at": 0.0, "version": "0.1.0"}
    (home / "daemon.json").write_text(json.dumps(info))


def test_read_endpoint_token_and_model(tmp_path: Path) -> None:
    """SPEC §7, §11: daemon.json gives the address, <home>/token the token, config the model."""
    assert read_endpoint(tmp_path) is None
    assert read_token(tmp_path) == ""
    assert model_label(tmp_path) == "builtin"
    (tmp_path / "daemon.json").write_text("{not json")
    assert read_endpoint(tmp_path) is None
    (tmp_path / "daemon.json").write_text('{"host": "h", "port": "1"}')
    assert read_endpoint(tmp_path) is None
    write_daemon_json(tmp_path)
    assert read_endpoint(tmp_path) == Endpoint(host="127.0.0.1", port=4242)
    (tmp_path / "token").write_text("abc\n")
    assert read_token(tmp_path) == "abc"
    (tmp_path / "config.toml").write_text('[model]\nprovider = "openai"\nname = "gpt-x"\n')
    assert model_label(tmp_path) == "openai:gpt-x"
    (tmp_path / "config.toml").write_text("[model\n")
    assert model_label(tmp_path) == "builtin"


def health(ok: bool) -> AbstractAsyncContextManager[HttpApi]:
    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/v1/health"
        assert "authorization" not in request.headers
        return httpx.Response(200 if ok else 503, json={"ok": ok})

    return open_http(transport=httpx.MockTransport(handler))


async def test_ensure_daemon_uses_a_healthy_one(tmp_path: Path) -> None:
    """SPEC §11: a daemon that answers health is used, nothing is started."""
    write_daemon_json(tmp_path)
    (tmp_path / "token").write_text("tok")

    def spawn(home: Path) -> int:
        raise AssertionError("must not start a daemon")

    async with health(True) as client:
        endpoint = await ensure_daemon(tmp_path, client, status=print, spawn=spawn)
    assert endpoint == Endpoint(host="127.0.0.1", port=4242, token="tok")


async def test_ensure_daemon_starts_one_and_names_the_log(tmp_path: Path) -> None:
    """SPEC §11: with none answering, a daemon is started and its log path is shown."""
    statuses: list[Status] = []

    def spawn(home: Path) -> int:
        write_daemon_json(home, 5555)
        (home / "token").write_text("new")
        return 4321

    async with health(True) as client:
        # daemon.json is written by spawn; health then answers.
        endpoint = await ensure_daemon(
            tmp_path, client, status=statuses.append, spawn=spawn, exited=lambda pid: False
        )
    assert endpoint == Endpoint(host="127.0.0.1", port=5555, token="new")
    assert statuses == [
        Status(text=f"no daemon answered; started one (pid 4321), its log: {tmp_path}/daemon.log")
    ]


@pytest.mark.parametrize(
    ("exited", "why"), [(True, "exited"), (False, "did not answer within 10 s")]
)
async def test_ensure_daemon_start_failures(
    tmp_path: Path, autojump_clock: Any, exited: bool, why: str
) -> None:
    """SPEC §11: a daemon that exits or never answers is an error naming its log."""
    async with health(False) as client:
        with pytest.raises(DaemonStartError) as info:
            await ensure_daemon(
                tmp_path,
                client,
                status=lambda s: None,
                spawn=lambda h: 1,
                exited=lambda pid: exited,
            )
        assert str(info.value) == f"the daemon {why}; see its log: {tmp_path}/daemon.log"
        with pytest.raises(DaemonStartError, match="no daemon answers"):
            await ensure_daemon(tmp_path, client, status=lambda s: None, start=False)


def test_spawn_daemon_is_detached_and_logs(tmp_path: Path) -> None:
    """SPEC §11: the started process has its own session and appends output to the log."""
    (tmp_path / "daemon.log").write_text("earlier\n")
    script = "import os, sys; print(os.getsid(0) == os.getpid()); print('err', file=sys.stderr)"
    pid = spawn_daemon(tmp_path, [sys.executable, "-c", script])
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert (tmp_path / "daemon.log").read_text().splitlines() == ["earlier", "True", "err"]
