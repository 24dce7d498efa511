"""Which agentrio session each chat talks to: ``<prefix><chat id>``, or after ``/new``
``<prefix><chat id>_<n>``. The choice outlives the front-end's process: it is kept in
``<home>/frontends/<name>.json`` (0600), written atomically.
"""

from __future__ import annotations

import json
import logging
import os
import re
from pathlib import Path

__all__ = ["SessionBook"]

log = logging.getLogger("agentrio.frontends")


class SessionBook:
    """Chat id → session id, for one platform (``prefix`` ``tg-``)."""

    def __init__(self, prefix: str, path: Path | None) -> None:
        self.prefix = prefix
        self.path = path
        self._pattern = re.compile(rf"{re.escape(prefix)}(-?[0-9A-Za-z]+)(?:_([0-9]+))?")
        self._sessions: dict[str, str] = self._load()

    def session_of(self, chat: str) -> str:
        return self._sessions.get(chat, f"{self.prefix}{chat}")

    def chat_of(self, session_id: str) -> str | None:
        """The chat a session of this platform belongs to (None: not one of ours)."""
        match = self._pattern.fullmatch(session_id)
        return match.group(1) if match else None

    def new_session(self, chat: str) -> str:
        """Start a new session for ``chat`` and remember it."""
        current = self._pattern.fullmatch(self.session_of(chat))
        number = int(current.group(2) or 1) + 1 if current else 2
        session = f"{self.prefix}{chat}_{number}"
        self._sessions[chat] = session
        self._save()
        return session

    def _load(self) -> dict[str, str]:
        if self.path is None:
            return {}
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            log.warning("%s unreadable, starting afresh: %s", self.path, exc)
            return {}
        sessions = data.get("sessions") if isinstance(data, dict) else None
        if not isinstance(sessions, dict):
            return {}
        return {
            str(chat): session
            for chat, session in sessions.items()
            if isinstance(session, str) and self.chat_of(session) == str(chat)
        }

    def _save(self) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump({"sessions": self._sessions}, handle)
        os.replace(tmp, self.path)
