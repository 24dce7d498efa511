"""Bad input and authentication against the real daemon (R70, R71)."""

from __future__ import annotations

import json

import httpx
import pytest
import trio
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from agentrio import AuthRefused
from agentrio.protocol.codec import MAX_MESSAGE_BYTES
from agentrio.protocol.frames import Accepted, DoneFrame, ErrorFrame, Run
from agentrio.transport import open_frame_connection
from tests.e2e.conftest import Daemon

KNOWN_TYPES = [
    "hello",
    "run",
    "steer",
    "cancel",
    "reply",
    "pending",
    "background_cancel",
    "listen",
    "subscribe",
    "list_pending",
    "list_legs",
]
_json_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False))
#: Session ids the daemon must refuse (not 1-128 of [A-Za-z0-9_-]).
_bad_session = (
    st.text(min_size=1, max_size=40).filter(
        lambda s: not all(c.isascii() and (c.isalnum() or c in "_-") for c in s)
    )
    | st.just("")
    | st.just("x" * 129)
)


def _dump(value: object) -> str:
    return json.dumps(value)


#: Frames that must each get exactly one ``error`` frame.
bad_frames = st.one_of(
    st.text(max_size=200).map(lambda t: "{bad" + t),  # invalid JSON
    st.one_of(_json_scalars, st.lists(st.integers(), max_size=5)).map(_dump),  # not objects
    st.text(max_size=30)
    .filter(lambda t: t not in KNOWN_TYPES)
    .map(lambda t: _dump({"type": t})),  # unknown types
    st.fixed_dictionaries(
        {"type": st.sampled_from(KNOWN_TYPES[1:]), "request_id": _json_scalars}
    ).map(_dump),  # wrong types / missing fields
    st.builds(
        lambda n: _dump({"type": "list_legs", "session_id": "cli-a", "junk": "x" * n}),
        st.integers(0, 200_000),
    ),  # huge strings in unknown fields
    st.text(max_size=64).map(lambda h: _dump({"type": "cancel", "task_hash": h})),  # wrong ids
    st.text(max_size=64).map(lambda i: _dump({"type": "reply", "id": i, "approve": True})),
    st.text(max_size=64).map(
        lambda h: _dump({"type": "steer", "session_id": "cli-a", "task_hash": h, "input": "x"})
    ),
    _bad_session.map(lambda s: _dump({"type": "list_pending", "session_id": s})),
    st.just(_dump({"type": "hello", "token": "t", "client": "c", "protocol": 1})),
)


@settings(
    max_examples=1,
    deadline=None,
    database=None,
    phases=[Phase.generate],
    suppress_health_check=list(HealthCheck),
)
@given(frames=st.lists(bad_frames, min_size=1000, max_size=1000))
def test_a_thousand_bad_frames(daemon: Daemon, frames: list[str]) -> None:
    """R71, §8: 1,000 generated bad frames (plus three over 1 MiB) on one connection
    each get an ``error`` frame; the daemon stays up and a task on another connection
    finishes normally."""
    oversized = ["x" * (MAX_MESSAGE_BYTES + k) for k in (1, 10, 1000)]

    async def main() -> None:
        with trio.fail_after(60):
            async with (
                open_frame_connection(daemon.ws_url, daemon.token) as bad,
                open_frame_connection(daemon.ws_url, daemon.token) as good,
            ):
                await good.send(
                    Run(request_id="ok", session_id="cli-good", input="run: echo still fine")
                )
                assert isinstance(await good.receive(), Accepted)
                for text in [*frames, *oversized]:
                    await bad.send_raw(text)
                    reply = await bad.receive()
                    assert isinstance(reply, ErrorFrame), (text[:200], reply)
                    assert reply.message
                while not isinstance(frame := await good.receive(), DoneFrame):
                    pass
                assert (frame.request_id, frame.status) == ("ok", "finished")
            async with httpx.AsyncClient(base_url=daemon.base_url) as http:
                health = await http.get("/v1/health")
            assert health.json()["ok"] is True

    trio.run(main)


async def test_http_without_or_with_a_wrong_token_is_401(daemon: Daemon) -> None:
    """R70: no token or a wrong one gets 401 over HTTP; health needs none."""
    async with httpx.AsyncClient(base_url=daemon.base_url) as http:
        assert (await http.get("/v1/session/chat-a/task")).status_code == 401
        wrong = await http.get("/v1/session/chat-a/task", headers={"Authorization": "Bearer wrong"})
        assert wrong.status_code == 401
        assert wrong.json()["error"]["code"] == "unauthorized"
        assert (await http.get("/v1/health")).status_code == 200


async def test_ws_wrong_token_and_foreign_origin_are_refused(daemon: Daemon) -> None:
    """R70: a wrong token closes the WebSocket with 4401; a foreign Origin is refused
    before the upgrade (403)."""
    with pytest.raises(AuthRefused):
        async with open_frame_connection(daemon.ws_url, "wrong"):
            raise AssertionError("unreachable")
    headers = {
        "Connection": "Upgrade",
        "Upgrade": "websocket",
        "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
        "Sec-WebSocket-Version": "13",
        "Origin": "https://evil.example",
    }
    async with httpx.AsyncClient(base_url=daemon.base_url) as http:
        refused = await http.get("/v1/ws", headers=headers)
    assert refused.status_code == 403
