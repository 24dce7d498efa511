"""R82: the Discord front-end end to end: the real daemon, the real discord.py, a fake
Discord (REST + gateway) on loopback (tests/frontends/fake_discord.py). Real time
throughout (three processes): every wait polls with a deadline."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from agentrio import connect
from tests.frontends.conftest import STRANGER, USER, Bot, Daemon, eventually
from tests.frontends.fake_discord import FakeDiscord, Sent, dm_channel

TOKEN = "TEST.DISCORD.TOKEN"
GUILD = 5150
GUILD_CHANNEL = 7777


@pytest.fixture
def fake() -> Iterator[FakeDiscord]:
    server = FakeDiscord(TOKEN).start()
    try:
        yield server
    finally:
        server.close()


def write_config(home: Path, fake: FakeDiscord, *, enabled: bool = False, extra: str = "") -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(
        "[discord]\n"
        f"enabled = {'true' if enabled else 'false'}\n"
        f"allowed_users = [{USER}]\n"
        f'api_base_url = "{fake.base_url}"\n'
        f'gateway_url = "{fake.gateway_url}"\n'
        f"{extra}",
        encoding="utf-8",
    )


def discord_env(home: Path) -> dict[str, str]:
    return {**os.environ, "AGENTRIO_HOME": str(home), "AGENTRIO_DISCORD_TOKEN": TOKEN}


@pytest.fixture
def bot_home(tmp_path: Path, fake: FakeDiscord, config_extra: str) -> Path:
    home = tmp_path / "home"
    write_config(home, fake, extra=config_extra)
    return home


@pytest.fixture
def bot(bot_home: Path, daemon_process: Daemon) -> Iterator[Bot]:
    running = Bot(bot_home, "discord", discord_env(bot_home))
    try:
        yield running
    finally:
        code = running.stop()
        assert code == 0, (bot_home / "bot.log").read_text()


def _open_ask(fake: FakeDiscord, needle: str) -> Sent | None:
    return fake.find(lambda m: bool(m.buttons) and needle in m.plain)


async def test_message_task_confirm_approve_result(
    fake: FakeDiscord, bot: Bot, tmp_path: Path
) -> None:
    """R82: a message starts a task; its confirmation comes as buttons (message
    components) with the words of protocol/wording.py under the whole command in a code
    block; Approve runs it and the result is shown. Nothing may mention anyone."""
    target = tmp_path / "made-by-discord"
    fake.say(f"run: touch {target}")
    confirm = await eventually(lambda: _open_ask(fake, "Allow run_command?"), what="confirm")
    assert f"```\ntouch {target}\n```" in confirm.text
    assert confirm.rows == [
        ["Approve", "Deny with reason"],
        ["Always allow this exact command"],
        ["Stop, keep to resume", "Stop and discard"],
    ]
    assert confirm.allowed_mentions == {"parse": []}
    press = fake.press(confirm, "Approve")
    await eventually(target.exists, what="the file")
    await eventually(lambda: fake.with_text("✓ run_command"), what="the result")
    assert fake.answered[press][0] == 6  # a deferred update: no notice
    assert not fake.messages()[-1].buttons
    assert "✓ approved" in (fake.with_text("Allow run_command?") or confirm).plain
