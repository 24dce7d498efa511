"""The web dashboard in headless Chromium against a real daemon (SPEC R4, R5, R8, §7, R70).

The daemon's home empties ``[tools] readonly_commands`` so even ``echo`` needs a
confirmation, answered in the page. Chromium is driven over the DevTools Protocol
(tests/e2e/cdp.py). Skipped only when Chromium is not installed (``make test`` installs
it). Waits poll the DOM for what must appear, with deadlines that bound a failure.
"""

from __future__ import annotations

import json
import os
import re
import secrets
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
import trio
from trio_websocket import open_websocket_url

from tests.e2e.cdp import Chromium, Page, connect, find_chromium
from tests.e2e.conftest import Daemon

CHROMIUM = find_chromium()
#: Set to a path to keep the mid-confirmation screenshot (docs/web-dashboard.png).
SCREENSHOT_ENV = "AGENTRIO_WEB_SCREENSHOT"

needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")


@pytest.fixture
def daemon_home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text("[tools]\nreadonly_commands = []\n")
    return home


@pytest.fixture
def chromium(tmp_path: Path) -> Iterator[Chromium]:
    assert CHROMIUM is not None
    browser = Chromium(CHROMIUM, tmp_path / "profile")
    try:
        yield browser
    finally:
        browser.close()


@pytest.fixture
async def page(chromium: Chromium, daemon: Daemon) -> AsyncIterator[Page]:
    async with connect(chromium.ws_url) as connection:
        opened = await Page.open(connection, daemon.base_url + "/")
        yield opened
        assert opened.exceptions == []
        assert [e for e in opened.console_errors if "Content Security Policy" in e] == []


def http(daemon: Daemon, token: str | None = None) -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.AsyncClient(base_url=daemon.base_url, headers=headers)


async def sign_in(page: Page, token: str) -> None:
    await page.wait_for("!document.getElementById('login').hidden", "the login form")
    await page.fill("#token", token)
    await page.click("#login-submit")
    await page.wait_for("document.getElementById('stream-status').textContent === 'live'", "live")


async def send(page: Page, text: str) -> str:
    """Type ``text`` in the composer and send it; the hash of the task it started."""
    before = await page.evaluate("document.querySelectorAll('#log .task').length")
    await page.fill("#input", text)
    await page.click("#send")
    found = await page.wait_for(
        f"""(() => {{
            const tasks = [...document.querySelectorAll('#log .task')];
            if (tasks.length <= {before}) return null;
            const last = tasks[tasks.length - 1];
            const said = last.querySelector('.user-text')?.textContent;
            return said === {json.dumps(text)} ? last.dataset.task : null;
        }})()""",
        f"the task of {text!r}",
    )
    return str(found)


def in_task(task_hash: str, selector: str) -> str:
    return f'#log .task[data-task="{task_hash}"] {selector}'


async def state_of(page: Page, task_hash: str) -> str | None:
    return await page.text(in_task(task_hash, ".badge"))


async def wait_state(page: Page, task_hash: str, state: str) -> None:
    selector = json.dumps(in_task(task_hash, ".badge"))
    await page.wait_for(
        f"document.querySelector({selector})?.textContent === {json.dumps(state)}",
        f"task {task_hash} {state}",
    )


async def test_static_page_headers_and_new_routes(daemon: Daemon) -> None:
    """R70, §7: the page and its files load without a token, with a CSP of
    ``default-src 'self'`` and no cookie; every API route still answers 401 without
    the token; the added pause and legs routes work (pause keeps the task resumable,
    R41; legs list, cancel of an unknown leg is 404, a malformed id 400)."""
    async with http(daemon) as anonymous:
        index = await anonymous.get("/")
        script = await anonymous.get("/static/app.js")
        style = await anonymous.get("/static/style.css")
        unknown = await anonymous.get("/static/token")
        refused = [
            (await anonymous.request(method, path)).status_code
            for method, path in [
                ("GET", "/v1/session/chat-w/legs"),
                ("POST", "/v1/session/chat-w/legs/all/cancel"),
                ("POST", f"/v1/session/chat-w/pause/{'0' * 32}"),
                ("GET", "/v1/session/chat-w/task"),
                ("GET", "/v1/session/chat-w/events"),
            ]
        ]
    assert refused == [401] * 5
    for response, media in [
        (index, "text/html"),
        (script, "text/javascript"),
        (style, "text/css"),
    ]:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith(media)
        assert response.headers["content-security-policy"].startswith("default-src 'self';")
        assert response.headers["x-content-type-options"] == "nosniff"
        assert "set-cookie" not in response.headers
    assert '<script type="module" src="/static/app.js"></script>' in index.text
    assert (
        re.findall(r"(?:inner|outer)HTML\s*\+?=|insertAdjacentHTML|document\.write", script.text)
        == []
    )
    assert unknown.status_code == 404
    async with http(daemon, daemon.token) as client:
        legs = await client.get("/v1/session/chat-w/legs")
        assert (legs.status_code, legs.json()) == (200, {"legs": []})
        missing = await client.post("/v1/session/chat-w/legs/cmd_0000abcd/cancel")
        assert (missing.status_code, missing.json()["error"]["code"]) == (404, "not_found")
        malformed = await client.post("/v1/session/chat-w/legs/rm%20-rf/cancel")
        assert (malformed.status_code, malformed.json()["error"]["code"]) == (400, "bad_request")
        everything = await client.post("/v1/session/chat-w/legs/all/cancel")
        assert everything.json() == {"cancelled": 0}
        started = await client.post(
            "/v1/send", json={"session_id": "chat-w", "input": "run: sleep 30", "allow_all": True}
        )
        task_hash = started.json()["task_hash"]
        paused = await client.post(f"/v1/session/chat-w/pause/{task_hash}")
        assert paused.json() == {"cancelled": True, "stale": False}
        with trio.fail_after(10):
            while True:
                tasks = (await client.get("/v1/session/chat-w/task")).json()["tasks"]
                if tasks:
                    break
                await trio.sleep(0.05)
        assert [(t["task_hash"], t["objective"]) for t in tasks] == [(task_hash, "run: sleep 30")]
        again = await client.post(f"/v1/session/chat-w/pause/{task_hash}")
        assert again.json() == {"cancelled": False, "stale": False}
        dropped = await client.delete(f"/v1/session/chat-w/task/{task_hash}")
        assert dropped.status_code == 204


@needs_chromium
async def test_dashboard_confirm_ask_pause_resume(page: Page, daemon: Daemon) -> None:
    """R8 B, R11, R41, §7: in the page, ``run: echo web-ok`` shows a confirmation that
    Approve answers, then ``web-ok``; ``ask: Which? | a, b`` parks with the question in
    place, answering ``b`` resumes it; a ``run: sleep 30`` is paused from its task and
    resumed from the Pending list (the command is offered again), then cancelled from
    its confirmation; the history search finds the first task and its record."""
    await sign_in(page, daemon.token)
    session_id = await page.text("#chat-title")
    assert session_id is not None
    assert re.fullmatch(r"chat-[0-9a-f]{12}", session_id)
    stored = await page.evaluate("localStorage.getItem('agentrio.sessions')")
    assert json.loads(stored) == [session_id]
    assert await page.evaluate("document.cookie") == ""

    echo = await send(page, "run: echo web-ok")
    await page.wait_present(in_task(echo, ".confirm[data-open]"), "the echo confirmation")
    assert await page.text(in_task(echo, ".confirm pre")) == '{\n  "command": "echo web-ok"\n}'
    target = os.environ.get(SCREENSHOT_ENV)
    shot = await page.screenshot()
    assert shot.startswith(b"\x89PNG\r\n\x1a\n")
    if target:
        Path(target).write_bytes(shot)
    await page.click(in_task(echo, ".confirm [data-action=approve]"))
    await wait_state(page, echo, "finished")
    assert await page.text(in_task(echo, ".tool-result pre")) == "exit 0\nweb-ok\n"
    assert await page.text(in_task(echo, ".confirm .outcome")) == "approved"

    ask = await send(page, "ask: Which? | a, b")
    await wait_state(page, ask, "parked")
    assert await page.text(in_task(ask, ".questions .question-text")) == "Which?"
    await page.click(in_task(ask, '.questions [data-option="b"]'))
    resumed = await page.wait_for(
        """(() => {
            const notes = [...document.querySelectorAll('#log .task .note')];
            const note = notes.find((n) => n.textContent.startsWith('resumed from task'));
            const task = note?.closest('.task');
            return task?.dataset.state === 'finished' ? task.dataset.task : null;
        })()""",
        "the resumed ask task to finish",
    )
    reply = await page.text(in_task(str(resumed), ".assistant:last-of-type"))
    assert reply == "Resumed with your answers:\nQ: Which?\nA: b"
    assert await page.text(in_task(ask, ".questions .outcome")) == "answered: b"

    sleeper = await send(page, "run: sleep 30")
    confirm = in_task(sleeper, ".confirm[data-open] [data-action=approve]")
    await page.wait_present(confirm, "the sleep confirmation")
    await page.click(confirm)
    await page.wait_for(
        f"document.querySelector({json.dumps(in_task(sleeper, '.confirm .outcome'))})"
        ".textContent === 'approved'",
        "the approval",
    )
    await page.click(in_task(sleeper, "[data-action=pause-task]"))
    await wait_state(page, sleeper, "paused")
    pending = f'#pending-list [data-task="{sleeper}"] [data-action=resume]'
    await page.wait_present(pending, "the paused task in Pending")
    await page.click(pending)
    again = await page.wait_for(
        """(() => {
            const open = document.querySelector('#log .confirm[data-open]');
            return open ? open.closest('.task').dataset.task : null;
        })()""",
        "the resumed sleep's confirmation",
    )
    assert await page.text(in_task(str(again), ".confirm[data-open] pre")) == (
        '{\n  "command": "sleep 30"\n}'
    )
    starts = await page.evaluate(
        f"[...document.querySelectorAll('{in_task(str(again), '.note')}')]"
        ".map((n) => n.textContent)"
    )
    assert f"resumed from task {sleeper[:8]}" in starts
    await page.click(in_task(str(again), ".confirm[data-open] [data-action=cancel-in-confirm]"))
    await wait_state(page, str(again), "canceled")
    await page.wait_for(
        "document.querySelector('#pending-list').textContent === 'No pending tasks.'",
        "an empty Pending list",
    )

    await page.click('[data-tab="history"]')
    await page.fill("#history-keyword", "web-ok")
    await page.click("#history-form button")
    await page.wait_present(f'#history-list [data-task="{echo}"]', "the history entry")
    objectives = await page.evaluate(
        "[...document.querySelectorAll('#history-list .card-title')].map((n) => n.textContent)"
    )
    # The keyword is searched in whole records, and later tasks' records carry the
    # session's earlier messages: the echo task is the oldest hit, others may follow.
    assert objectives[-1] == "run: echo web-ok"
    assert set(objectives) <= {"run: echo web-ok", "ask: Which? | a, b", "run: sleep 30"}
    await page.click(f'#history-list [data-task="{echo}"] [data-action=show-record]')
    record = await page.wait_for(
        "!document.getElementById('history-record').hidden && "
        "document.getElementById('history-record').textContent",
        "the action record",
    )
    assert str(record).startswith("user: run: echo web-ok\n")
    assert 'tool run_command {"command": "echo web-ok"}: exit 0\nweb-ok\n' in record
    await page.fill("#history-keyword", "no-such-word")
    await page.click("#history-form button")
    await page.wait_for(
        "document.getElementById('history-list').textContent === 'No tasks found.'",
        "an empty search",
    )


@needs_chromium
async def test_dashboard_refuses_without_token_and_escapes_text(page: Page, daemon: Daemon) -> None:
    """R70, R4, R5, R8: a wrong token leads back to the login with the API's 401; event
    text with markup renders as text and runs no script; a REPL-style WebSocket client
    on the same daemon gets its own ``cli-`` confirmation as an ``ask`` frame, while
    the page (subscribed to its ``chat-`` session) never shows it."""
    await page.wait_for("!document.getElementById('login').hidden", "the login form")
    assert await page.evaluate("document.getElementById('app').hidden") is True
    await page.fill("#token", "not-the-token")
    await page.click("#login-submit")
    await page.wait_for(
        "document.getElementById('login-error').textContent === 'The daemon refused this token.'",
        "the refusal",
    )
    assert await page.evaluate("sessionStorage.getItem('agentrio.token')") is None
    assert await page.evaluate("document.getElementById('app').hidden") is True
    await sign_in(page, daemon.token)

    markup = "<script>window.pwned=1</script><img src=x onerror=window.pwned=2>"
    evil = await send(page, f"run: echo '{markup}'")
    approve = in_task(evil, ".confirm[data-open] [data-action=approve]")
    await page.wait_present(approve, "the confirmation")

    window = "w" + secrets.token_hex(4)
    cli_session = "cli-" + secrets.token_hex(4)
    asks: list[dict[str, object]] = []
    async with open_websocket_url(daemon.ws_url) as ws:
        await ws.send_message(
            json.dumps({"type": "hello", "token": daemon.token, "client": "t", "protocol": 1})
        )
        assert json.loads(await ws.get_message())["type"] == "welcome"
        run = {
            "type": "run",
            "request_id": "r1",
            "session_id": cli_session,
            "input": "run: echo cli-only",
            "window_hash": window,
        }
        await ws.send_message(json.dumps(run))
        with trio.fail_after(20):
            while True:
                frame = json.loads(await ws.get_message())
                if frame["type"] == "ask":
                    asks.append(frame)
                    reply = {"type": "reply", "id": frame["id"], "approve": True}
                    await ws.send_message(json.dumps(reply))
                if frame["type"] == "done":
                    break
    assert frame["status"] == "finished"
    assert [(a["session_id"], a["tool_args"]) for a in asks] == [
        (cli_session, {"command": "echo cli-only"})
    ]

    await page.click(approve)
    await wait_state(page, evil, "finished")
    assert await page.text(in_task(evil, ".tool-result pre")) == f"exit 0\n{markup}\n"
    assert await page.text(in_task(evil, ".user-text")) == f"run: echo '{markup}'"
    assert await page.evaluate("typeof window.pwned") == "undefined"
    assert await page.evaluate("document.querySelectorAll('#log script, #log img').length") == 0
    log_text = await page.text("#log")
    assert log_text is not None
    assert "cli-only" not in log_text
