"""agentrio's Trio client: what scripts, tests and the REPL use to talk to a daemon.

``from agentrio import connect`` — see `agentrio.client` for a tour. The package sits
on top of the sans-IO `agentrio.protocol` (frames, events, HTTP bodies); its one I/O
boundary is `agentrio.transport`, which turns every library error into a `ClientError`
(`agentrio.errors`). The daemon (`agentrio.engine`) never imports it.

This package is also the parent of the daemon, the protocol and the REPL, so its names
load on first use (PEP 562): ``python -m agentrio.engine`` must not pay for the client.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentrio.client import Client as Client
    from agentrio.connecting import connect as connect
    from agentrio.connecting import new_window_hash as new_window_hash
    from agentrio.connecting import open_client as open_client
    from agentrio.errors import AuthRefused as AuthRefused
    from agentrio.errors import ClientError as ClientError
    from agentrio.errors import DaemonNotFound as DaemonNotFound
    from agentrio.errors import Disconnected as Disconnected
    from agentrio.errors import HandshakeError as HandshakeError
    from agentrio.errors import StartFailed as StartFailed
    from agentrio.errors import Timeout as Timeout
    from agentrio.errors import Unreachable as Unreachable
    from agentrio.handles import AskNotice as AskNotice
    from agentrio.handles import Decision as Decision
    from agentrio.handles import EventCursor as EventCursor
    from agentrio.handles import Listener as Listener
    from agentrio.handles import Rule as Rule
    from agentrio.handles import RunHandle as RunHandle
    from agentrio.handles import Subscription as Subscription
    from agentrio.home import default_home as default_home
    from agentrio.home import read_address as read_address
    from agentrio.inbox import InboxStatistics as InboxStatistics
    from agentrio.inbox import Limits as Limits

__all__ = [
    "AskNotice",
    "AuthRefused",
    "Client",
    "ClientError",
    "DaemonNotFound",
    "Decision",
    "Disconnected",
    "EventCursor",
    "HandshakeError",
    "InboxStatistics",
    "Limits",
    "Listener",
    "Rule",
    "RunHandle",
    "StartFailed",
    "Subscription",
    "Timeout",
    "Unreachable",
    "connect",
    "default_home",
    "new_window_hash",
    "open_client",
    "read_address",
]

#: Where each public name lives.
_HOMES: dict[str, str] = {
    "AskNotice": "agentrio.handles",
    "AuthRefused": "agentrio.errors",
    "Client": "agentrio.client",
    "ClientError": "agentrio.errors",
    "DaemonNotFound": "agentrio.errors",
    "Decision": "agentrio.handles",
    "Disconnected": "agentrio.errors",
    "EventCursor": "agentrio.handles",
    "HandshakeError": "agentrio.errors",
    "InboxStatistics": "agentrio.inbox",
    "Limits": "agentrio.inbox",
    "Listener": "agentrio.handles",
    "Rule": "agentrio.handles",
    "RunHandle": "agentrio.handles",
    "StartFailed": "agentrio.errors",
    "Subscription": "agentrio.handles",
    "Timeout": "agentrio.errors",
    "Unreachable": "agentrio.errors",
    "connect": "agentrio.connecting",
    "default_home": "agentrio.home",
    "new_window_hash": "agentrio.connecting",
    "open_client": "agentrio.connecting",
    "read_address": "agentrio.home",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
