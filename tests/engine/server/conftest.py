"""In-process server fixtures: a real engine (builtin model, temp home) served by
hypercorn on a free loopback port, driven by httpx and trio-websocket.

Testing rules kept here: no sleeps for timing (tests wait on frames and events), every
connection is closed by its test, every test names the SPEC ids it covers.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import attrs
import httpx
import pytest

from agentrio.engine.assembly import open_engine
from agentrio.engine.config import AgentConfig, Config, ServerConfig
from agentrio.engine.core import Engine
from agentrio.engine.server.auth import load_or_create_token
from agentrio.engine.server.lifecycle import RunningServer, open_server
from agentrio.protocol.frames import DoneFrame, ServerFrame
from agentrio.transport import FrameConnection, open_frame_connection

ALLOWED_ORIGIN = "https://allowed.example"


@attrs.frozen
class Served:
    engine: Engine
    server: RunningServer
    token: str
    http: httpx.AsyncClient
    home: Path

    @property
    def ws_url(self) -> str:
        return self.server.ws_url

    @asynccontextmanager
    async def connect(self) -> AsyncIterator[FrameConnection]:
        async with open_frame_connection(self.ws_url, self.token) as conn:
            yield conn


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    home = tmp_path / "home"
    # A short listener grace (R79): an ask whose listener closed fails closed in half a
    # second here instead of the default 30 s (R79's own tests set theirs).
    server_config = ServerConfig(allowed_origins=[ALLOWED_ORIGIN], listener_grace_s=0.5)
    # Sessions that name no directory work in the test's (R86), as allow_commands expects.
    config = Config(home=str(home), server=server_config, agent=AgentConfig(cwd=os.getcwd()))
    token = load_or_create_token(home)
    async with (
        open_engine(config) as engine,
        open_server(
            engine, token=token, version="9.9.9", allowed_origins=[ALLOWED_ORIGIN]
        ) as server,
        httpx.AsyncClient(
            base_url=server.base_url, headers={"Authorization": f"Bearer {token}"}
        ) as http,
    ):
        yield Served(engine=engine, server=server, token=token, http=http, home=home)


async def receive_until_done(conn: FrameConnection, request_id: str) -> list[ServerFrame]:
    """Frames up to and including the ``done`` of ``request_id``."""
    frames: list[ServerFrame] = []
    while True:
        frame = await conn.receive()
        frames.append(frame)
        if isinstance(frame, DoneFrame) and frame.request_id == request_id:
            return frames


async def receive_type(conn: FrameConnection, kind: type[ServerFrame]) -> ServerFrame:
    """The next frame of type ``kind``; others are skipped."""
    while True:
        frame = await conn.receive()
        if isinstance(frame, kind):
            return frame
