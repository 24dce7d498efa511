"""Fixtures of the front-end tests: the fake Bot API, a home configured for it, the
real daemon on that home, and the real bot (python-telegram-bot) as a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest
import trio

import agentrio
from agentrio.protocol.asks import AskInfo
from agentrio.protocol.events import AskState
from agentrio.testing import DaemonProcess
from tests.frontends.fake_telegram import FakeTelegram

USER = 111
STRANGER = 666
TOKEN = "123:TEST"
T = TypeVar("T")


#: Every bot token these tests hand a process (Discord's is the e2e tests' own).
TEST_TOKENS = (TOKEN, "TEST.DISCORD.TOKEN")


@pytest.fixture(autouse=True)
def no_token_in_any_log(tmp_path: Path) -> Iterator[None]:
    """Issue 33 item 14: after every front-end test, no log it wrote (the bots', the
    daemon's) holds a test token."""
    yield
    for path in tmp_path.rglob("*.log"):
        text = path.read_text(encoding="utf-8", errors="replace")
        for token in TEST_TOKENS:
            assert token not in text, f"{path} holds the bot token"


@pytest.fixture
def fake() -> Iterator[FakeTelegram]:
    server = FakeTelegram(TOKEN).start()
    try:
        yield server
    finally:
        server.close()


def write_config(home: Path, fake: FakeTelegram, *, enabled: bool = False, extra: str = "") -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(
        "[telegram]\n"
        f"enabled = {'true' if enabled else 'false'}\n"
        f"allowed_users = [{USER}]\n"
        f'api_base_url = "{fake.base_url}"\n'
        f"{extra}",
        encoding="utf-8",
    )


@pytest.fixture
def config_extra() -> str:
    """More ``[telegram]`` lines (tests parametrize it)."""
    return ""


@pytest.fixture
def bot_home(tmp_path: Path, fake: FakeTelegram, config_extra: str) -> Path:
    home = tmp_path / "home"
    write_config(home, fake, extra=config_extra)
    return home


def bot_env(home: Path) -> dict[str, str]:
    return {
        **os.environ,
        "AGENTRIO_HOME": str(home),
        "AGENTRIO_TELEGRAM_TOKEN": TOKEN,
        "PTB_TIMEDELTA": "1",
    }


class Bot:
    """``python -m agentrio.frontends.<name>`` as a subprocess (output in
    ``<home>/bot.log``)."""

    def __init__(
        self, home: Path, name: str = "telegram", env: dict[str, str] | None = None
    ) -> None:
        self.home = home
        self.log = (home / "bot.log").open("ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", f"agentrio.frontends.{name}", "--home", str(home)],
            env=bot_env(home) if env is None else env,
            stdin=subprocess.DEVNULL,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.terminate()
        try:
            return self.process.wait(timeout=10)
        finally:
            if self.process.poll() is None:
                self.process.kill()
            self.log.close()


class Daemon:
    """The real daemon on the bot's home; `restart` stops it (SIGTERM) and starts
    another on the same home."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.process = DaemonProcess(home)

    def restart(self) -> None:
        assert self.process.stop() == 0
        self.process = DaemonProcess(self.home)

    def stop(self) -> int:
        return self.process.stop()


@pytest.fixture
def daemon_process(bot_home: Path) -> Iterator[Daemon]:
    daemon = Daemon(bot_home)
    try:
        yield daemon
    finally:
        daemon.stop()


@pytest.fixture
def bot(bot_home: Path, daemon_process: Daemon) -> Iterator[Bot]:
    running = Bot(bot_home)
    try:
        yield running
    finally:
        code = running.stop()
        assert code == 0, (bot_home / "bot.log").read_text()


async def eventually(predicate: Callable[[], T], *, seconds: float = 20.0, what: str = "") -> T:
    """Poll ``predicate`` until it returns something truthy (real time: a real bot)."""
    with trio.move_on_after(seconds):
        while True:
            value = predicate()
            if value:
                return value
            await trio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what or predicate}")


async def acknowledged_by(home: Path, session_id: str, frontend: str) -> AskInfo:
    """Wait until the session's one open ask is acknowledged, and check that
    ``frontend`` did it, in ``GET …/asks`` and in the ask's ``ask_state`` event (the
    session's replay holds it by then). Issue 34 (R97)."""
    async with agentrio.connect(home=home) as client:
        with trio.fail_after(20):
            while True:
                asks = await client.open_asks(session_id)
                if len(asks) == 1 and asks[0].acknowledged:
                    break
                await trio.sleep(0.05)
            (info,) = asks
            assert (info.state, info.frontend, info.daemon) == ("shown", frontend, "")
            subscription = await client.subscribe(session_id)
            while True:
                frame = await subscription.receive()
                event = frame.event
                if isinstance(event, AskState) and event.ask_id == info.id and event.acknowledged:
                    assert (event.state, event.frontend) == ("shown", frontend)
                    return info
