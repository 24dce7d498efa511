"""A fake Telegram Bot API server for the tests: loopback HTTP, one thread per request.

It implements what the bot uses — ``getMe``, ``getUpdates`` (long poll), ``sendMessage``,
``editMessageText``, ``deleteMessage``, ``answerCallbackQuery`` (and answers ``true``
to any other method, e.g. ``deleteWebhook``) — plays a person through scripted updates
(`FakeTelegram.say`, `FakeTelegram.press`), records every message the bot sent and
what became of it, and fails a method on demand (`FakeTelegram.fail_next`: a 429 with
``retry_after``, a 502, …). `FakeTelegram.transcript` renders the conversation as
markdown (docs/frontends.md shows one).

The request bodies are python-telegram-bot's: form-encoded, complex values as JSON.
"""

from __future__ import annotations

import html
import json
import re
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs

import attrs

BOT = {"id": 4242, "is_bot": True, "first_name": "agentrio", "username": "agentrio_test_bot"}
_JSON_FIELDS = {"reply_markup", "allowed_updates", "entities"}


@attrs.define
class Sent:
    """A message of the bot as the fake keeps it (its latest text)."""

    chat: int
    message_id: int
    text: str
    markup: dict[str, Any] | None
    history: list[str] = attrs.field(factory=list)
    deleted: bool = False
    #: The labels of the last buttons it carried (kept after they are taken away).
    shown_buttons: list[str] = attrs.field(factory=list)

    def __attrs_post_init__(self) -> None:
        self.remember_buttons()

    def remember_buttons(self) -> None:
        if self.buttons:
            self.shown_buttons = [label for label, _ in self.buttons]

    @property
    def buttons(self) -> list[tuple[str, str]]:
        rows = (self.markup or {}).get("inline_keyboard", [])
        return [(b["text"], b["callback_data"]) for row in rows for b in row]

    @property
    def plain(self) -> str:
        return html.unescape(re.sub(r"<[^>]+>", "", self.text))


@attrs.define
class Failure:
    status: int
    retry_after: int | None = None
    description: str = "Internal Server Error"


class FakeTelegram:
    def __init__(self, token: str = "123:TEST") -> None:
        self.token = token
        self.lock = threading.Condition()
        self.updates: list[dict[str, Any]] = []
        self.next_update = 1
        self.next_message = 1000
        self.sent: list[Sent] = []
        #: Every call: (method, params, status answered).
        self.calls: list[tuple[str, dict[str, Any], int, float]] = []
        #: Person messages (chat, message id, text) and whether the bot deleted them.
        self.person_messages: dict[tuple[int, int], str] = {}
        self.deleted: set[tuple[int, int]] = set()
        self.answered: dict[str, str] = {}
        self.failures: dict[str, list[Failure]] = {}
        #: The transcript: ("person"|"bot"|"press"|"deleted", text).
        self.log: list[tuple[str, str]] = []
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    # ------------------------------------------------------------------ life

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/bot"

    def start(self) -> FakeTelegram:
        self.thread.start()
        return self

    def close(self) -> None:
        with self.lock:
            self.lock.notify_all()
        self.server.shutdown()
        self.server.server_close()

    # ------------------------------------------------------------------ the person

    def _push(self, update: dict[str, Any]) -> None:
        with self.lock:
            update["update_id"] = self.next_update
            self.next_update += 1
            self.updates.append(update)
            self.lock.notify_all()

    def say(self, text: str, *, user: int = 111, chat: int | None = None) -> int:
        chat = user if chat is None else chat
        with self.lock:
            self.next_message += 1
            message_id = self.next_message
            self.person_messages[(chat, message_id)] = text
        self.log.append(("person", text))
        self._push(
            {
                "message": {
                    "message_id": message_id,
                    "date": int(time.time()),
                    "chat": {"id": chat, "type": "private" if chat > 0 else "group"},
                    "from": {"id": user, "is_bot": False, "first_name": f"user{user}"},
                    "text": text,
                }
            }
        )
        return message_id

    def press(self, message: Sent, label: str, *, user: int = 111) -> str:
        """Press the button labelled ``label`` (a prefix is enough) under ``message``."""
        data = next(d for text, d in message.buttons if text.startswith(label))
        return self.press_data(message, data, user=user)

    def press_data(self, message: Sent, data: str, *, user: int = 111) -> str:
        press_id = f"cb{self.next_update}"
        label = next((t for t, d in message.buttons if d == data), data)
        self.log.append(("press", label))
        self._push(
            {
                "callback_query": {
                    "id": press_id,
                    "from": {"id": user, "is_bot": False, "first_name": f"user{user}"},
                    "chat_instance": "ci",
                    "data": data,
                    "message": self._message_json(message.chat, message.message_id, message.text),
                }
            }
        )
        return press_id

    def fail_next(self, method: str, status: int, *, retry_after: int | None = None) -> None:
        with self.lock:
            self.failures.setdefault(method, []).append(Failure(status, retry_after))

    # ------------------------------------------------------------------ reading

    def messages(self, chat: int = 111) -> list[Sent]:
        with self.lock:
            return [m for m in self.sent if m.chat == chat and not m.deleted]

    def find(self, predicate: Callable[[Sent], bool], chat: int = 111) -> Sent | None:
        return next((m for m in reversed(self.messages(chat)) if predicate(m)), None)

    def with_text(self, needle: str, chat: int = 111) -> Sent | None:
        return self.find(lambda m: needle in m.plain, chat)

    def calls_of(self, method: str) -> list[tuple[str, dict[str, Any], int, float]]:
        with self.lock:
            return [c for c in self.calls if c[0] == method]

    def transcript(self) -> str:
        """The conversation as markdown: the person's lines quoted, the bot's as their
        final text (HTML turned back into markdown), presses in brackets."""
        lines: list[str] = []
        for who, text in self.log:
            if who == "person":
                lines.append(f"**you:** {text}")
            elif who == "press":
                lines.append(f"**you press:** [{text}]")
            elif who == "deleted":
                lines.append(f"*(the bot deleted your message: {text})*")
            else:
                sent = next((m for m in self.sent if str(m.message_id) == text), None)
                if sent is None or sent.deleted:
                    continue
                buttons = " ".join(f"[{label}]" for label in sent.shown_buttons)
                body = html_to_markdown(sent.text).strip("\n")
                lines.append(f"**bot:**\n\n{body}" + (f"\n\n{buttons}" if buttons else ""))
        return "\n\n".join(lines) + "\n"

    # ------------------------------------------------------------------ the API

    def _message_json(self, chat: int, message_id: int, text: str) -> dict[str, Any]:
        return {
            "message_id": message_id,
            "date": int(time.time()),
            "chat": {"id": chat, "type": "private" if chat > 0 else "group"},
            "from": BOT,
            "text": text,
        }

    def _call(self, method: str, params: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        with self.lock:
            queue = self.failures.get(method)
            failure = queue.pop(0) if queue else None
        if failure is not None:
            body: dict[str, Any] = {"ok": False, "error_code": failure.status}
            body["description"] = (
                f"Too Many Requests: retry after {failure.retry_after}"
                if failure.status == 429
                else failure.description
            )
            if failure.retry_after is not None:
                body["parameters"] = {"retry_after": failure.retry_after}
            return failure.status, body
        handler = getattr(self, f"_api_{method}", None)
        result = handler(params) if handler else True
        if isinstance(result, tuple):
            return result
        return 200, {"ok": True, "result": result}

    def _api_getMe(self, params: dict[str, Any]) -> Any:
        return {
            **BOT,
            "can_join_groups": True,
            "can_read_all_group_messages": False,
            "supports_inline_queries": False,
        }

    def _api_getUpdates(self, params: dict[str, Any]) -> Any:
        offset = int(params.get("offset", 0) or 0)
        deadline = time.monotonic() + min(float(params.get("timeout", 0) or 0), 5.0)
        with self.lock:
            while True:
                self.updates = [u for u in self.updates if u["update_id"] >= offset]
                if self.updates or time.monotonic() >= deadline:
                    return list(self.updates)
                self.lock.wait(max(0.0, deadline - time.monotonic()))

    def _api_sendMessage(self, params: dict[str, Any]) -> Any:
        chat = int(params["chat_id"])
        with self.lock:
            self.next_message += 1
            sent = Sent(chat, self.next_message, params["text"], params.get("reply_markup"))
            sent.history.append(sent.text)
            self.sent.append(sent)
            self.log.append(("bot-message", str(sent.message_id)))
            self.lock.notify_all()
        return self._message_json(chat, sent.message_id, sent.text)

    def _api_editMessageText(self, params: dict[str, Any]) -> Any:
        chat, message_id = int(params["chat_id"]), int(params["message_id"])
        with self.lock:
            sent = next(
                (m for m in self.sent if (m.chat, m.message_id) == (chat, message_id)), None
            )
            if sent is None or sent.deleted:
                return 400, {
                    "ok": False,
                    "error_code": 400,
                    "description": "Bad Request: message to edit not found",
                }
            if sent.text == params["text"] and sent.markup == params.get("reply_markup"):
                return 400, {
                    "ok": False,
                    "error_code": 400,
                    "description": "Bad Request: message is not modified",
                }
            sent.text, sent.markup = params["text"], params.get("reply_markup")
            sent.remember_buttons()
            sent.history.append(sent.text)
            self.lock.notify_all()
        return self._message_json(chat, message_id, sent.text)

    def _api_deleteMessage(self, params: dict[str, Any]) -> Any:
        key = (int(params["chat_id"]), int(params["message_id"]))
        with self.lock:
            self.deleted.add(key)
            if key in self.person_messages:
                self.log.append(("deleted", "•" * 8))
            for sent in self.sent:
                if (sent.chat, sent.message_id) == key:
                    sent.deleted = True
        return True

    def _api_answerCallbackQuery(self, params: dict[str, Any]) -> Any:
        with self.lock:
            self.answered[params["callback_query_id"]] = params.get("text", "")
            self.lock.notify_all()
        return True

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                self._serve()

            def do_GET(self) -> None:
                self._serve()

            def _serve(self) -> None:
                prefix = f"/bot{fake.token}/"
                if not self.path.startswith(prefix):
                    self._reply(404, {"ok": False, "error_code": 404, "description": "Not Found"})
                    return
                method = self.path[len(prefix) :].split("?")[0]
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length).decode() if length else ""
                params = _params(raw, self.headers.get("Content-Type", ""))
                status, body = fake._call(method, params)
                with fake.lock:
                    fake.calls.append((method, params, status, time.monotonic()))
                self._reply(status, body)

            def _reply(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    pass

        return Handler


def _params(raw: str, content_type: str) -> dict[str, Any]:
    if not raw:
        return {}
    if content_type.startswith("application/json"):
        return dict(json.loads(raw))
    params: dict[str, Any] = {k: v[0] for k, v in parse_qs(raw, keep_blank_values=True).items()}
    for key in _JSON_FIELDS & params.keys():
        params[key] = json.loads(params[key])
    return params


def html_to_markdown(text: str) -> str:
    """The bot's HTML as markdown, for transcripts."""
    text = re.sub(r"<pre>", "\n```\n", text)
    text = re.sub(r"</pre>", "\n```\n", text)
    text = re.sub(r"</?code>", "`", text)
    text = re.sub(r"</?b>", "**", text)
    return html.unescape(text)
