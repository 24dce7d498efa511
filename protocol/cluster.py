"""Messages between daemons that share one Redis (issue 21; docs/deployment.md).

Several daemons on one ``[store]`` (Redis, same prefix) talk over Redis pub/sub: one
broadcast channel every daemon reads, and one channel per daemon for what is meant
for it alone. Each message is one JSON object tagged by ``"type"`` and names its
``sender`` (a daemon id, 16 lowercase hex, new at every start). They are frozen attrs
classes like every frame, (de)serialised by the one converter (`encode_peer_message`,
`decode_peer_message`); docs/protocol.md ("Between daemons") shows each.

What travels:

- `Heartbeat` (broadcast, every second and at once when this daemon's listeners
  change; confirmed by a `PeerAnswer` from every daemon when a listener is new): the
  daemon is alive, and these are its front-ends' listeners (R2). A
  daemon not heard from for a few heartbeats counts as dead: its listeners stop
  counting and its asks are withdrawn (R3, R6: fail closed, never approve).
- `Goodbye` (broadcast): a clean shutdown, so peers need not wait for the timeout.
- `AskShown`, `AskGone`, `AskVerified` (to the listener's daemon): an ask of a task
  running on the sender was claimed by, withdrawn from, or password-checked for one
  listener of the receiver (R1-R7 across daemons).
- `AckAsk` (to the ask's daemon, or broadcast like `AnswerAsk`): a front-end of the
  sender drew an ask of a task running on the receiver (issue 34), which marks it
  acknowledged; nothing answers it (a lost one leaves the ask ``late``, nothing more).
- `AnswerAsk` (to the ask's daemon, or broadcast when the answering daemon does not
  know which one runs it): one reply to one ask; answered by `PeerAnswer`.
- `Control` (broadcast): cancel, pause or steer a task that runs on some other
  daemon (R35, R40, R41); answered by `PeerAnswer` from every daemon, ``found`` true
  from the one that runs it.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar, Final

import attrs

from agentrio.protocol.causes import Cause, person_cause
from agentrio.protocol.codec import converter, dumps
from agentrio.protocol.frames import OMIT_DEFAULT, Ask, Reply
from agentrio.protocol.legacy import upgrade_peer

__all__ = [
    "PEER_MESSAGE_TYPES",
    "AckAsk",
    "AnswerAsk",
    "AskGone",
    "AskShown",
    "AskVerified",
    "Control",
    "Goodbye",
    "Heartbeat",
    "PeerAnswer",
    "PeerListener",
    "PeerMessage",
    "decode_peer_message",
    "encode_peer_message",
]


@attrs.frozen(kw_only=True)
class PeerListener:
    """One listener of a front-end connected to the sending daemon (R2): asks of
    sessions starting with ``prefix``; a ``passive`` one is an event subscriber of
    session ``session_id`` (R8 B), which counts but never takes asks."""

    id: str
    prefix: str
    passive: bool = False
    session_id: str = ""
    #: The front-end it belongs to (its ``hello``'s client, issue 34), for asks' states.
    client: str = attrs.field(default="", metadata=OMIT_DEFAULT)


@attrs.frozen(kw_only=True)
class Heartbeat:
    """The sender is alive; ``listeners`` is the whole list of its routable
    listeners now (not a change: a lost heartbeat is repaired by the next). With a
    ``request_id`` (sent at once when a front-end starts listening, issue 33) each
    receiver answers a `PeerAnswer` once it holds proxies of them, so the sender
    acknowledges ``listen`` only when every daemon routes to it."""

    TYPE: ClassVar[str] = "heartbeat"
    sender: str
    listeners: list[PeerListener] = attrs.field(factory=list)
    request_id: str = attrs.field(default="", metadata=OMIT_DEFAULT)


@attrs.frozen(kw_only=True)
class Goodbye:
    """The sender is shutting down: forget it now."""

    TYPE: ClassVar[str] = "goodbye"
    sender: str


@attrs.frozen(kw_only=True)
class AskShown:
    """Show ``ask`` through listener ``listener`` of the receiver: the sender runs the
    task and has claimed the ask for that listener (exactly one listener anywhere
    holds an ask at a time, R2)."""

    TYPE: ClassVar[str] = "ask_shown"
    sender: str
    listener: str
    ask: Ask


@attrs.frozen(kw_only=True)
class AskGone:
    """The ask ``id`` shown through ``listener`` is gone (``reason``: its task was
    cancelled, it was answered elsewhere, its grace ended…); stop showing it (R3)."""

    TYPE: ClassVar[str] = "ask_gone"
    sender: str
    listener: str
    id: str
    reason: str


@attrs.frozen(kw_only=True)
class AskVerified:
    """The system password passed on through ``listener`` for ask ``id`` was checked
    (R7)."""

    TYPE: ClassVar[str] = "ask_verified"
    sender: str
    listener: str
    id: str
    ok: bool
    error: str = ""


@attrs.frozen(kw_only=True)
class AckAsk:
    """Front-end ``client`` of the sender drew the ask ``id`` (issue 34): shown through
    the receiver's proxy of listener ``listener`` of the sender, or (``listener``
    empty: the page over HTTP, a subscriber) an ask of one of ``sessions``."""

    TYPE: ClassVar[str] = "ack_ask"
    sender: str
    id: str
    client: str
    listener: str = attrs.field(default="", metadata=OMIT_DEFAULT)
    sessions: list[str] = attrs.field(factory=list, metadata=OMIT_DEFAULT)


@attrs.frozen(kw_only=True)
class AnswerAsk:
    """``reply`` to the ask ``reply.id``, through the receiver's proxy of listener
    ``listener`` of the sender (the one it was shown through), or through none
    (``listener`` empty: an HTTP caller or a session subscriber, allowed only for an
    ask of one of ``sessions``). The ask's daemon answers with a `PeerAnswer`."""

    TYPE: ClassVar[str] = "answer_ask"
    sender: str
    request_id: str
    reply: Reply
    listener: str = ""
    sessions: list[str] = attrs.field(factory=list)


@attrs.frozen(kw_only=True)
class Control:
    """Stop the task ``task_hash`` of session ``session_id`` with ``cause``, or (no
    cause) steer it with ``text``, wherever it runs. (Older daemons sent ``op``.)"""

    TYPE: ClassVar[str] = "control"
    sender: str
    request_id: str
    session_id: str
    task_hash: str
    cause: Cause | None = attrs.field(default=None, validator=person_cause)
    text: str = ""


@attrs.frozen(kw_only=True)
class PeerAnswer:
    """The answer to request ``request_id``: ``found`` when the receiver had what it
    named (the task runs there, the ask is open there); ``ok`` when it did it;
    otherwise ``code``/``message`` are the error it met (a protocol error code)."""

    TYPE: ClassVar[str] = "peer_answer"
    sender: str
    request_id: str
    found: bool
    ok: bool = False
    cancelled: bool = False
    code: str = ""
    message: str = ""


PeerMessage = (
    Heartbeat
    | Goodbye
    | AskShown
    | AskGone
    | AskVerified
    | AckAsk
    | AnswerAsk
    | Control
    | PeerAnswer
)

PEER_MESSAGE_TYPES: Final[dict[str, type[Any]]] = {
    cls.TYPE: cls
    for cls in (
        Heartbeat,
        Goodbye,
        AskShown,
        AskGone,
        AskVerified,
        AckAsk,
        AnswerAsk,
        Control,
        PeerAnswer,
    )
}


def encode_peer_message(message: PeerMessage) -> str:
    """The JSON text of ``message``, its ``type`` first."""
    body = converter.unstructure(message)
    return dumps({"type": type(message).TYPE, **body})


def decode_peer_message(data: str | bytes) -> PeerMessage:
    """The message of a JSON text: `ValueError` for anything else (a peer of another
    version, or something that is not a daemon publishing on the channel)."""
    try:
        raw = json.loads(data)
    except ValueError as exc:
        raise ValueError(f"not JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise ValueError("not a JSON object")
    cls = PEER_MESSAGE_TYPES.get(str(raw.pop("type", "")))
    if cls is None:
        raise ValueError("unknown peer message type")
    try:
        message: PeerMessage = converter.structure(upgrade_peer(raw, cls.TYPE), cls)
    except Exception as exc:
        raise ValueError(f"malformed {cls.TYPE}: {exc}") from None
    return message
