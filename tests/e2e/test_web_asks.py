"""The page's part in issue 34, in headless Chromium against the real daemon: it
acknowledges the asks it draws (R97), and shows what a stop of its task ended (the
stop receipt: R44, R48).

The daemon's home empties ``[tools] readonly_commands`` (the fixtures of
tests/e2e/test_web.py), so every command asks. Waits poll the DOM or the daemon with
deadlines that bound a failure.
"""

from __future__ import annotations

import json

from agentrio.protocol import wording
from agentrio.protocol.stops import StopReceipt
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
from tests.frontends.conftest import acknowledged_by, eventually

__all__ = ["chromium", "daemon_home", "page"]  # the fixtures, imported for these tests


async def _receipt(page: Page, task: str) -> tuple[str, list[str]]:
    """The task's stop receipt as the page shows it: its line and its items."""
    card = in_task(task, ".stop-receipt")
    await page.wait_present(card, "the stop receipt")
    line = await page.text(in_task(task, ".stop-receipt-line"))
    items = await page.evaluate(
        f"[...document.querySelectorAll({json.dumps(card + ' li')})].map((i) => i.textContent)"
    )
    return str(line), list(items)


@needs_chromium
async def test_the_page_acknowledges_the_confirmation_it_draws(page: Page, daemon: Daemon) -> None:
    """R97 (issue 34): the page's card of a ``chat-`` confirmation makes its ask shown
    on ``web`` and acknowledged (``GET …/asks``, the ``ask_state`` event: the page sent
    ``POST …/ack``); the acknowledgement runs nothing, the approval does."""
    await sign_in(page, daemon.token)
    session_id = str(await page.text("#chat-title"))
    target = daemon.home.parent / "acked-by-web"
    task = await send(page, f"run: touch {target}")
    await page.wait_present(in_task(task, ".confirm[data-open]"), "the confirmation")
    info = await acknowledged_by(daemon.home, session_id, "web")
    assert (info.kind, info.tool_name, info.late) == ("tool_confirm", "run_command", False)
    assert not target.exists()
    await page.wait_present(armed(task, "approve"), "the armed confirmation")
    await page.click(armed(task, "approve"))
    await wait_state(page, task, "finished")
    assert target.exists()


@needs_chromium
async def test_the_page_shows_what_a_stop_ended(page: Page, daemon: Daemon) -> None:
    """R44, R48 (issue 34 item 4): the task's Stop, keep to resume on a running command
    shows the receipt (its process group ended, none alive afterwards); Stop and
    discard while its confirmation is open shows the ask it withdrew. The line is the
    REPL's (`wording.stop_receipt_line`)."""
    await sign_in(page, daemon.token)
    started = daemon.home.parent / "started"
    running = await send(page, f"run: touch {started} && sleep 30")
    await page.wait_present(armed(running, "approve"), "the armed confirmation")
    await page.click(armed(running, "approve"))
    await page.wait_for(
        f"document.querySelector({json.dumps(in_task(running, '.actions'))})?.children.length > 0",
        "the task's stop buttons",
    )
    await eventually(started.exists, what="the command to run (its group exists)")
    await page.click(in_task(running, "[data-action=pause-task]"))
    await wait_state(page, running, "paused")
    line, items = await _receipt(page, running)
    (groups,) = [item for item in items if item.startswith("process groups ")]
    group = int(groups.removeprefix("process groups "))
    assert line == wording.stop_receipt_line(StopReceipt(cause="paused", process_groups=[group]))
    assert line == "■ ended with it: 1 process group — nothing left running"
    assert items[-1] == "0 process groups alive afterwards"

    asking = await send(page, "run: echo never-run")
    await page.wait_present(armed(asking, "approve"), "the second confirmation")
    await page.click(in_task(asking, "[data-action=cancel-task]"))
    await wait_state(page, asking, "canceled")
    line, items = await _receipt(page, asking)
    assert line == wording.stop_receipt_line(
        StopReceipt(cause="user_canceled", asks_withdrawn=["x"])
    )
    assert line == "■ ended with it: 1 ask withdrawn — nothing left running"
    assert [item for item in items if item.startswith("ask ")] != []
    assert items[-1] == "0 process groups alive afterwards"
