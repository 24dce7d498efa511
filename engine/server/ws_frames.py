"""What a ``/v1/ws`` connection answers, kept apart from the socket handling in
`agentrio.engine.server.ws`: the frames of command results, asks and password checks, and the
``ref`` of an error.

The frames a connection needs no state of its own to answer — ``cancel`` (its id is
passed in, for R46), ``steer``, ``background_cancel`` and the list queries — go
through `answer_command`: one call of the command layer, its result encoded as the
frame protocol 1 defines. A frame with a ``request_id`` gets exactly one answer naming
it (its list frame, else ``ok``); one without gets its list frame or nothing.
"""

from __future__ import annotations

import json
from typing import Any, Final

from agentrio.engine.server.ask_frames import ask_frame, verify_frame
from agentrio.engine.server.commands import Commands
from agentrio.protocol.frames import (
    AllowedList,
    BackgroundCancel,
    Cancel,
    ClientFrame,
    Compact,
    CompactedSession,
    ForgetAllowed,
    LegList,
    ListAllowed,
    ListLegs,
    ListMcp,
    ListPending,
    McpList,
    ModelInfo,
    Ok,
    PendingList,
    ServerFrame,
    SetModel,
    Steer,
)

__all__ = [
    "COMMAND_FRAMES",
    "MAX_REF",
    "CommandFrame",
    "ack",
    "answer_command",
    "ask_frame",
    "ref_of_frame",
    "ref_of_text",
    "verify_frame",
]

#: The longest ask id or task hash echoed back as the ``ref`` of an ``error`` frame
#: (a ``request_id`` of a decoded frame is echoed whole: the client matches it).
MAX_REF: Final = 128

CommandFrame = (
    Cancel
    | Steer
    | BackgroundCancel
    | ListPending
    | ListLegs
    | ListMcp
    | ListAllowed
    | ForgetAllowed
    | SetModel
    | Compact
)
#: The frames `answer_command` takes.
COMMAND_FRAMES: Final = CommandFrame.__args__


async def answer_command(
    commands: Commands, frame: CommandFrame, *, connection_id: str
) -> ServerFrame | None:
    """Run ``frame``'s command for connection ``connection_id``; the frame answering
    it, if any. Engine errors propagate: the caller reports them."""
    match frame:
        case Cancel():
            await commands.cancel(frame, connection_id=connection_id)  # R46
        case Steer():
            await commands.steer(frame)
        case BackgroundCancel():
            commands.cancel_leg(frame)
        case ListPending(session_id=session_id, origin=origin, request_id=request_id):
            tasks = (await commands.pending(frame)).tasks
            return PendingList(
                session_id=session_id, origin=origin, tasks=tasks, request_id=request_id
            )
        case ListLegs(session_id=session_id, request_id=request_id):
            legs = commands.legs(frame).legs
            return LegList(session_id=session_id, legs=legs, request_id=request_id)
        case ListMcp(request_id=request_id):
            mcp = commands.engine.mcp
            return McpList(servers=mcp.infos() if mcp else [], request_id=request_id)
        case ListAllowed(session_id=session_id, request_id=request_id):
            rules = (await commands.allowed(frame)).rules
            return AllowedList(session_id=session_id, rules=rules, request_id=request_id)
        case ForgetAllowed(session_id=session_id, request_id=request_id):
            left = await commands.forget_allowed(frame)
            return AllowedList(
                session_id=session_id,
                rules=left.rules,
                removed=left.removed,
                request_id=request_id,
            )
        case Compact(session_id=session_id, request_id=request_id):
            compaction = await commands.compact(frame)
            return CompactedSession(
                session_id=session_id, summarised=compaction.summarised, request_id=request_id
            )
        case SetModel(session_id=session_id, request_id=request_id):
            model = commands.model(frame)
            return ModelInfo(
                session_id=session_id,
                name=model.name,
                model=model.model,
                choices=model.choices,
                request_id=request_id,
            )
    return ack(frame)


def ack(frame: Any) -> Ok | None:
    """The ``ok`` answering a handled control frame, when it asked for one."""
    request_id: str = frame.request_id
    return Ok(request_id=request_id) if request_id else None


def ref_of_text(text: str) -> str:
    """A best-effort ``ref`` from a frame that did not decode."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return ""
    if isinstance(value, dict):
        for key in ("request_id", "id", "task_hash"):
            ref = value.get(key)
            if isinstance(ref, str) and ref:
                return ref[:MAX_REF]
    return ""


def ref_of_frame(frame: ClientFrame) -> str:
    """The ``ref`` of an error about ``frame``: its ``request_id`` when it has one,
    else the ask id or task hash it names."""
    request_id = getattr(frame, "request_id", "")
    if isinstance(request_id, str) and request_id:
        return request_id
    for key in ("id", "task_hash"):
        ref = getattr(frame, key, None)
        if isinstance(ref, str):
            return ref[:MAX_REF]
    return ""
