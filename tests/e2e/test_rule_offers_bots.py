"""The rules a confirmation offers, chosen in the Telegram and Discord bots, through the
real daemon (issue 32 section 4; R76, R82, R92).

Each bot runs on its fake platform (tests/e2e/decision_fronts.py) against a daemon
whose scripted model asks, one task each, for the four calls that offer a rule: a
simple command (its argv-prefix rule), another one ("Always allow this exact
command"), a ``write_file`` (the edits-under-directory rule) and a call of
``@modelcontextprotocol/server-filesystem``'s ``write_file`` (the MCP tool rule). Each
confirmation offers exactly the rule choices the REPL's dialog offers for the same
ask, in its words (`agentrio.repl.commands.confirm_choices`); the person picks the rule.
Then each rule is listed by ``GET /v1/session/{id}/allowed``, and one task making the
four calls again runs them all with nobody asked (the files are on disk, no
confirmation was sent) -- before and after a restart of the daemon.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import tomli_w
import trio

from agentrio import connect
from agentrio.handles import Subscription
from agentrio.protocol import wording
from agentrio.protocol.asks import Asked
from agentrio.protocol.events import Confirm
from agentrio.protocol.rules import COMMAND, COMMAND_PREFIX, EDITS, MCP_TOOL
from agentrio.repl.commands import ConfirmChoice, confirm_choices
from tests.e2e.decision_fronts import DEADLINE_S, BotFront, until
from tests.e2e.test_mcp_e2e import FILESYSTEM

pytestmark = pytest.mark.skipif(not FILESYSTEM.exists(), reason="npm ci has not run")

MCP_TOOL_NAME = "mcp__fs__write_file"


def _call(tool: str, args: dict[str, Any], index: int = 0) -> dict[str, Any]:
    return {"id": f"c{index}", "name": tool, "args": args}


def _calls(work: Path, suffix: str) -> list[dict[str, Any]]:
    """The four calls, each offering one kind of rule; ``suffix`` names new files."""
    return [
        _call("run_command", {"command": f"touch pfx-a pfx-{suffix}"}, 0),
        _call("run_command", {"command": "touch exact-a"}, 1),
        _call("write_file", {"path": f"{work}/notes/{suffix}.txt", "content": suffix}, 2),
        _call(MCP_TOOL_NAME, {"path": f"{work}/files/{suffix}.txt", "content": suffix}, 3),
    ]


def _script(path: Path, tasks: list[list[dict[str, Any]]]) -> None:
    turns: list[dict[str, Any]] = []
    for calls in tasks:
        turns += [{"text": "", "tool_calls": calls}, {"text": "done"}]
    path.write_text(tomli_w.dumps({"turns": turns}))


@pytest.fixture(params=["telegram", "discord"])
def bot(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BotFront]:
    root = tmp_path / request.param
    work = root / "work"
    script = root / "script.toml"
    extra = {
        "model": {"provider": "scripted", "script": str(script)},
        "mcp": {"fs": {"command": "node", "args": [str(FILESYSTEM), f"{work}/files"]}},
    }
    work.mkdir(parents=True)
    for folder in ("notes", "files"):
        (work / folder).mkdir()
    asked = [
        [_call("run_command", {"command": "touch pfx-a"})],
        [_call("run_command", {"command": "touch exact-a"})],
        [_call("write_file", {"path": f"{work}/notes/first.txt", "content": "first"})],
        [_call(MCP_TOOL_NAME, {"path": f"{work}/files/first.txt", "content": "first"})],
    ]
    _script(script, [*asked, _calls(work, "again")])
    front = BotFront(request.param, root, "\n" + tomli_w.dumps(extra))
    try:
        yield front
    finally:
        front.close()


async def _next_confirm(events: Subscription) -> Confirm:
    with trio.fail_after(DEADLINE_S):
        while True:
            frame = await events.receive()
            if isinstance(frame.event, Confirm):
                return frame.event


def _repl_rule_choices(confirm: Confirm, session: str) -> list[tuple[ConfirmChoice, str]]:
    """What the REPL's dialog offers for this ask that remembers something."""
    ask = Asked(
        kind="tool_confirm",
        session_id=session,
        task_hash="",
        tool_name=confirm.tool_name,
        tool_args=confirm.args,
        offers=confirm.offers,
        details=confirm.details,
    )
    remembering = (ConfirmChoice.ALWAYS, ConfirmChoice.RULE)
    return [(c, label) for c, label, _ in confirm_choices(ask) if c in remembering]


async def _choose_rule(bot: BotFront, events: Subscription, pick: ConfirmChoice) -> str:
    """Wait for the next confirmation in the bot; check its rule choices are the REPL's,
    in the REPL's words; press ``pick`` (the first offered rule for ``RULE``)."""
    await bot.wait_confirm("Allow ")
    confirm = await _next_confirm(events)
    shown = bot.shown
    assert f"Allow {confirm.tool_name}?" in shown.plain, shown.plain
    choices = _repl_rule_choices(confirm, bot.session())
    labels = [text for text, _ in shown.buttons if text.startswith("Always allow")]
    expected = [
        label if choice is ConfirmChoice.ALWAYS else f"{wording.ALWAYS_ALLOW_RULE} rule 1 (above)"
        for choice, label in choices
    ]
    assert labels == expected, (labels, choices)
    for choice, label in choices:
        if choice is ConfirmChoice.RULE:  # its whole rule written out, as the REPL says it
            assert label in shown.plain, (label, shown.plain)
    label = wording.ALWAYS_ALLOW if pick is ConfirmChoice.ALWAYS else expected[-1]
    bot.fake.press(shown, label)
    return confirm.offers[0].kind if pick is ConfirmChoice.RULE else COMMAND


async def _wait_mcp_ready(bot: BotFront) -> None:
    async with connect(home=bot.home) as client:
        with trio.fail_after(60):
            while not any(s.state == "ready" for s in (await client.health()).mcp):
                await trio.sleep(0.1)


def _listed(bot: BotFront) -> list[tuple[str, str]]:
    """The home's rules as the HTTP route lists them: (kind, command)."""
    info = bot.daemon.info
    url = f"{info.base_url}/v1/session/{bot.session()}/allowed"
    response = httpx.get(url, headers={"Authorization": f"Bearer {info.token}"})
    response.raise_for_status()
    return sorted((rule["kind"], rule["command"]) for rule in response.json()["rules"])


def _dones(bot: BotFront) -> list[Any]:
    """The bot's messages of the model's closing "done"."""
    return [m for m in bot.fake.messages() if m.plain.strip().endswith("done")]


async def _quiet_task(bot: BotFront, events: Subscription, suffix: str) -> None:
    """One task making the four calls again: every file appears, nobody is asked."""
    work = bot.work
    (work / "exact-a").unlink()
    ended = len(_dones(bot))
    bot.fake.say(f"again {suffix}")
    notes, files = (work / folder / f"{suffix}.txt" for folder in ("notes", "files"))
    made = [work / f"pfx-{suffix}", work / "exact-a", notes, files]
    await until(lambda: all(path.exists() for path in made), f"the files of {suffix}")
    await until(lambda: len(_dones(bot)) > ended, "the task's end")
    while True:  # no confirmation came for any of them
        try:
            frame = events.receive_nowait()
        except trio.WouldBlock:
            break
        assert not isinstance(frame.event, Confirm), frame.event


async def test_each_offered_rule_is_kept_and_covers_the_next_call(bot: BotFront) -> None:
    """Issue 32 §4, R76, R82, R92: see the module docstring."""
    await _wait_mcp_ready(bot)
    work, session = bot.work, bot.session()
    kinds: list[str] = []
    bot.fake.say("prefix")
    await until(lambda: bot.fake.with_text("Allow run_command?"), "the first confirmation")
    async with connect(home=bot.home) as client:
        events = await client.subscribe(session)
        for text, pick in (
            ("", ConfirmChoice.RULE),
            ("exact", ConfirmChoice.ALWAYS),
            ("edit", ConfirmChoice.RULE),
            ("mcp", ConfirmChoice.RULE),
        ):
            ended = len(_dones(bot))
            if text:
                bot.fake.say(text)
            kinds.append(await _choose_rule(bot, events, pick))
            await until(lambda ended=ended: len(_dones(bot)) > ended, f"the end of task {text}")
        assert (work / "pfx-a").exists()
        assert (work / "notes" / "first.txt").read_text() == "first"
        assert (work / "files" / "first.txt").read_text() == "first"
        assert kinds == [COMMAND_PREFIX, COMMAND, EDITS, MCP_TOOL]
        rules = [
            (COMMAND, "touch exact-a"),
            (COMMAND_PREFIX, "touch pfx-a"),
            (EDITS, "write_file, edit_file"),
            (MCP_TOOL, MCP_TOOL_NAME),
        ]
        assert await trio.to_thread.run_sync(_listed, bot) == sorted(rules)
        await _quiet_task(bot, events, "again")
    _script(bot.root / "script.toml", [_calls(work, "restarted")])
    await trio.to_thread.run_sync(bot.restart_daemon)
    assert await trio.to_thread.run_sync(_listed, bot) == sorted(rules)
    await _wait_mcp_ready(bot)
    async with connect(home=bot.home) as client:
        events = await client.subscribe(session)
        await _quiet_task(bot, events, "restarted")
    assert (work / "notes" / "restarted.txt").read_text() == "restarted"
    assert (work / "files" / "restarted.txt").read_text() == "restarted"
