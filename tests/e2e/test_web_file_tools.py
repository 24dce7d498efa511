"""A file change's confirmation on the web page, in headless Chromium against a real
daemon (issue 32 section 2).

aimock plays the model and asks for ``edit_file`` and ``write_file`` calls. The page
draws the diff in the confirmation's command box (each line's marker in the gutter,
coloured), offers the edits rule and none of the command choices, says how much of a
long diff is out of view; approved, the diff applies exactly; denied, the file is
byte-identical.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import trio

from tests.aimock import start_aimock, write_fixture
from tests.e2e.cdp import Chromium, Page, connect
from tests.e2e.test_dialects_e2e import start_daemon
from tests.e2e.test_file_tools_tmux import _turns
from tests.e2e.test_web import armed, chromium, in_task, needs_chromium, send, sign_in

__all__ = ["chromium"]  # the fixture, imported for this test


async def _rows(page: Page, task: str) -> list[list[str]]:
    """The confirmation's rows: [gutter classes, gutter text, code text]."""
    selector = json.dumps(in_task(task, ".confirm .command .command-line"))
    rows: list[list[str]] = await page.evaluate(
        f"[...document.querySelectorAll({selector})].map((row) => ["
        "row.querySelector('.gutter')?.className ?? '', "
        "row.querySelector('.gutter')?.textContent ?? '', "
        "row.querySelector('.code').textContent])"
    )
    return rows


@needs_chromium
async def test_the_page_shows_the_diff_and_applies_it(
    nursery: trio.Nursery, tmp_path: Path, chromium: Chromium
) -> None:
    """Issue 32 s2: see the module docstring."""
    work = tmp_path / "work"
    work.mkdir()
    app, long_file = work / "app.py", work / "long.txt"
    app.write_bytes(b"a = 1\nb = 2\nc = 3\n")
    long_file.write_bytes(b"old\n")
    content = "".join(f"line {n}\n" for n in range(300))
    fixture: list[dict[str, Any]] = [
        *_turns(
            "edit the app",
            "edit_file",
            {"path": str(app), "old_string": "b = 2", "new_string": "b = 20"},
            "the app is edited",
        ),
        *_turns(
            "write a long file",
            "write_file",
            {"path": str(long_file), "content": content},
            "left as it was",
        ),
    ]
    aimock = await start_aimock(nursery, write_fixture(tmp_path, fixture))
    daemon = await start_daemon(tmp_path / "home", aimock, "openai")
    try:
        async with connect(chromium.ws_url) as connection:
            page = await Page.open(connection, daemon.info.base_url + "/")
            await sign_in(page, daemon.info.token)

            edit = await send(page, "edit the app")
            await page.wait_present(armed(edit, "approve"), "the edit's armed confirmation")
            rows = await _rows(page, edit)
            assert rows == [
                ["", "", f"path: {app}"],
                ["", "", "diff (+1 -1 lines):"],
                ["gutter diff-hunk", "@@", "-1,3 +1,3 @@"],
                ["gutter", " ", "a = 1"],
                ["gutter diff-remove", "-", "b = 2"],
                ["gutter diff-add", "+", "b = 20"],
                ["gutter", " ", "c = 3"],
                ["", "", f"this directory: {work}"],
            ]
            actions = await page.evaluate(
                f"[...document.querySelectorAll({json.dumps(in_task(edit, '.confirm button'))})]"
                ".map((b) => [b.dataset.action, b.textContent])"
            )
            assert [a for a, _ in actions] == [
                "approve",
                "deny",
                "cancel-in-confirm",
                "abort-in-confirm",
                "remember-rule",
            ]
            assert actions[-1][1] == (
                f"Always allow edits of files under {work} (write_file, edit_file)"
            )
            await page.click(armed(edit, "approve"))
            await page.wait_for(
                f"document.querySelector({json.dumps(in_task(edit, '.tool-result'))}) !== null",
                "the edit's result",
            )
            assert app.read_bytes() == b"a = 1\nb = 20\nc = 3\n"

            long = await send(page, "write a long file")
            await page.wait_present(armed(long, "deny"), "the long write's armed confirmation")
            size = await page.wait_for(
                f"(() => {{ const s = document.querySelector("
                f"{json.dumps(in_task(long, '.confirm .command-size'))}); "
                "return s && !s.hidden ? s.textContent : null; })()",
                "the out-of-view count",
            )
            assert "more characters below" in str(size)
            rows = await _rows(page, long)
            assert rows[3] == ["gutter diff-remove", "-", "old"]
            assert len(rows) == 3 + 1 + 300 + 1  # path, count, hunk, -old, 300 +lines, dir
            assert rows[-2] == ["gutter diff-add", "+", "line 299"]
            await page.click(armed(long, "deny"))
            await page.wait_for(
                f"document.querySelector({json.dumps(in_task(long, '.confirm .outcome'))})"
                "?.textContent === 'denied'",
                "the denial",
            )
            await page.wait_for(
                f"document.querySelector({json.dumps(in_task(long, '.tool-skipped'))}) !== null"
                f" || document.querySelector({json.dumps(in_task(long, '.assistant'))}) !== null",
                "the task to go on",
            )
            assert long_file.read_bytes() == b"old\n"
            assert page.exceptions == []
    finally:
        assert await trio.to_thread.run_sync(daemon.stop) == 0
