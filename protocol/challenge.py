"""The mutual challenge of ``hello`` over TCP (issue 29 finding 3; docs/protocol.md).

A client that reaches the daemon over TCP cannot know that whoever answers on that
port is the daemon: after a ``kill -9`` any local user may take the freed port. So it
does not send the token. It sends a fresh ``nonce``; the daemon answers with its own
nonce and a proof that it knows the token; only then does the client prove that it
knows the token too. Each proof is an HMAC-SHA256 keyed by the token over both nonces
and a label naming who proves, so one side's proof can never be replayed as the
other's, and a proof of one connection is worthless for the next (new nonces).

Both sides also derive `http_key`: a bearer value for HTTP calls that is valid only
while that WebSocket connection lives on the daemon, so a client that proved its
daemon can make HTTP calls without ever putting the token itself on the wire.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from typing import Final

__all__ = [
    "NONCE_PATTERN",
    "client_proof",
    "daemon_proof",
    "http_key",
    "new_nonce",
    "nonce_ok",
    "proof_ok",
]

#: What a nonce looks like: 16-64 URL-safe characters (`new_nonce` makes 43).
NONCE_PATTERN: Final = re.compile(r"[A-Za-z0-9_-]{16,64}")

_DAEMON: Final = "agentrio-daemon-v1"
_CLIENT: Final = "agentrio-client-v1"
_HTTP: Final = "agentrio-http-v1"


def new_nonce() -> str:
    """A fresh random nonce (32 bytes, URL-safe base64)."""
    return secrets.token_urlsafe(32)


def nonce_ok(nonce: str) -> bool:
    """Whether ``nonce`` has the shape of `NONCE_PATTERN`."""
    return NONCE_PATTERN.fullmatch(nonce) is not None


def _mac(token: str, label: str, client_nonce: str, daemon_nonce: str) -> str:
    message = f"{label}|{client_nonce}|{daemon_nonce}".encode()
    return hmac.new(token.encode(), message, hashlib.sha256).hexdigest()


def daemon_proof(token: str, client_nonce: str, daemon_nonce: str) -> str:
    """The daemon's proof in ``challenge``."""
    return _mac(token, _DAEMON, client_nonce, daemon_nonce)


def client_proof(token: str, client_nonce: str, daemon_nonce: str) -> str:
    """The client's proof in ``prove``."""
    return _mac(token, _CLIENT, client_nonce, daemon_nonce)


def http_key(token: str, client_nonce: str, daemon_nonce: str) -> str:
    """The bearer value of this connection's HTTP calls (valid while it is open)."""
    return _mac(token, _HTTP, client_nonce, daemon_nonce)


def proof_ok(presented: str, expected: str) -> bool:
    """Constant-time comparison of two proofs."""
    return hmac.compare_digest(presented.encode(), expected.encode())
