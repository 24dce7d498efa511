"""Cancel, pause and steer a task that runs on another daemon (issue 21; R35, R40,
R41, R46, R52).

A ``POST …/cancel/{h}``, ``…/pause/{h}``, a ``POST /v1/send`` that steers, or a
``steer`` frame may reach any daemon behind the load balancer. When the task does not
run on the one that got it, `PeerControl` asks every live peer (`Control`); the one
that runs it acts and answers ``found``, the others answer not found. Nobody runs it:
the caller answers as for a task running nowhere (the stale cancel of SPEC §7).

A WebSocket ``cancel`` frame is not routed: a connection may cancel only what it
started (R46), and what it started runs on its own daemon.
"""

from __future__ import annotations

from agentrio.engine.core import Engine
from agentrio.engine.errors import AgentrioError, error_of
from agentrio.engine.server.peers import Peers
from agentrio.protocol.causes import Cause
from agentrio.protocol.cluster import Control, PeerAnswer, PeerMessage

__all__ = ["PeerControl"]


class PeerControl:
    """Both ends of control across daemons (see the module docstring)."""

    def __init__(self, peers: Peers, engine: Engine) -> None:
        self._peers = peers
        self._engine = engine
        peers.handle(Control, self._on_control)

    async def cancel(self, session_id: str, task_hash: str, cause: Cause) -> bool | None:
        """Stop the task with ``cause`` on the daemon that runs it: whether it was
        cancelled there (False: it was already ending), or None when no peer runs it."""
        answer = await self._ask(cause, session_id, task_hash)
        return None if answer is None else answer.cancelled

    async def steer(self, session_id: str, task_hash: str, text: str) -> bool:
        """Steer the task on the daemon that runs it; False when no peer runs it.
        Raises the error the task's daemon met (e.g. `BadRequest` for empty text)."""
        return await self._ask(None, session_id, task_hash, text) is not None

    async def _ask(
        self, cause: Cause | None, session_id: str, task_hash: str, text: str = ""
    ) -> PeerAnswer | None:
        """Ask the peers to stop (``cause``) or steer (None, ``text``) the task."""
        me = self._peers.id
        answers = await self._peers.request(
            lambda rid: Control(
                sender=me,
                request_id=rid,
                cause=cause,
                session_id=session_id,
                task_hash=task_hash,
                text=text,
            )
        )
        found = next((answer for answer in answers if answer.found), None)
        if found is not None and not found.ok:
            raise error_of(found.code, found.message)
        return found

    async def _on_control(self, message: PeerMessage) -> None:
        assert isinstance(message, Control)
        engine = self._engine
        if engine.find_run(message.task_hash, message.session_id) is None:
            await self._peers.answer(message, found=False)
            return
        try:
            cancelled = False
            if message.cause is None:
                engine.steer(message.session_id, message.task_hash, message.text)
            else:
                cancelled = engine.cancel(
                    message.task_hash, message.cause, session_id=message.session_id
                )
        except AgentrioError as exc:
            await self._peers.answer(message, found=True, error=exc)
        else:
            await self._peers.answer(message, found=True, cancelled=cancelled)
