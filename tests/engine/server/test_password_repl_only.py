"""The system password of a restricted confirmation is taken from the REPL alone, at
the daemon (R7, issue 34 item 2): ``POST …/confirm`` and a connection whose ``hello``
names another client are refused with a clear ``forbidden`` before the ask is touched
(it stays open), sudo is never asked, and the restricted command does not run.

The verifier knows the password sent, so a daemon that took it would run the command:
the refusals are asserted on disk, with the REPL's own reply as the control."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TypeVar

import attrs
import httpx

from agentrio.engine.assembly import open_engine
from agentrio.engine.config import AgentConfig, Config, ToolsConfig
from agentrio.engine.server.auth import load_or_create_token
from agentrio.engine.server.lifecycle import RunningServer, open_server
from agentrio.engine.tools.sudo import FakeVerifier
from agentrio.protocol import wording
from agentrio.protocol.asks import OpenAsks
from agentrio.protocol.codec import decode
from agentrio.protocol.events import Confirm, Event, ToolSkipped
from agentrio.protocol.frames import (
    REPL_CLIENT,
    Ask,
    DoneFrame,
    ErrorFrame,
    EventFrame,
    Ok,
    Reply,
    Run,
    Subscribe,
    names_repl,
)
from agentrio.transport import FrameConnection, open_frame_connection
from tests.engine.server.conftest import receive_type, receive_until_done

PASSWORD = "right-pw-5521"
_E = TypeVar("_E", bound=Event)


@attrs.frozen
class Daemon:
    server: RunningServer
    token: str
    http: httpx.AsyncClient
    verifier: FakeVerifier
    locked: Path


@asynccontextmanager
async def restricted_daemon(tmp_path: Path) -> AsyncIterator[Daemon]:
    """A served engine where ``tmp_path/locked`` is restricted, nothing runs unasked, and
    sudo's stand-in accepts `PASSWORD` (credentials not cached: every ask needs it)."""
    home, locked = tmp_path / "home", tmp_path / "locked"
    locked.mkdir()
    tools = ToolsConfig(readonly_commands=[], restricted_paths=[str(locked)])
    config = Config(home=str(home), tools=tools, agent=AgentConfig(cwd=os.getcwd()))
    token = load_or_create_token(home)
    verifier = FakeVerifier(PASSWORD)
    async with (
        open_engine(config, verifier=verifier) as engine,
        open_server(engine, token=token, version="9.9.9") as server,
        httpx.AsyncClient(
            base_url=server.base_url, headers={"Authorization": f"Bearer {token}"}
        ) as http,
    ):
        yield Daemon(server=server, token=token, http=http, verifier=verifier, locked=locked)


async def open_asks(daemon: Daemon, session_id: str) -> list[str]:
    response = await daemon.http.get(f"/v1/session/{session_id}/asks")
    found: OpenAsks = decode(response.content, OpenAsks)
    return [ask.id for ask in found.asks]


async def next_event(conn: FrameConnection, kind: type[_E]) -> _E:
    """The next event of type ``kind`` a subscribed connection receives."""
    while True:
        frame = await receive_type(conn, EventFrame)
        assert isinstance(frame, EventFrame)
        if isinstance(frame.event, kind):
            return frame.event


def test_only_the_repls_hello_names_the_repl() -> None:
    """R7: the REPL's ``hello`` (``agentrio-repl/<version>``) is the one that may carry
    a password; the SDK's, the bots' and look-alike names are not."""
    assert names_repl(REPL_CLIENT)
    assert names_repl(f"{REPL_CLIENT}/0.1.0")
    for other in ("agentrio-client/1", "repl", "agentrio-repl-fake", "web", "", "telegram"):
        assert not names_repl(other)


async def test_a_password_over_http_is_refused_and_nothing_runs(tmp_path: Path) -> None:
    """R7, R8 B: a page's confirmation answered over ``POST …/confirm`` with the right
    password and ``approve`` is refused (403, the message says why and that the ask is
    still open); sudo is not asked, the ask is still listed, and answered without a
    password (a deny) the command has not run."""
    async with restricted_daemon(tmp_path) as daemon:
        target = daemon.locked / "made"
        async with open_frame_connection(daemon.server.ws_url, daemon.token, client="web") as page:
            await page.send(Subscribe(session_id="chat-pw", request_id="s"))
            await receive_type(page, Ok)
            sent = await daemon.http.post(
                "/v1/send", json={"input": f"run: touch {target}", "session_id": "chat-pw"}
            )
            assert sent.status_code == 202
            confirm = await next_event(page, Confirm)
            assert confirm.restricted
            url = f"/v1/session/chat-pw/confirm/{confirm.confirm_hash}"
            refused = await daemon.http.post(url, json={"approve": True, "password": PASSWORD})
            assert refused.status_code == 403
            assert refused.json()["error"]["message"] == wording.PASSWORD_REPL_ONLY
            assert PASSWORD not in refused.text
            assert await open_asks(daemon, "chat-pw") == [confirm.confirm_hash]
            assert daemon.verifier.verify_calls == 0
            denied = await daemon.http.post(url, json={"approve": False, "reason": "later"})
            assert denied.status_code == 200
            skipped = await next_event(page, ToolSkipped)
            assert skipped.reason == wording.denied("later")
    assert daemon.verifier.verify_calls == 0
    assert not target.exists()


async def test_a_password_from_a_client_not_the_repl_is_refused(tmp_path: Path) -> None:
    """R7, R5: a script's window (its ``hello`` names the SDK) shown a restricted
    confirmation replies with the right password: ``forbidden``, the ask stays open
    and is still its to answer; its deny then ends the call unrun."""
    async with restricted_daemon(tmp_path) as daemon:
        target = daemon.locked / "made"
        url = daemon.server.ws_url
        async with open_frame_connection(url, daemon.token, client="agentrio-client/1") as conn:
            await conn.send(Run(request_id="r", session_id="cli-pw", input=f"run: touch {target}"))
            ask = await receive_type(conn, Ask)
            assert isinstance(ask, Ask)
            assert ask.need_password
            await conn.send(Reply(id=ask.id, approve=True, password=PASSWORD, request_id="p"))
            refused = await receive_type(conn, ErrorFrame)
            assert isinstance(refused, ErrorFrame)
            assert (refused.code, refused.ref, refused.message) == (
                "forbidden",
                "p",
                wording.PASSWORD_REPL_ONLY,
            )
            assert await open_asks(daemon, "cli-pw") == [ask.id]
            await conn.send(Reply(id=ask.id, approve=False, reason="later", request_id="d"))
            frames = await receive_until_done(conn, "r")
    assert Ok(request_id="d") in frames
    assert daemon.verifier.verify_calls == 0
    assert not target.exists()


async def test_the_repls_password_is_checked_and_the_command_runs(tmp_path: Path) -> None:
    """R7 (the control): the same reply from a connection whose ``hello`` names the
    REPL is checked by sudo's stand-in, and the approved command runs."""
    async with restricted_daemon(tmp_path) as daemon:
        target = daemon.locked / "made"
        url = daemon.server.ws_url
        async with open_frame_connection(url, daemon.token, client=f"{REPL_CLIENT}/0.1.0") as conn:
            await conn.send(Run(request_id="r", session_id="cli-pw", input=f"run: touch {target}"))
            ask = await receive_type(conn, Ask)
            assert isinstance(ask, Ask)
            await conn.send(Reply(id=ask.id, approve=True, password=PASSWORD))
            frames = await receive_until_done(conn, "r")
    done = frames[-1]
    assert isinstance(done, DoneFrame)
    assert done.status == "finished"
    assert daemon.verifier.outcomes == [True]
    assert target.exists()
