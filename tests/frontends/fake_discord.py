"""A fake Discord for the tests: the REST API and the gateway on one loopback port
(aiohttp, in a thread with its own asyncio loop).

REST: what discord.py calls — ``GET users/@me``, ``GET oauth2/applications/@me``,
``GET gateway/bot``, ``POST/PATCH/DELETE channels/{id}/messages[/{id}]``,
``POST interactions/{id}/{token}/callback``. The gateway speaks HELLO → IDENTIFY →
READY (or RESUME → RESUMED), answers heartbeats, and dispatches ``MESSAGE_CREATE`` (a
person writes, `FakeDiscord.say`) and ``INTERACTION_CREATE`` (a button press,
`FakeDiscord.press`); what is said before the bot is connected waits for it.

It records every message the bot sent and what became of it, fails a route on demand
(`FakeDiscord.fail_next`: a 429 with ``retry_after``, a 502, …), and renders the
conversation as markdown (`FakeDiscord.transcript`, shown in docs/frontends.md).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import attrs
from aiohttp import WSMsgType, web

BOT_ID = 4242
APPLICATION_ID = 4343
BOT_USER = {
    "id": str(BOT_ID),
    "username": "agentrio",
    "discriminator": "0",
    "global_name": "agentrio",
    "avatar": None,
    "bot": True,
}
ZWSP = "\u200b"


def dm_channel(user: int) -> int:
    """The id of the DM channel between ``user`` and the bot."""
    return 900_000 + user


def user_json(user: int) -> dict[str, Any]:
    return {
        "id": str(user),
        "username": f"user{user}",
        "discriminator": "0",
        "global_name": None,
        "avatar": None,
    }


#: A fenced code block or inline code: shown verbatim (no escapes inside).
_CODE = re.compile(r"```\n?(.*?)\n?```\n?|`([^`\n]+)`", re.S)


def unescape(markdown: str, *, fences: bool = False) -> str:
    """Discord's markdown as read: backslash escapes resolved outside code, zero-width
    spaces dropped; code blocks kept fenced when ``fences``."""
    out: list[str] = []
    position = 0
    for match in _CODE.finditer(markdown):
        out.append(re.sub(r"\\(.)", r"\1", markdown[position : match.start()], flags=re.S))
        block, inline = match.group(1), match.group(2)
        if block is not None:
            out.append(f"```\n{block}\n```\n" if fences else block)
        else:
            out.append(f"`{inline}`" if fences else inline)
        position = match.end()
    out.append(re.sub(r"\\(.)", r"\1", markdown[position:], flags=re.S))
    return "".join(out).replace(ZWSP, "")


def plain(markdown: str) -> str:
    """What a person reads: fences and escapes gone, zero-width spaces dropped."""
    return unescape(markdown)


@attrs.define
class Sent:
    """A message of the bot as the fake keeps it (its latest content)."""

    channel: int
    message_id: int
    text: str
    components: list[dict[str, Any]]
    allowed_mentions: Any = None
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
        return [
            (b["label"], b["custom_id"])
            for row in self.components
            for b in row.get("components", [])
            if b.get("type") == 2
        ]

    @property
    def rows(self) -> list[list[str]]:
        return [[b["label"] for b in row.get("components", [])] for row in self.components]

    @property
    def plain(self) -> str:
        return plain(self.text)


@attrs.define
class Failure:
    status: int
    retry_after: float | None = None


class FakeDiscord:
    def __init__(self, token: str = "TEST.TOKEN") -> None:
        self.token = token
        self.lock = threading.RLock()
        self.ids = itertools.count(1_000_000)
        self.sent: list[Sent] = []
        #: Every REST call: (method, route, status, monotonic time).
        self.calls: list[tuple[str, str, int, float]] = []
        self.person_messages: dict[tuple[int, int], str] = {}
        self.deleted: set[tuple[int, int]] = set()
        #: Interaction id → (callback type, content of its ephemeral notice).
        self.answered: dict[str, tuple[int, str]] = {}
        self.failures: dict[str, list[Failure]] = {}
        self.identified = 0
        self.dm_channels: set[int] = set()
        self.resumed = 0
        #: The transcript: ("person"|"bot-message"|"press"|"deleted", text).
        self.log: list[tuple[str, str]] = []
        self._pending: list[tuple[str, dict[str, Any]]] = []
        #: Text → event: the reply to a bot message containing the text waits for it.
        self._holds: dict[str, asyncio.Event] = {}
        self._sockets: list[web.WebSocketResponse] = []
        self._sequence = 0
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._runner: web.AppRunner | None = None

    # ------------------------------------------------------------------ life

    @property
    def port(self) -> int:
        return int(self._sock.getsockname()[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/v10"

    @property
    def gateway_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/gateway"

    def start(self) -> FakeDiscord:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._serve(), self._loop).result(10)
        return self

    def close(self) -> None:
        async def stop() -> None:
            for ws in list(self._sockets):
                await ws.close()
            if self._runner is not None:
                await self._runner.cleanup()

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    async def _serve(self) -> None:
        app = web.Application()
        app.router.add_get("/gateway", self._gateway)
        app.router.add_route("*", "/api/v10/{route:.*}", self._rest)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.SockSite(self._runner, self._sock).start()

    def disconnect(self) -> None:
        """Drop the gateway connection (the bot resumes)."""

        async def drop() -> None:
            for ws in list(self._sockets):
                await ws.close(code=4000)

        asyncio.run_coroutine_threadsafe(drop(), self._loop).result(10)

    # ------------------------------------------------------------------ the person

    def say(
        self, text: str, *, user: int = 111, channel: int | None = None, guild: int | None = None
    ) -> int:
        """A person writes ``text`` (in their DM with the bot, unless ``channel``)."""
        if channel is None:
            channel = dm_channel(user)
            self.dm_channels.add(channel)
        message_id = next(self.ids)
        with self.lock:
            self.person_messages[(channel, message_id)] = text
            self.log.append(("person", text))
        data: dict[str, Any] = {
            **self._message_json(channel, message_id, text, author=user_json(user)),
        }
        if guild is not None:
            data["guild_id"] = str(guild)
            data["member"] = {
                "roles": [],
                "flags": 0,
                "joined_at": _now(),
                "deaf": False,
                "mute": False,
            }
        self._dispatch("MESSAGE_CREATE", data)
        return message_id

    def press(self, message: Sent, label: str, *, user: int = 111, guild: int | None = None) -> str:
        """Press the button labelled ``label`` (a prefix is enough) under ``message``."""
        data = next(d for text, d in message.buttons if text.startswith(label))
        return self.press_data(message, data, user=user, guild=guild)

    def press_data(
        self, message: Sent, custom_id: str, *, user: int = 111, guild: int | None = None
    ) -> str:
        press_id = str(next(self.ids))
        label = next((t for t, d in message.buttons if d == custom_id), custom_id)
        with self.lock:
            self.log.append(("press", label))
        data: dict[str, Any] = {
            "id": press_id,
            "application_id": str(APPLICATION_ID),
            "type": 3,
            "data": {"custom_id": custom_id, "component_type": 2},
            "channel_id": str(message.channel),
            "channel": _channel_json(message.channel, guild),
            "token": f"itoken-{press_id}",
            "version": 1,
            "attachment_size_limit": 8_000_000,
            "app_permissions": "0",
            "locale": "en-US",
            "entitlements": [],
            "authorizing_integration_owners": {},
            "context": 1 if guild is None else 0,
            "message": self._message_json(
                message.channel, message.message_id, message.text, components=message.components
            ),
        }
        if guild is None:
            data["user"] = user_json(user)
        else:
            data["guild_id"] = str(guild)
            data["member"] = {
                "user": user_json(user),
                "roles": [],
                "flags": 0,
                "joined_at": _now(),
                "deaf": False,
                "mute": False,
                "permissions": "0",
            }
        self._dispatch("INTERACTION_CREATE", data)
        return press_id

    def fail_next(self, route: str, status: int, *, retry_after: float | None = None) -> None:
        """The next call of ``route`` ("POST messages", "PATCH messages", …) fails."""
        with self.lock:
            self.failures.setdefault(route, []).append(Failure(status, retry_after))

    # ------------------------------------------------------------------ reading

    def messages(self, channel: int | None = None) -> list[Sent]:
        channel = dm_channel(111) if channel is None else channel
        with self.lock:
            return [m for m in self.sent if m.channel == channel and not m.deleted]

    def find(self, predicate: Callable[[Sent], bool], channel: int | None = None) -> Sent | None:
        return next((m for m in reversed(self.messages(channel)) if predicate(m)), None)

    def with_text(self, needle: str, channel: int | None = None) -> Sent | None:
        return self.find(lambda m: needle in m.plain, channel)

    def calls_of(self, route: str) -> list[tuple[str, str, int, float]]:
        with self.lock:
            return [c for c in self.calls if c[1] == route]

    def transcript(self) -> str:
        """The conversation as markdown: the person's lines, the bot's messages as
        their final text, buttons and presses in brackets."""
        lines: list[str] = []
        with self.lock:
            log = list(self.log)
        for who, text in log:
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
                body = unescape(sent.text, fences=True)
                lines.append(f"**bot:**\n\n{body.strip()}" + (f"\n\n{buttons}" if buttons else ""))
        return "\n\n".join(lines) + "\n"

    # ------------------------------------------------------------------ gateway

    def _dispatch(self, event: str, data: dict[str, Any]) -> None:
        asyncio.run_coroutine_threadsafe(self._send_event(event, data), self._loop).result(10)

    async def _send_event(self, event: str, data: dict[str, Any]) -> None:
        live = [ws for ws in self._sockets if not ws.closed]
        if not live:
            self._pending.append((event, data))
            return
        self._sequence += 1
        await live[-1].send_json({"op": 0, "t": event, "s": self._sequence, "d": data})

    async def _gateway(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        await ws.send_json({"op": 10, "d": {"heartbeat_interval": 41250}})
        async for frame in ws:
            if frame.type is not WSMsgType.TEXT:
                continue
            payload = json.loads(frame.data)
            op = payload.get("op")
            if op == 1:
                await ws.send_json({"op": 11})
            elif op in (2, 6):
                await self._welcome(ws, op, payload.get("d") or {})
        if ws in self._sockets:
            self._sockets.remove(ws)
        return ws

    async def _welcome(self, ws: web.WebSocketResponse, op: int, data: dict[str, Any]) -> None:
        if data.get("token") != self.token:
            await ws.close(code=4004, message=b"Authentication failed.")
            return
        self._sequence += 1
        if op == 2:
            self.identified += 1
            ready = {
                "v": 10,
                "user": BOT_USER,
                "guilds": [],
                "session_id": f"session-{self.identified}",
                "resume_gateway_url": self.gateway_url,
                "application": {"id": str(APPLICATION_ID), "flags": 0},
                "private_channels": [],
            }
            await ws.send_json({"op": 0, "t": "READY", "s": self._sequence, "d": ready})
        else:
            self.resumed += 1
            await ws.send_json({"op": 0, "t": "RESUMED", "s": self._sequence, "d": {}})
        self._sockets.append(ws)
        pending, self._pending = self._pending, []
        for event, event_data in pending:
            await self._send_event(event, event_data)

    # ------------------------------------------------------------------ REST

    def _message_json(
        self,
        channel: int,
        message_id: int,
        text: str,
        *,
        author: dict[str, Any] = BOT_USER,
        components: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        return {
            "id": str(message_id),
            "channel_id": str(channel),
            "author": author,
            "content": text,
            "timestamp": _now(),
            "edited_timestamp": None,
            "tts": False,
            "mention_everyone": False,
            "mentions": [],
            "mention_roles": [],
            "attachments": [],
            "embeds": [],
            "pinned": False,
            "type": 0,
            "flags": 0,
            "components": components or [],
        }

    async def _rest(self, request: web.Request) -> web.StreamResponse:
        route = request.match_info["route"]
        authorized = request.headers.get("Authorization") == f"Bot {self.token}"
        if not authorized and not route.startswith("interactions/"):  # (its token is the URL's)
            return _json({"message": "401: Unauthorized", "code": 0}, status=401)
        body = await request.json() if request.can_read_body else {}
        key = _route_key(request.method, route)
        with self.lock:
            queue = self.failures.get(key)
            failure = queue.pop(0) if queue else None
        if failure is not None:
            response = _failure_response(failure)
        else:
            response = self._answer(request.method, route, body)
        with self.lock:
            self.calls.append((request.method, key, response.status, time.monotonic()))
        content = body.get("content") if isinstance(body, dict) else None
        for needle, released in list(self._holds.items()):
            if isinstance(content, str) and needle in content:
                await released.wait()
        return response

    def hold_replies(self, needle: str) -> Callable[[], None]:
        """Hold the reply to every bot message containing ``needle`` (the message is
        recorded at once) until the returned function is called: what a person can do
        while the bot still waits for its own message to be sent."""
        released = asyncio.Event()
        self._holds[needle] = released

        def release() -> None:
            self._holds.pop(needle, None)
            self._loop.call_soon_threadsafe(released.set)

        return release

    def _answer(self, method: str, route: str, body: Any) -> web.Response:
        parts = route.strip("/").split("/")
        if method == "GET" and route == "users/@me":
            return _json(BOT_USER)
        if method == "GET" and route == "oauth2/applications/@me":
            return _json(_application())
        if method == "GET" and route == "gateway/bot":
            return _json(
                {
                    "url": self.gateway_url,
                    "shards": 1,
                    "session_start_limit": {
                        "total": 1000,
                        "remaining": 999,
                        "reset_after": 0,
                        "max_concurrency": 1,
                    },
                }
            )
        if parts[0] == "channels" and len(parts) >= 3 and parts[2] == "messages":
            return self._messages(method, int(parts[1]), parts[3:], body)
        if parts[0] == "interactions" and method == "POST" and parts[-1] == "callback":
            return self._callback(parts[1], body)
        return _json({"message": "404: Not Found", "code": 0}, status=404)

    def _messages(self, method: str, channel: int, rest: list[str], body: Any) -> web.Response:
        with self.lock:
            if method == "POST" and not rest:
                sent = Sent(
                    channel,
                    next(self.ids),
                    body.get("content") or "",
                    body.get("components") or [],
                    body.get("allowed_mentions"),
                )
                sent.history.append(sent.text)
                self.sent.append(sent)
                self.log.append(("bot-message", str(sent.message_id)))
                return _json(
                    self._message_json(
                        channel, sent.message_id, sent.text, components=sent.components
                    )
                )
            message_id = int(rest[0]) if rest else 0
            if method == "DELETE":
                return self._delete(channel, message_id)
            target = next(
                (m for m in self.sent if (m.channel, m.message_id) == (channel, message_id)), None
            )
            if method != "PATCH" or target is None or target.deleted:
                return _json({"message": "Unknown Message", "code": 10008}, status=404)
            if "content" in body:
                target.text = body["content"] or ""
            if "components" in body:
                target.components = body["components"] or []
            target.remember_buttons()
            target.history.append(target.text)
            return _json(
                self._message_json(channel, message_id, target.text, components=target.components)
            )

    def _delete(self, channel: int, message_id: int) -> web.Response:
        key = (channel, message_id)
        if key in self.person_messages and channel in self.dm_channels:
            return _json(  # as Discord: no bot deletes a person's message in a DM
                {"message": "Cannot execute action on a DM channel", "code": 50003}, status=403
            )
        if key in self.person_messages:
            self.deleted.add(key)
            self.log.append(("deleted", "•" * 8))
            return web.Response(status=204)
        for sent in self.sent:
            if (sent.channel, sent.message_id) == key:
                sent.deleted = True
                self.deleted.add(key)
                return web.Response(status=204)
        return _json({"message": "Unknown Message", "code": 10008}, status=404)

    def _callback(self, interaction: str, body: Any) -> web.Response:
        kind = int(body.get("type", 0))
        content = (body.get("data") or {}).get("content") or ""
        with self.lock:
            if interaction in self.answered:
                return _json(
                    {"message": "Interaction has already been acknowledged.", "code": 40060},
                    status=400,
                )
            self.answered[interaction] = (kind, content)
        return _json(
            {
                "interaction": {
                    "id": interaction,
                    "type": 3,
                    "response_message_ephemeral": bool(content),
                },
            }
        )


def _route_key(method: str, route: str) -> str:
    """``POST messages``, ``PATCH messages``, ``DELETE messages``, ``POST callback``, or
    the method and route."""
    parts = route.strip("/").split("/")
    if parts[0] == "channels" and len(parts) >= 3:
        return f"{method} messages"
    if parts[0] == "interactions":
        return f"{method} callback"
    return f"{method} {route}"


def _failure_response(failure: Failure) -> web.Response:
    if failure.status == 429:
        retry = failure.retry_after or 1.0
        return _json(
            {"message": "You are being rate limited.", "retry_after": retry, "global": False},
            status=429,
            headers={"Via": "1.1 google", "Retry-After": str(int(retry + 0.999))},
        )
    return _json({"message": "Server Error", "code": 0}, status=failure.status)


def _application() -> dict[str, Any]:
    return {
        "id": str(APPLICATION_ID),
        "name": "agentrio",
        "description": "",
        "icon": None,
        "bot_public": False,
        "bot_require_code_grant": False,
        "verify_key": "0" * 64,
        "owner": {**BOT_USER, "id": "1", "bot": False, "username": "owner"},
        "flags": 0,
    }


def _json(body: Any, *, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    """A JSON answer with Discord's exact content type (discord.py decodes only
    ``application/json``, no charset)."""
    return web.Response(
        body=json.dumps(body).encode(),
        status=status,
        headers={"Content-Type": "application/json", **(headers or {})},
    )


def _channel_json(channel: int, guild: int | None) -> dict[str, Any]:
    if guild is None:
        return {"id": str(channel), "type": 1, "recipients": []}
    return {
        "id": str(channel),
        "type": 0,
        "guild_id": str(guild),
        "name": f"channel-{channel}",
        "position": 0,
        "permission_overwrites": [],
        "parent_id": None,
    }


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())
