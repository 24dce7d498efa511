"""A message typed while a confirmation is open never approves it, on any front-end
(issue 34 item 3, R98; R5, R26, R35), through the real daemon.

Each front-end is driven as a person would (tests/e2e/decision_fronts.py): a task asks
to ``touch`` a file; once its confirmation is shown and armed, the person types a
message instead of choosing -- "do NOT run that, wait 2 minutes" -- and only then
denies it with a reason. What the message became is each front-end's own: the REPL's
dialog takes it as typed text that answers nothing (and says so on screen); the page
and the bots send it to the running task as a steer. Whichever, the decision that
takes effect is the person's deny: the file does not exist, and the tool result the
model read says "denied by the user: <reason>".

The race a sleep-timed version of the REPL test lost 1 in 5 runs: keys typed while the
dialog was being drawn went to the input line (a steer) and keys typed after it was
armed went to its choices, where the first Space used to pick the highlighted
Approve. Here every step waits on what the front-end shows: the dialog armed (its
hint), the ask acknowledged by the front-end (``GET …/asks``), the typed message
handled (the REPL's note, the page's cleared input, the bot's "sent to the running
task") -- never on time.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import httpx
import pytest
import trio

from agentrio import connect
from agentrio.protocol.asks import OpenAsks
from agentrio.protocol.codec import decode
from agentrio.repl.hints import NOT_AN_ANSWER
from tests.e2e.cdp import find_chromium
from tests.e2e.decision_fronts import DEADLINE_S, BotFront, Front, ReplFront, WebFront, make_front
from tests.e2e.test_decision_matrix import _record, _settled, _tasks

CHROMIUM = find_chromium()
FRONTS = ("repl", "web", "telegram", "discord")
MESSAGE = "do NOT run that, wait 2 minutes"
REASON = "the person said no"


@pytest.fixture(scope="module")
def front(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Front]:
    name: str = request.param
    if name == "repl" and shutil.which("tmux") is None:
        pytest.skip("tmux is not installed")
    if name == "web" and CHROMIUM is None:
        pytest.skip("chromium is not installed")
    made = make_front(name, tmp_path_factory.mktemp(name), CHROMIUM)
    try:
        yield made
    finally:
        made.close()


async def _open_asks(ui: Front, session: str) -> OpenAsks:
    """``GET /v1/session/{id}/asks``: the session's open asks and their state (R97)."""
    info = ui.daemon.info  # type: ignore[attr-defined]
    headers = {"Authorization": f"Bearer {info.token}"}
    async with httpx.AsyncClient(base_url=info.base_url, headers=headers) as http:
        response = await http.get(f"/v1/session/{session}/asks")
    found: OpenAsks = decode(response.content, OpenAsks)
    return found


async def _drawn(ui: Front, session: str) -> tuple[str, str]:
    """The session's open ask (its id and state) once its front-end acknowledged drawing
    it (``ack``, R97)."""
    with trio.fail_after(DEADLINE_S):
        while True:
            asks = (await _open_asks(ui, session)).asks
            if asks and asks[0].acknowledged:
                return asks[0].id, asks[0].state
            await trio.sleep(0.05)


async def _type_message(ui: Front) -> None:
    """Type `MESSAGE` at the front-end as a person would, and wait until it was handled."""

    with trio.fail_after(DEADLINE_S):
        if isinstance(ui, ReplFront):
            ui._keys(MESSAGE, "Enter")
            while NOT_AN_ANSWER not in ui.screen_text():
                await trio.sleep(0.05)
        elif isinstance(ui, WebFront):
            assert ui.page is not None
            await ui.page.fill("#input", MESSAGE)
            await ui.page.click("#send")
            await ui.page.wait_for(
                "document.getElementById('input').value === ''", "the message sent"
            )
        else:
            assert isinstance(ui, BotFront)
            ui.fake.say(MESSAGE)
            while not ui.fake.with_text("sent to the running task"):
                await trio.sleep(0.05)


@pytest.mark.parametrize("front", FRONTS, indirect=True, scope="module")
async def test_a_message_typed_at_an_open_confirmation_never_approves(front: Front) -> None:
    """R98, issue 34 item 3: the message typed at the armed, acknowledged confirmation
    leaves it open and runs nothing; the person's deny is what decides (module
    docstring), asserted on disk and in the tool result."""
    target = front.work / "typed-made"
    async with front.open() as ui, connect(home=front.home) as client:
        session = ui.session()
        before = await _tasks(client, session)
        await ui.say(f"run: touch {target}")
        await ui.wait_confirm()
        drawn = await _drawn(ui, session)
        await _type_message(ui)
        still = (await _open_asks(ui, session)).asks
        assert [(a.id, a.state) for a in still] == [drawn]  # it decided nothing
        assert not target.exists()
        await ui.choose("deny", REASON)
        task, status = await _settled(client, session, before)
        assert status == "finished"
        record = await _record(client, session, task)
        assert f"not run: denied by the user: {REASON}" in record
    assert not target.exists()


@pytest.mark.parametrize("front", ["web"], indirect=True, scope="module")
async def test_a_page_reloaded_at_an_open_confirmation_decides_nothing(front: Front) -> None:
    """R98, R79: the page reloaded while its confirmation is open comes back to the same
    ask, still open and undecided (nothing ran meanwhile); the person's deny then is
    what decides, on disk and in the tool result."""
    assert isinstance(front, WebFront)
    target = front.work / "reloaded-made"
    async with front.open() as ui, connect(home=front.home) as client:
        session = ui.session()
        before = await _tasks(client, session)
        await ui.say(f"run: touch {target}")
        await ui.wait_confirm()
        drawn = await _drawn(ui, session)
        assert front.page is not None
        await front.page.navigate(front.daemon.info.base_url + "/")
        await front.page.wait_for(
            "document.getElementById('stream-status').textContent === 'live'", "live again"
        )
        await ui.wait_confirm()  # the same confirmation, drawn again by the reloaded page
        still = (await _open_asks(ui, session)).asks
        assert [a.id for a in still] == [drawn[0]]
        assert not target.exists()
        await ui.choose("deny", REASON)
        task, status = await _settled(client, session, before)
        assert status == "finished"
        assert f"not run: denied by the user: {REASON}" in await _record(client, session, task)
    assert not target.exists()
