"""The daemon's door: the token file, the bearer check and the WebSocket Origin check (R70).

The token is the only credential. It lives in ``<home>/token`` (mode 0600, made at the
first start, reused after), so anything that can read the user's home can talk to the
daemon and nothing else can. It is never logged, never echoed in an error and compared
in constant time.

The Origin check exists for browsers only: a page on another site may open a WebSocket
to ``127.0.0.1`` (browsers do not apply CORS to WebSockets), and although it cannot know
the token, refusing the upgrade outright keeps it from probing at all. Non-browser
clients (the REPL, scripts, curl) send no ``Origin`` and are let through to ``hello``.

The Host check exists for DNS rebinding (issue 29 finding 10): a page on
``evil.example`` whose name is made to resolve to 127.0.0.1 is same-origin with the
daemon in the browser's eyes, but its requests still say ``Host: evil.example``. Over
TCP only the daemon's own names are accepted (`own_hosts`), plus the hosts of
``[server] allowed_origins`` and ``[server] allowed_hosts``; the Unix socket has no
host to rebind and is not checked.
"""

from __future__ import annotations

import hmac
import os
import secrets
from collections.abc import Iterable
from pathlib import Path
from typing import Final
from urllib.parse import urlsplit

from agentrio.engine.store.files import make_home, open_private

__all__ = [
    "TOKEN_FILE",
    "bearer_ok",
    "host_allowed",
    "load_or_create_token",
    "origin_allowed",
    "own_hosts",
    "own_origins",
    "token_ok",
]

TOKEN_FILE: Final = "token"
_LOOPBACK_NAMES: Final = ("127.0.0.1", "localhost", "[::1]")


def load_or_create_token(home: Path) -> str:
    """The token of ``home``: read ``<home>/token``, or create it (0600) when it is
    missing or empty (in a home made 0700 if missing). Blocking: call it from a worker
    thread.

    Creation uses ``O_EXCL`` so two daemons starting at once cannot both write one; the
    loser reads the winner's token. The file's mode is tightened to 0600 if someone
    loosened it.
    """
    make_home(home)
    path = home / TOKEN_FILE
    try:
        token = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        token = ""
    if token:
        if path.stat().st_mode & 0o077:
            path.chmod(0o600)
        return token
    token = secrets.token_urlsafe(32)
    tmp = path.with_name(f".{TOKEN_FILE}.{os.getpid()}.tmp")
    fd = open_private(tmp, os.O_WRONLY | os.O_EXCL)
    try:
        os.write(fd, token.encode("ascii"))
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        # A link fails if another starter won the race: keep theirs.
        os.link(tmp, path)
    except FileExistsError:
        winner = path.read_text(encoding="utf-8").strip()
        if winner:
            token = winner
        else:
            os.replace(tmp, path)
            return token
    finally:
        tmp.unlink(missing_ok=True)
    return token


def token_ok(candidate: str | None, token: str) -> bool:
    """Constant-time comparison of a presented token with the real one."""
    if candidate is None:
        return False
    return hmac.compare_digest(candidate.encode("utf-8"), token.encode("utf-8"))


def bearer_ok(authorization: str | None, token: str) -> bool:
    """Whether an ``Authorization`` header value is ``Bearer <token>``."""
    if authorization is None:
        return False
    scheme, _, value = authorization.partition(" ")
    return scheme.lower() == "bearer" and token_ok(value.strip(), token)


def _own_names(host: str) -> set[str]:
    """``host`` as it appears in a URL, plus its loopback aliases when it is one."""
    shown = f"[{host}]" if ":" in host and not host.startswith("[") else host
    names = {shown.lower()}
    if shown in _LOOPBACK_NAMES:
        names.update(_LOOPBACK_NAMES)
    return names


def own_origins(host: str, port: int) -> frozenset[str]:
    """The ``Origin`` values of pages the daemon itself would serve at ``host:port``;
    a loopback host also accepts its loopback aliases."""
    return frozenset(f"http://{name}:{port}" for name in _own_names(host))


def own_hosts(
    host: str, port: int, *, allowed_origins: Iterable[str] = (), extra: Iterable[str] = ()
) -> frozenset[str]:
    """The ``Host`` header values the daemon at ``host:port`` answers over TCP: its own
    names with the port or without it (a rebinding page's Host is its own name, never
    these), the host part of each allowed origin (a reverse proxy passes it on) and
    each of ``extra`` (``[server] allowed_hosts``), all lower case."""
    names = _own_names(host)
    values = names | {f"{name}:{port}" for name in names}
    for origin in allowed_origins:
        netloc = urlsplit(origin.strip()).netloc
        if netloc:
            values.add(netloc.lower())
    values.update(value.strip().lower() for value in extra if value.strip())
    return frozenset(values)


def host_allowed(host_header: str | None, hosts: frozenset[str]) -> bool:
    """Whether a request over TCP with this ``Host`` header is for this daemon (a
    missing header is refused: every HTTP/1.1 client sends one)."""
    if host_header is None:
        return False
    return host_header.strip().lower() in hosts


def origin_allowed(origin: str | None, allowed: Iterable[str], own: Iterable[str]) -> bool:
    """Whether a WebSocket upgrade with this ``Origin`` header may proceed.

    No header (a non-browser client) is allowed; otherwise the origin must be one of
    ``allowed`` (``[server] allowed_origins``) or of ``own``. Comparison ignores case
    and a trailing slash, as origins are case-insensitive in scheme and host.
    """
    if origin is None:
        return True
    wanted = origin.strip().rstrip("/").lower()
    return any(wanted == o.strip().rstrip("/").lower() for o in (*allowed, *own))
