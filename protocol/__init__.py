"""agentrio's wire protocol: frames, events, HTTP bodies and their one codec.

Sans-IO: nothing here imports trio, httpx or trio-websocket (the Trio client is the
`agentrio` package).
"""

from __future__ import annotations

from agentrio.protocol import events as events
from agentrio.protocol import frames as frames
from agentrio.protocol import http as http
from agentrio.protocol.codec import converter as converter
from agentrio.protocol.codec import decode as decode
from agentrio.protocol.codec import decode_client_frame as decode_client_frame
from agentrio.protocol.codec import decode_server_frame as decode_server_frame
from agentrio.protocol.codec import dumps as dumps
from agentrio.protocol.codec import structure as structure
from agentrio.protocol.codec import unstructure as unstructure
from agentrio.protocol.errors import ErrorCode as ErrorCode
from agentrio.protocol.errors import FrameDecodeError as FrameDecodeError
from agentrio.protocol.frames import PROTOCOL_VERSION as PROTOCOL_VERSION

__all__ = [
    "PROTOCOL_VERSION",
    "ErrorCode",
    "FrameDecodeError",
    "converter",
    "decode",
    "decode_client_frame",
    "decode_server_frame",
    "dumps",
    "events",
    "frames",
    "http",
    "structure",
    "unstructure",
]
