"""The Trio side: pumping frames, reconnecting, HTTP calls, finding or starting the
daemon (SPEC §11, R43). Fake connections and `httpx.MockTransport`; no daemon."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
import trio_websocket

from protocol.frames import Accepted, ListLegs, Run, ServerFrame, Welcome
from repl.client import do_http, pump, run_client
from repl.daemon import (
    DaemonStartError,
    Endpoint,
    ensure_daemon,
    model_label,
    read_endpoint,
    read_token,
    spawn_daemon,
)
from repl.messages import Connected, Disconnected, HttpCall, HttpResult, Incoming, Outgoing, Status


class FakeConnection:
    """Frames the daemon 'sends' come from a channel; frames we send are recorded."""

    def __init__(self) -> None:
        self.sent: list[Any] = []
        self.inbox_send, self.inbox = trio.open_memory_channel[ServerFrame | None](10)
        self.welcome = Welcome(protocol=1, daemon_version="9.9")

    async def send(self, frame: Any) -> None:
        self.sent.append(frame)

    async def receive(self) -> ServerFrame:
        item = await self.inbox.receive()
        if item is None:
            raise trio_websocket.ConnectionClosed(
                trio_websocket.CloseReason(4001, "daemon shutting down")
            )
        return item


async def test_pump_moves_frames_both_ways_and_reports_close() -> None:
    """SPEC §8: frames out go to the socket, frames in to deliver, HTTP calls run aside;
    a close ends the pump with its reason."""
    conn = FakeConnection()
    out_send, out_recv = trio.open_memory_channel[Outgoing](10)
    got: list[Incoming] = []
    call = HttpCall(method="GET", path="/x", purpose="history")

    async def http(c: HttpCall) -> HttpResult:
        return HttpResult(call=c, status=200, body={"tasks": []})

    accepted = Accepted(request_id="r1", session_id="cli-1", task_hash="a" * 32)
    async with trio.open_nursery() as nursery:
        result: list[str] = []

        async def run() -> None:
            result.append(await pump(conn, out_recv, got.append, http))

        nursery.start_soon(run)
        run_frame = Run(request_id="r1", session_id="cli-1", input="hi", window_hash="w")
        await out_send.send(run_frame)
        await out_send.send(call)
        await conn.inbox_send.send(accepted)
        await trio.testing.wait_all_tasks_blocked()
        assert conn.sent == [run_frame]
        assert sorted(got, key=lambda item: type(item).__name__) == [
            accepted,
            HttpResult(call=call, status=200, body={"tasks": []}),
        ]
        await conn.inbox_send.send(None)
    assert result == ["daemon shutting down"]


async def test_run_client_reconnects_and_drops_stale_frames(autojump_clock: Any) -> None:
    """R43, SPEC §11: after the connection drops the client says so, connects again
    (reconnect=True), and frames queued for the dead connection are not replayed."""
    conns: list[FakeConnection] = []
    starts: list[bool] = []

    async def locate(client: httpx.AsyncClient, may_start: bool) -> Endpoint:
        starts.append(may_start)
        return Endpoint(host="127.0.0.1", port=1, token="t")

    @asynccontextmanager
    async def connect(url: str, token: str) -> AsyncIterator[FakeConnection]:
        assert (url, token) == ("ws://127.0.0.1:1/v1/ws", "t")
        conn = FakeConnection()
        conns.append(conn)
        yield conn

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
        assert got[1] == Disconnected(reason="daemon shutting down")
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

    async def locate(client: httpx.AsyncClient, may_start: bool) -> Endpoint:
        starts.append(may_start)
        raise DaemonStartError("the daemon exited; see its log: /h/daemon.log")

    got: list[Incoming] = []
    _, out_recv = trio.open_memory_channel[Outgoing](1)
    with trio.move_on_after(20):
        await run_client(home=Path("/x"), outgoing=out_recv, deliver=got.append, locate=locate)
    assert got == [Status(text="the daemon exited; see its log: /h/daemon.log", error=True)]
    assert starts[0] is True
    assert set(starts[1:]) == {False}


async def test_do_http_sends_bearer_and_maps_failures() -> None:
    """R70: API calls carry the bearer token; network errors become results."""
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if request.method == "DELETE":
            return httpx.Response(204)
        return httpx.Response(200, json={"tasks": []})

    endpoint = Endpoint(host="127.0.0.1", port=9, token="tok")
    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        call = HttpCall(
            method="GET", path="/v1/session/cli-1/task/history", params={"keyword": "a b"}
        )
        result = await do_http(client, endpoint, call)
        assert result == HttpResult(call=call, status=200, body={"tasks": []})
        drop = HttpCall(method="DELETE", path="/v1/session/cli-1/task/" + "a" * 32)
        assert await do_http(client, endpoint, drop) == HttpResult(call=drop, status=204)
    assert seen[0].headers["authorization"] == "Bearer tok"
    assert str(seen[0].url) == "http://127.0.0.1:9/v1/session/cli-1/task/history?keyword=a+b"

    def broken(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused")

    async with httpx.AsyncClient(transport=httpx.MockTransport(broken)) as client:
        result = await do_http(client, endpoint, call)
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


def health(ok: bool) -> httpx.AsyncClient:
    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/v1/health"
        return httpx.Response(200 if ok else 503, json={"ok": ok})

    return httpx.AsyncClient(transport=httpx.MockTransport(handler))


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
