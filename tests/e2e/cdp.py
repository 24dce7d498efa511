"""A small Chrome DevTools Protocol driver: headless Chromium without new packages.

`Chromium` starts the browser (``--remote-debugging-port=0``) and reads its address from
``<profile>/DevToolsActivePort``; `connect` opens the browser's DevTools WebSocket with
trio-websocket; `Page.open` makes a tab and drives it with ``Runtime.evaluate`` (click,
type, read the DOM) and ``Page.captureScreenshot``. Exceptions thrown in the page and
console errors are kept on the page so tests can assert there were none.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio
from trio_websocket import ConnectionClosed, WebSocketConnection, open_websocket_url

__all__ = ["CdpError", "Chromium", "Connection", "Page", "connect", "find_chromium"]

#: Seconds Chromium may take to write DevToolsActivePort.
START_DEADLINE_S = 20.0
#: Screenshots travel base64-encoded in one message.
MAX_MESSAGE_BYTES = 64 * 1024 * 1024


class CdpError(Exception):
    """A CDP call failed, or an evaluated expression threw."""


def find_chromium() -> str | None:
    """The Chromium binary on ``PATH`` (Debian names it ``chromium``)."""
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found is not None:
            return found
    return None


class Chromium:
    """A headless Chromium process with its own throwaway profile."""

    def __init__(self, binary: str, profile: Path, width: int = 1280, height: int = 860) -> None:
        profile.mkdir(parents=True, exist_ok=True)
        self.profile = profile
        self.log = (profile.parent / "chromium.log").open("ab")
        self.process = subprocess.Popen(
            [
                binary,
                "--headless",
                "--remote-debugging-port=0",
                f"--user-data-dir={profile}",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--no-default-browser-check",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--hide-scrollbars",
                "--mute-audio",
                f"--window-size={width},{height}",
                "about:blank",
            ],
            stdin=subprocess.DEVNULL,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.ws_url = self._wait_for_port()

    def _wait_for_port(self) -> str:
        path = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + START_DEADLINE_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise CdpError(f"chromium exited with {self.process.returncode}")
            try:
                port, ws_path = path.read_text().split()[:2]
            except (OSError, ValueError):
                time.sleep(0.05)
                continue
            return f"ws://127.0.0.1:{port}{ws_path}"
        raise CdpError("chromium did not write DevToolsActivePort in time")

    def close(self) -> None:
        """End the browser and its helper processes (its own process group)."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.log.close()


class _Call:
    def __init__(self) -> None:
        self.done = trio.Event()
        self.reply: dict[str, Any] = {}


class Connection:
    """One DevTools WebSocket: calls matched to replies by id; events go to pages."""

    def __init__(self, ws: WebSocketConnection) -> None:
        self._ws = ws
        self._next_id = 0
        self._calls: dict[int, _Call] = {}
        self.pages: dict[str, Page] = {}

    async def call(
        self, method: str, params: dict[str, Any] | None = None, session_id: str | None = None
    ) -> dict[str, Any]:
        self._next_id += 1
        ident = self._next_id
        message: dict[str, Any] = {"id": ident, "method": method, "params": params or {}}
        if session_id is not None:
            message["sessionId"] = session_id
        call = self._calls[ident] = _Call()
        await self._ws.send_message(json.dumps(message))
        await call.done.wait()
        if "error" in call.reply:
            raise CdpError(f"{method}: {call.reply['error']}")
        result: dict[str, Any] = call.reply.get("result", {})
        return result

    async def read_forever(self) -> None:
        try:
            while True:
                message = json.loads(await self._ws.get_message())
                ident = message.get("id")
                if ident is not None:
                    call = self._calls.pop(ident, None)
                    if call is not None:
                        call.reply = message
                        call.done.set()
                    continue
                page = self.pages.get(message.get("sessionId", ""))
                if page is not None:
                    page.on_event(message["method"], message.get("params", {}))
        except ConnectionClosed:
            for call in self._calls.values():
                call.reply = {"error": "devtools connection closed"}
                call.done.set()


@asynccontextmanager
async def connect(ws_url: str) -> AsyncIterator[Connection]:
    """The browser's DevTools connection, read by a background task while open."""
    async with (
        open_websocket_url(ws_url, max_message_size=MAX_MESSAGE_BYTES) as ws,
        trio.open_nursery() as nursery,
    ):
        connection = Connection(ws)
        nursery.start_soon(connection.read_forever)
        try:
            yield connection
        finally:
            nursery.cancel_scope.cancel()


class Page:
    """One tab, attached with a flat session."""

    def __init__(self, connection: Connection, session_id: str) -> None:
        self.connection = connection
        self.session_id = session_id
        self.exceptions: list[str] = []
        self.console_errors: list[str] = []

    @classmethod
    async def open(
        cls, connection: Connection, url: str, width: int = 1280, height: int = 860
    ) -> Page:
        target = await connection.call("Target.createTarget", {"url": "about:blank"})
        attached = await connection.call(
            "Target.attachToTarget", {"targetId": target["targetId"], "flatten": True}
        )
        page = cls(connection, attached["sessionId"])
        connection.pages[page.session_id] = page
        await page.call("Runtime.enable")
        await page.call("Log.enable")
        await page.call("Page.enable")
        await page.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
        )
        await page.navigate(url)
        return page

    async def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return await self.connection.call(method, params, self.session_id)

    def on_event(self, method: str, params: dict[str, Any]) -> None:
        if method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            description = details.get("exception", {}).get("description", "")
            self.exceptions.append(description or details.get("text", "exception"))
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            self.console_errors.append(params["entry"].get("text", ""))
        elif method == "Runtime.consoleAPICalled" and params.get("type") == "error":
            args = params.get("args", [])
            self.console_errors.append(" ".join(str(a.get("value", "")) for a in args))

    async def navigate(self, url: str) -> None:
        await self.call("Page.navigate", {"url": url})
        await self.wait_for("document.readyState === 'complete'", f"{url} to load")

    async def evaluate(self, expression: str) -> Any:
        """The JSON value of ``expression`` (promises are awaited); a throw raises."""
        result = await self.call(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
        )
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            text = details.get("exception", {}).get("description") or details.get("text")
            raise CdpError(f"{expression[:80]!r} threw: {text}")
        return result["result"].get("value")

    async def wait_for(self, expression: str, what: str, deadline_s: float = 20.0) -> Any:
        """Poll ``expression`` until it is truthy; its value. The deadline bounds a
        failure, it times nothing."""
        with trio.move_on_after(deadline_s):
            while True:
                value = await self.evaluate(expression)
                if value:
                    return value
                await trio.sleep(0.05)
        raise AssertionError(f"timed out waiting for {what}; the page:\n{await self._tail()}")

    async def _tail(self, chars: int = 3000) -> str:
        """The end of the page's visible text, for a failure message (best effort)."""
        try:
            text = await self.evaluate("document.body.innerText")
        except CdpError as exc:
            return f"(unreadable: {exc})"
        return str(text)[-chars:]

    async def wait_present(self, selector: str, what: str, deadline_s: float = 20.0) -> None:
        """Poll until an element matches ``selector``."""
        await self.wait_for(
            f"document.querySelector({json.dumps(selector)}) !== null", what, deadline_s
        )

    async def click(self, selector: str) -> None:
        """Click the first element matching ``selector`` (it must exist and be enabled)."""
        await self.evaluate(
            f"""(() => {{
                const node = document.querySelector({json.dumps(selector)});
                if (!node) throw new Error('nothing matches ' + {json.dumps(selector)});
                if (node.disabled) throw new Error('disabled: ' + {json.dumps(selector)});
                node.click();
                return true;
            }})()"""
        )

    async def fill(self, selector: str, text: str) -> None:
        """Set an input's value as typing would (an ``input`` event follows)."""
        await self.evaluate(
            f"""(() => {{
                const node = document.querySelector({json.dumps(selector)});
                if (!node) throw new Error('nothing matches ' + {json.dumps(selector)});
                node.focus();
                node.value = {json.dumps(text)};
                node.dispatchEvent(new Event('input', {{bubbles: true}}));
                return true;
            }})()"""
        )

    async def text(self, selector: str) -> str | None:
        """``textContent`` of the first match, or None."""
        value = await self.evaluate(
            f"document.querySelector({json.dumps(selector)})?.textContent ?? null"
        )
        return None if value is None else str(value)

    async def screenshot(self) -> bytes:
        shot = await self.call("Page.captureScreenshot", {"format": "png"})
        return base64.b64decode(shot["data"])
