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
    in_task,
    needs_chromium,
    page,
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
