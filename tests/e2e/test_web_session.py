"""The web page reopening a session after a daemon restart, and its Compact button, in
headless Chromium against the real daemon (issue 31 item 3; R87: the session is a
conversation, compacted with a ``compacted`` event; §7).

A session's exchange is made over HTTP, the daemon is stopped and started again (its
replay buffer gone), and the page opening the session shows the exchange from the
store; Compact folds it (the ``compacted`` event is shown) and the exchange is still
shown when the session is opened again.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import trio

from agentrio.protocol.codec import decode
from agentrio.protocol.http import HistoryList, SendStarted
from agentrio.testing import DaemonProcess, RunningDaemon
from tests.e2e.cdp import Chromium, Page, connect
from tests.e2e.test_web import chromium, needs_chromium, sign_in

__all__ = ["chromium"]  # the fixture, imported for these tests

SESSION = "chat-reopened"
SAID = "run: echo ada-was-here"


def _http(daemon: RunningDaemon) -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {daemon.token}"}
    return httpx.AsyncClient(base_url=daemon.base_url, headers=headers)


async def _one_exchange(daemon: RunningDaemon) -> str:
    """Run ``SAID`` in ``SESSION`` (allow-all) and wait for it in the history."""
    async with _http(daemon) as http:
        sent = await http.post(
            "/v1/send", json={"session_id": SESSION, "input": SAID, "allow_all": True}
        )
        assert sent.status_code == 202, sent.text
        task_hash = decode(sent.content, SendStarted).task_hash
        with trio.fail_after(20):
            while True:
                found = await http.get(f"/v1/session/{SESSION}/task/history")
                if task_hash in [t.task_hash for t in decode(found.content, HistoryList).tasks]:
                    return task_hash
                await trio.sleep(0.05)


def _earlier(task_hash: str) -> str:
    return json.dumps(f'#log .earlier[data-task="{task_hash}"]')


async def _open(page: Page, session_id: str) -> None:
    await page.fill("#open-session-id", session_id)
    await page.click("#open-session button[type=submit]")
    await page.wait_for(
        f"document.getElementById('chat-title').textContent === {json.dumps(session_id)} && "
        "document.getElementById('stream-status').textContent === 'live'",
        "the session opened",
    )


async def _shows_earlier(page: Page, task_hash: str) -> None:
    block = _earlier(task_hash)
    await page.wait_for(
        f"document.querySelector({block})?.querySelector('.user-text')?.textContent "
        f"=== {json.dumps(SAID)} && document.querySelector({block})"
        ".querySelector('.assistant').textContent.includes('ada-was-here')",
        "the earlier exchange, what was said and its reply",
    )


@needs_chromium
async def test_the_page_shows_the_last_exchanges_after_a_restart_and_compacts(
    chromium: Chromium, tmp_path: Path
) -> None:
    """R87, issue 31 (3): after a daemon restart, opening a session on the page shows
    its last exchange (what was said, the reply) from the store; Compact folds it and
    the page shows the ``compacted`` event; reopened, the exchange still shows."""
    home = tmp_path / "home"
    first = DaemonProcess(home)
    try:
        task_hash = await _one_exchange(first.info)
    finally:
        assert first.stop() == 0
    second = DaemonProcess(home)
    try:
        async with connect(chromium.ws_url) as connection:
            page = await Page.open(connection, second.info.base_url + "/")
            await sign_in(page, second.info.token)
            await _open(page, SESSION)
            await _shows_earlier(page, task_hash)
            assert await page.evaluate("document.querySelectorAll('#log .task').length") == 0
            await page.click("#compact")
            await page.wait_for(
                "[...document.querySelectorAll('#log .session-note')].some((n) => "
                "n.textContent === '⟲ conversation compacted: 1 earlier exchange summarised')",
                "the compacted event",
            )
            await _open(page, "chat-elsewhere")
            await _open(page, SESSION)
            await _shows_earlier(page, task_hash)
            assert page.exceptions == []
    finally:
        assert second.stop() == 0
