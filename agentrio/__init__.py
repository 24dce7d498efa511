"""agentrio's Trio client: what scripts, tests and the REPL use to talk to a daemon.

``from agentrio import connect`` — see `agentrio.client` for a tour. The package sits
on top of the sans-IO `protocol` (frames, events, HTTP bodies); its one I/O boundary
is `agentrio.transport`, which turns every library error into a `ClientError`
(`agentrio.errors`). The daemon (`engine`) never imports it.
"""

from __future__ import annotations

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
