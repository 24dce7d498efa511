"""The web page in headless Chromium against a real daemon: what a day of use tripped
over (issue 33 item 11).

The fixtures and helpers are those of `tests.e2e.test_web` (a home whose
``readonly_commands`` is empty, so every command asks).
"""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from tests.e2e.cdp import Page
from tests.e2e.conftest import Daemon
from tests.e2e.test_web import (
    armed,
    chromium,
    daemon_home,
    http,
    in_task,
    needs_chromium,
    page,
    resumed_task,
    send,
    sign_in,
    wait_state,
)

__all__ = ["chromium", "daemon_home", "page"]  # the fixtures, imported for these tests


def has_glyph(char: str) -> bool:
    """Some installed font draws ``char`` (what Chromium finds through fontconfig)."""
    found = subprocess.run(
        ["fc-list", f":charset={ord(char):x}"], capture_output=True, text=True, check=True
    )
    return bool(found.stdout.strip())


@needs_chromium
@pytest.mark.skipif(shutil.which("fc-list") is None, reason="fontconfig is not installed")
async def test_a_paused_task_reads_without_empty_boxes(page: Page, daemon: Daemon) -> None:
    """R41, §7: the page's words for a paused task (and everything else on it) use only
    characters a font on this machine draws: no "⏸" drawn as an empty box."""
    await sign_in(page, daemon.token)
    sleeper = await send(page, "run: sleep 30")
    await page.wait_present(armed(sleeper, "approve"), "the sleep confirmation")
    await page.click(armed(sleeper, "approve"))
    await page.click(in_task(sleeper, "[data-action=pause-task]"))
    await wait_state(page, sleeper, "paused")
    block = in_task(sleeper, "")
    said = str(await page.evaluate(f"document.querySelector({json.dumps(block)}).innerText"))
    assert "‖ paused — kept: resume it from the Pending tab" in said
    shown = str(await page.evaluate("document.body.innerText"))
    assert [c for c in sorted(set(shown)) if ord(c) > 127 and not has_glyph(c)] == []


async def listed(page: Page) -> list[str]:
    found = await page.evaluate(
        "[...document.querySelectorAll('#session-list li')].map((li) => li.dataset.session)"
    )
    return [str(id) for id in found]


@needs_chromium
async def test_session_list_is_the_daemons_and_signing_in_makes_no_empty_one(
    page: Page, daemon: Daemon
) -> None:
    """§7, R70: the page lists the daemon's ``chat-`` sessions (``GET /v1/sessions``),
    also one this browser never opened; signing in and "New session" list no empty
    session; a session is listed once something was sent in it. The route refuses
    another origin and a missing token."""
    async with http(daemon, daemon.token) as client:
        sent = await client.post("/v1/send", json={"session_id": "chat-elsewhere", "input": "hi"})
        assert sent.status_code == 202, sent.text
        assert (await client.get("/v1/sessions", params={"origin": "x-"})).status_code == 400
    async with http(daemon) as anonymous:
        assert (await anonymous.get("/v1/sessions", params={"origin": "chat-"})).status_code == 401
    await sign_in(page, daemon.token)
    await page.wait_for(
        "document.querySelector('#session-list [data-session=\"chat-elsewhere\"]') !== null",
        "the daemon's session listed",
    )
    assert await listed(page) == ["chat-elsewhere"]
    await page.click("#new-session")
    await page.click("#new-session")
    assert await listed(page) == ["chat-elsewhere"]
    current = str(await page.evaluate("document.getElementById('chat-title').textContent"))
    hello = await send(page, "hello")
    await wait_state(page, hello, "finished")
    assert await listed(page) == [current, "chat-elsewhere"]


@needs_chromium
async def test_show_record_says_what_the_person_said_on_resume(page: Page, daemon: Daemon) -> None:
    """R12, R72: the history's "Show record" of a task resumed with an answer shows the
    answer as what the person said, never the engine's resume message meant for the
    model (``[Resumed Task — …]``)."""
    await sign_in(page, daemon.token)
    ask = await send(page, "ask: Which? | apple, banana")
    await wait_state(page, ask, "parked")
    await page.click(in_task(ask, '.questions [data-option="banana"]'))
    answered = await resumed_task(page, ask)
    await wait_state(page, answered, "finished")
    await page.click('[data-tab="history"]')
    entry = f'#history-list [data-task="{answered}"]'
    await page.wait_present(entry, "the resumed task in History")
    await page.click(f"{entry} [data-action=show-record]")
    record = str(
        await page.wait_for(
            "!document.getElementById('history-record').hidden && "
            "document.getElementById('history-record').textContent",
            "the record",
        )
    )
    assert record.startswith("user: banana\n"), record
    assert "Resumed Task" not in record


AT_BOTTOM = (
    "(() => { const log = document.getElementById('log');"
    " return log.scrollHeight > log.clientHeight"
    " && log.scrollHeight - log.scrollTop - log.clientHeight <= 2; })()"
)


@needs_chromium
async def test_chat_follows_arriving_output_unless_scrolled_up(page: Page, daemon: Daemon) -> None:
    """§7: while a task's answer arrives the chat stays scrolled to its bottom (the last
    lines are never left below the fold); scrolled up to read, it stays where the person
    put it; back at the bottom, it follows again."""
    await sign_in(page, daemon.token)
    for _ in range(4):
        hello = await send(page, "hello")
        await wait_state(page, hello, "finished")
    await page.wait_for(AT_BOTTOM, "the chat at its bottom after the answers")
    await page.evaluate("document.getElementById('log').scrollTop = 0")
    # The person's scroll is a `scroll` event the page handles in a later frame: send
    # only once it has (else the page still follows and takes the chat back down).
    await page.wait_for(
        "(() => { const log = document.getElementById('log');"
        " log.dispatchEvent(new Event('scroll')); return log.scrollTop === 0; })()",
        "the scroll up noticed",
    )
    reading = await send(page, "hello")
    await wait_state(page, reading, "finished")
    assert await page.evaluate("document.getElementById('log').scrollTop") == 0
    await page.evaluate(
        "(() => { const log = document.getElementById('log');"
        " log.scrollTop = log.scrollHeight; log.dispatchEvent(new Event('scroll')); })()"
    )
    again = await send(page, "hello")
    await wait_state(page, again, "finished")
    await page.wait_for(AT_BOTTOM, "the chat following again")
