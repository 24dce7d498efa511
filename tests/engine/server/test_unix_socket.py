"""The daemon's Unix socket, in-process (issue 29 finding 3): served beside TCP, 0600,
reachable through a home too deep for a socket address, authenticated like TCP, not
subject to the Host check, aborted at shutdown like TCP connections, removed after."""

from __future__ import annotations

import stat
from pathlib import Path

import trio

from agentrio.connecting import LOCAL_URL
from agentrio.engine.assembly import open_engine
from agentrio.engine.config import Config
from agentrio.engine.server.lifecycle import open_server
from agentrio.engine.server.sockets import abort_connections, unix_inodes
from agentrio.home import socket_address
from agentrio.transport import open_frame_connection, open_http

TOKEN = "unix-token-" + "u" * 32


async def test_a_deep_home_is_served_over_its_socket(tmp_path: Path) -> None:
    """Issue 29 finding 3: a home whose socket path is over the 107-byte limit is still
    served and reached (through its directory descriptor); the socket is 0600, takes
    the token, ignores the Host header, is found by the shutdown's abort, and is gone
    after the server stops."""
    home = tmp_path / ("deep-" * 24) / "home"
    home.mkdir(parents=True)
    path = home / "daemon.sock"
    assert len(str(path).encode()) > 107
    async with (
        open_engine(Config(home=str(home))) as engine,
        open_server(engine, token=TOKEN, unix_socket=path) as server,
    ):
        assert stat.S_ISSOCK(path.stat().st_mode)
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        address = socket_address(home)
        assert address.startswith("/proc/self/fd/")
        async with open_http(LOCAL_URL, unix_socket=address) as http:
            health = await http.request("GET", "/v1/health", timeout_s=5)
            assert health.status == 200
            pending = await http.request("GET", "/v1/pending?origin=cli-", token=TOKEN)
            assert pending.status == 200
            refused = await http.request("GET", "/v1/pending?origin=cli-", token="wrong")
            assert refused.status == 401
        async with open_frame_connection(
            "ws://evil.example/v1/ws", TOKEN, unix_socket=address
        ) as conn:
            assert conn.welcome is not None
            assert conn.http_token == TOKEN
            assert unix_inodes(path)
            assert await trio.to_thread.run_sync(abort_connections, server.port, path) >= 1
    assert not path.exists()
