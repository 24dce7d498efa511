"""A session's model by name, and a fallback list, on the real daemon against aimock
(issue 31 item 5: ``[models.NAME]``, ``set_model`` / ``PUT …/model``, ``fallback``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import tomli_w
import trio

from agentrio.protocol.codec import decode
from agentrio.protocol.frames import DoneFrame, ErrorFrame, ModelChoice, ModelInfo, Run, SetModel
from agentrio.protocol.http import SessionModel
from agentrio.transport import open_frame_connection
from tests.aimock import Aimock, start_aimock, write_fixture
from tests.e2e.conftest import DaemonProcess

FIXTURES = [
    {"match": {"userMessage": "who answers"}, "response": {"content": "aimock answers."}},
]


async def start_daemon(home: Path, config: dict[str, Any]) -> DaemonProcess:
    home.mkdir(parents=True)
    (home / "config.toml").write_text(tomli_w.dumps(config))
    return await trio.to_thread.run_sync(DaemonProcess, home)


async def run_once(conn: Any, request_id: str, session_id: str) -> DoneFrame:
    await conn.send(Run(request_id=request_id, session_id=session_id, input="who answers"))
    while True:
        frame = await conn.receive()
        if isinstance(frame, DoneFrame) and frame.request_id == request_id:
            return frame


def paths(journal: list[dict[str, Any]]) -> list[str]:
    return [e["path"] for e in journal if e["path"].startswith("/v1/")]


async def test_set_model_switches_the_sessions_dialect(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """Issue 31 (5): ``set_model fast`` makes that session's next task speak the
    ``[models.fast]`` dialect while another session keeps the default; an unknown name
    is a ``bad_request`` naming the choices; HTTP reads and sets the same choice."""
    aimock: Aimock = await start_aimock(nursery, write_fixture(tmp_path, FIXTURES))
    config = {
        "model": {"provider": "openai", "name": "gpt-5", "base_url": f"{aimock.url}/v1"},
        "models": {
            "fast": {"provider": "anthropic", "name": "claude-haiku-4-5", "base_url": aimock.url}
        },
    }
    daemon = await start_daemon(tmp_path / "home", config)
    info = daemon.info
    headers = {"Authorization": f"Bearer {info.token}"}
    try:
        with trio.fail_after(60):
            async with (
                open_frame_connection(info.ws_url, info.token) as conn,
                httpx.AsyncClient(base_url=info.base_url, headers=headers) as http,
            ):
                await conn.send(SetModel(session_id="cli-a", name="fast", request_id="m1"))
                answer = await conn.receive()
                assert answer == ModelInfo(
                    session_id="cli-a",
                    name="fast",
                    model="claude-haiku-4-5",
                    choices=[
                        ModelChoice(name="default", model="gpt-5"),
                        ModelChoice(name="fast", model="claude-haiku-4-5"),
                    ],
                    request_id="m1",
                )
                assert (await run_once(conn, "a", "cli-a")).status == "finished"
                assert (await run_once(conn, "b", "cli-b")).status == "finished"
                assert paths(await aimock.journal()) == ["/v1/messages", "/v1/chat/completions"]

                await conn.send(SetModel(session_id="cli-a", name="nope", request_id="m2"))
                error = await conn.receive()
                assert isinstance(error, ErrorFrame)
                assert error.code == "bad_request"
                assert "unknown model 'nope' (choose one of default, fast)" in error.message

                got = decode((await http.get("/v1/session/cli-b/model")).content, SessionModel)
                assert (got.name, got.model) == ("default", "gpt-5")
                put = await http.put("/v1/session/cli-b/model", json={"name": "fast"})
                assert decode(put.content, SessionModel).name == "fast"
                assert (
                    await http.put("/v1/session/cli-b/model", json={"name": "x"})
                ).status_code == 400
                assert (await run_once(conn, "c", "cli-b")).status == "finished"
                assert paths(await aimock.journal())[-1] == "/v1/messages"
    finally:
        assert await trio.to_thread.run_sync(daemon.stop) == 0


async def test_fallback_answers_when_the_model_keeps_failing(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """Issue 31 (5): the default model's endpoint refuses connections; after its one
    try the ``fallback`` model answers and the task finishes."""
    aimock = await start_aimock(nursery, write_fixture(tmp_path, FIXTURES))
    sock = trio.socket.socket()
    await sock.bind(("127.0.0.1", 0))
    dead = sock.getsockname()[1]
    sock.close()
    config = {
        "model": {
            "provider": "openai-responses",
            "name": "gpt-5",
            "base_url": f"http://127.0.0.1:{dead}/v1",
            "retries": 1,
            "fallback": ["backup"],
        },
        "models": {"backup": {"provider": "anthropic", "name": "claude-x", "base_url": aimock.url}},
    }
    daemon = await start_daemon(tmp_path / "home", config)
    try:
        with trio.fail_after(60):
            async with open_frame_connection(daemon.info.ws_url, daemon.info.token) as conn:
                done = await run_once(conn, "f", "cli-f")
    finally:
        assert await trio.to_thread.run_sync(daemon.stop) == 0
    assert (done.status, done.error) == ("finished", "")
    assert paths(await aimock.journal()) == ["/v1/messages"]
