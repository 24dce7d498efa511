"""The first frames of a ``/v1/ws`` connection: ``hello``, and for a challenge hello
``challenge`` and ``prove`` (docs/protocol.md "Connecting", `agentrio.protocol.challenge`).

`authenticate` reads them within `HELLO_TIMEOUT_S`; on failure it closes with 4401 and
a reason that never repeats the token. A ``hello`` with the token itself is accepted
as before (the web page, curl users, clients on the Unix socket, clients of earlier
releases); a ``hello`` with a nonce is answered by the daemon's proof first, and only
a right ``prove`` is welcomed -- with an HTTP key valid while the connection is open.
"""

from __future__ import annotations

from typing import Final

import attrs
import trio
from starlette.websockets import WebSocket, WebSocketDisconnect

from agentrio.engine.server.auth import token_ok
from agentrio.protocol.challenge import (
    client_proof,
    daemon_proof,
    http_key,
    new_nonce,
    nonce_ok,
    proof_ok,
)
from agentrio.protocol.codec import decode_client_frame, dumps
from agentrio.protocol.errors import CLOSE_AUTH_FAILED, FrameDecodeError
from agentrio.protocol.frames import PROTOCOL_VERSION, Challenge, ClientFrame, Hello, Prove

__all__ = ["HELLO_TIMEOUT_S", "Authenticated", "authenticate"]

#: A client that has not authenticated within this many seconds (``hello``, and
#: ``prove`` for a challenge) is closed (4401).
HELLO_TIMEOUT_S: Final = 5.0


@attrs.frozen
class Authenticated:
    """A connection that said a valid ``hello``; ``http_key`` is the bearer value its
    HTTP calls may use while it is open (challenge hellos only, else empty)."""

    http_key: str = ""
    #: The ``hello``'s ``client``: the front-end an ask shown here is shown on (issue 34).
    client: str = ""


async def _receive_frame(websocket: WebSocket) -> ClientFrame | str | None:
    """The next message decoded, the reason it is not a frame, or None when the
    client left."""
    message = await websocket.receive()
    if message["type"] == "websocket.disconnect":
        return None
    text = message.get("text")
    if text is None:
        return "expected a JSON text message"
    try:
        return decode_client_frame(text)
    except FrameDecodeError as exc:
        return f"expected hello ({exc.field}: {exc.problem})"[:120]


async def authenticate(websocket: WebSocket, token: str) -> Authenticated | None:
    """Read ``hello`` (and, for a challenge hello, answer ``challenge`` and read
    ``prove``), all within `HELLO_TIMEOUT_S`. On failure close with 4401 (the reason
    never repeats the token) and return None."""
    reason = "expected hello with a valid token and protocol 1"
    with trio.move_on_after(HELLO_TIMEOUT_S):
        hello = await _receive_frame(websocket)
        if hello is None:
            return None
        if isinstance(hello, str):
            reason = hello
        elif isinstance(hello, Hello):
            if hello.protocol != PROTOCOL_VERSION:
                reason = f"unsupported protocol {hello.protocol}; this daemon speaks 1"
            elif hello.token:
                if token_ok(hello.token, token):
                    return Authenticated(client=hello.client)
                reason = "wrong token"
            elif nonce_ok(hello.nonce):
                proved = await _challenge(websocket, token, hello.nonce)
                if proved is not None:
                    return attrs.evolve(proved, client=hello.client)
                reason = "wrong proof"
            else:
                reason = "hello needs a token or a nonce of 16-64 URL-safe characters"
    try:
        await websocket.close(code=CLOSE_AUTH_FAILED, reason=reason)
    except (WebSocketDisconnect, RuntimeError, OSError):
        pass
    return None


async def _challenge(websocket: WebSocket, token: str, client_nonce: str) -> Authenticated | None:
    """Prove first that this daemon knows the token, then check the client's proof."""
    nonce = new_nonce()
    proof = daemon_proof(token, client_nonce, nonce)
    try:
        await websocket.send_text(dumps(Challenge(nonce=nonce, proof=proof)))
    except (WebSocketDisconnect, RuntimeError, OSError):
        return None
    answer = await _receive_frame(websocket)
    if isinstance(answer, Prove) and proof_ok(
        answer.proof, client_proof(token, client_nonce, nonce)
    ):
        return Authenticated(http_key=http_key(token, client_nonce, nonce))
    return None
