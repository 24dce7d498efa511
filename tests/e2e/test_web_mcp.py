"""An MCP server's elicitation answered from the web page, in headless Chromium
against a real daemon and the protocol's reference server (issue 32 section 3).

The daemon's scripted model calls ``trigger-elicitation-request`` of
``@modelcontextprotocol/server-everything`` (from node_modules) from the page's
``chat-`` session. The call is approved on the page; the server's form parks the task
(R11) and the page shows its questions; the person types a name and sends the answers;
the resumed task's model calls the tool again, which is approved, and the server's
same form is answered with what the person typed: the server's own result says the
name back. Nothing else answers the form: the engine's side is only the person's words.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
import tomli_w
import trio

from tests.e2e.cdp import Chromium, Page, connect
from tests.e2e.conftest import DaemonProcess
from tests.e2e.test_mcp_e2e import EVERYTHING, _call
from tests.e2e.test_web import chromium, needs_chromium, sign_in

__all__ = ["chromium"]  # the fixture, imported for this test

pytestmark = pytest.mark.skipif(not EVERYTHING.exists(), reason="npm ci has not run")

TOOL = "mcp__every__trigger-elicitation-request"
#: What the person types as the form's first field (the server's ``name``).
NAME = "Ada Lovelace"

OPEN_CONFIRM = "#log .confirm[data-open][data-armed] [data-action=approve]"
OPEN_FORM = "#log .questions[data-open]"


def _home(tmp_path: Path) -> Path:
    turns = [_call(TOOL, {}, 0), _call(TOOL, {}, 1), {"text": "done"}]
    (tmp_path / "script.toml").write_text(tomli_w.dumps({"turns": turns}))
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    config = {
        "model": {"provider": "scripted", "script": str(tmp_path / "script.toml")},
        "mcp": {"every": {"command": "node", "args": [str(EVERYTHING)]}},
    }
    (home / "config.toml").write_text(tomli_w.dumps(config))
    return home


async def _wait_ready(base_url: str, token: str) -> None:
    """Until the daemon's ``every`` server is ready (at most 60 s)."""
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=base_url, headers=headers) as client:
        with trio.fail_after(60):
            while True:
                health = (await client.get("/v1/health")).json()
                if any(s["name"] == "every" and s["state"] == "ready" for s in health["mcp"]):
                    return
                await trio.sleep(0.1)


async def _approve_next(page: Page, done: int) -> None:
    """Approve the next open confirmation (``done`` were approved before it)."""
    await page.wait_for(
        f"document.querySelectorAll('#log .confirm').length > {done}"
        f" && document.querySelector({json.dumps(OPEN_CONFIRM)}) !== null",
        f"confirmation {done + 1}, armed",
        deadline_s=60,
    )
    await page.click(OPEN_CONFIRM)


async def _results(page: Page) -> list[str]:
    texts: list[str] = await page.evaluate(
        "[...document.querySelectorAll('#log .tool-result')].map((node) => node.textContent)"
    )
    return texts


@needs_chromium
async def test_an_elicitation_answered_on_the_page_reaches_the_server(
    tmp_path: Path, chromium: Chromium
) -> None:
    """Issue 32 s3 (R10, R11, R12): see the module docstring. Before the person
    answers, the server has produced no result (the form's request was cancelled when
    the task parked); after, its result holds the typed name."""
    daemon = await trio.to_thread.run_sync(DaemonProcess, _home(tmp_path))
    try:
        await _wait_ready(daemon.info.base_url, daemon.info.token)
        async with connect(chromium.ws_url) as connection:
            page = await Page.open(connection, daemon.info.base_url + "/")
            await sign_in(page, daemon.info.token)
            await page.fill("#input", "go")
            await page.click("#send")
            await _approve_next(page, 0)
            await page.wait_present(OPEN_FORM, "the server's form, parked", deadline_s=60)
            texts = await page.evaluate(
                f"[...document.querySelectorAll({json.dumps(OPEN_FORM + ' .question-text')})]"
                ".map((node) => node.textContent)"
            )
            assert texts[0] == (
                "MCP server every asks: Please provide inputs for the following fields:\n"
                "String: Your full, legal name"
            )
            assert "Integer: Your favorite integer" in texts[6]
            assert await _results(page) == []  # nothing came back from the server yet
            await page.fill(f"{OPEN_FORM} .question:nth-child(1) input.answer", NAME)
            await page.click(f"{OPEN_FORM} [data-action=send-answers]")
            await _approve_next(page, 1)
            result = await page.wait_for(
                "[...document.querySelectorAll('#log .tool-result')]"
                ".map((node) => node.textContent).find((t) => t.includes('User inputs')) ?? null",
                "the server's result",
                deadline_s=60,
            )
            assert f"- Name: {NAME}" in str(result)
            assert '"action": "accept"' in str(result)
            assert page.exceptions == []
    finally:
        assert await trio.to_thread.run_sync(daemon.stop) == 0
