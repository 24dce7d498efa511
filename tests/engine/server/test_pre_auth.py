"""Before ``welcome``: the mutual challenge, the HTTP key, and the limits of an
unauthenticated connection, in-process (issue 29 findings 3 and 7; the real daemon
under floods is tests/e2e/test_unauthenticated.py).

These also keep `agentrio.engine.server.ws_limits` honest: it reaches into hypercorn's stream,
and if a hypercorn release moves what it touches, every connection is refused and
these fail.
"""

from __future__ import annotations

import json

import pytest
import trio

import agentrio.engine.server.ws as ws_module
import agentrio.engine.server.ws_hello as ws_hello
from agentrio import Disconnected, HandshakeError
from agentrio.protocol.challenge import client_proof, daemon_proof, new_nonce
from agentrio.protocol.frames import PROTOCOL_VERSION, Challenge, Hello, Prove, Welcome
from agentrio.transport import FrameConnection, open_frame_connection, open_websocket
from tests.engine.server.conftest import Served


async def _challenged(conn: FrameConnection, served: Served) -> tuple[str, Challenge]:
    nonce = new_nonce()
    await conn.send(Hello(nonce=nonce, client="t", protocol=PROTOCOL_VERSION))
    challenge = await conn.receive()
    assert isinstance(challenge, Challenge)
    assert challenge.proof == daemon_proof(served.token, nonce, challenge.nonce)
    return nonce, challenge


async def test_the_daemon_proves_first_and_a_wrong_proof_is_refused(served: Served) -> None:
    """Issue 29 finding 3: to a nonce the daemon answers with its proof (computable
    only with the token); a wrong ``prove`` -- or one replayed from another
    connection -- closes 4401."""
    async with open_websocket(served.ws_url) as first:
        nonce, challenge = await _challenged(first, served)
        proof = client_proof(served.token, nonce, challenge.nonce)
        await first.send(Prove(proof=proof))
        assert isinstance(await first.receive(), Welcome)
    async with open_websocket(served.ws_url) as replay:
        await _challenged(replay, served)
        await replay.send(Prove(proof=proof))  # the last connection's: new nonces now
        with pytest.raises(Disconnected) as info:
            await replay.receive()
    assert (info.value.close_code, info.value.close_reason) == (4401, "wrong proof")
    async with open_websocket(served.ws_url) as bare:
        await bare.send_raw(json.dumps({"type": "hello", "client": "t", "protocol": 1}))
        with pytest.raises(Disconnected) as info:
            await bare.receive()
    assert info.value.close_code == 4401
    assert "token or a nonce" in info.value.close_reason


async def test_the_http_key_works_only_while_its_connection_is_open(served: Served) -> None:
    """Issue 29 finding 3: a challenge connection's HTTP key authenticates HTTP calls
    while the WebSocket is open, and not after."""
    async with open_frame_connection(served.ws_url, served.token) as conn:
        key = conn.http_token
        assert key
        assert key != served.token
        headers = {"Authorization": f"Bearer {key}"}
        accepted = await served.http.get("/v1/pending?origin=cli-", headers=headers)
        assert accepted.status_code == 200
    with trio.fail_after(5):
        while served.server.context.http_keys:
            await trio.sleep(0.01)
    refused = await served.http.get("/v1/pending?origin=cli-", headers=headers)
    assert refused.status_code == 401


async def test_a_message_over_4_kib_before_welcome_closes_1009(served: Served) -> None:
    """Issue 29 finding 7: before authentication hypercorn takes at most 4 KiB a
    message (so the limit is in place on every connection), after it 1 MiB and more."""
    async with open_websocket(served.ws_url) as conn:
        await conn.send_raw('{"type": "hello", "pad": "' + "x" * 5000 + '"}')
        with pytest.raises(Disconnected) as info:
            await conn.receive()
    assert info.value.close_code == 1009
    async with served.connect() as conn:
        await conn.send_raw('{"type": "nothing", "pad": "' + "x" * 100_000 + '"}')
        error = await conn.receive()
        assert type(error).TYPE == "error"


async def test_silence_before_hello_ends_at_the_deadline(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 29 finding 7: a connection that says nothing is closed (4401) once the
    hello deadline passes (shortened here to 0.2 s)."""
    monkeypatch.setattr(ws_hello, "HELLO_TIMEOUT_S", 0.2)
    async with open_websocket(served.ws_url) as conn:
        with trio.fail_after(5), pytest.raises(Disconnected) as info:
            await conn.receive()
    assert info.value.close_code == 4401


async def test_unauthenticated_connections_are_capped(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 29 finding 7: past the cap of connections waiting to authenticate, the
    next upgrade is refused (403) until one of them authenticates."""
    monkeypatch.setattr(ws_module, "MAX_UNAUTHENTICATED", 2)
    async with open_websocket(served.ws_url) as one, open_websocket(served.ws_url) as two:
        with pytest.raises(HandshakeError, match="403"):
            async with open_websocket(served.ws_url):
                raise AssertionError("a third unauthenticated connection was accepted")
        await one.send(Hello(token=served.token, client="t", protocol=PROTOCOL_VERSION))
        assert isinstance(await one.receive(), Welcome)
        async with open_frame_connection(served.ws_url, served.token) as three:
            assert three.welcome is not None
        assert two is not None
