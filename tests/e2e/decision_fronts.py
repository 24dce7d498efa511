"""The four front-ends of the decision matrix (tests/e2e/test_decision_matrix.py), each
driven as a person would, through the real daemon: the REPL in tmux, the web page in
headless Chromium, the Telegram and Discord bots against their fake platforms.

Each `Front` starts one daemon (and its bot, browser or terminal) for all the decisions
it is asked: `open` per test, `say` to start a task, `wait_confirm` for its
confirmation to be shown and armed, `choose` to answer it with one decision. What a
decision did is read from the daemon and the disk by the test, never from the screen.
Waits poll with deadlines that bound a failure; nothing is timed by sleeping.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Protocol

from agentrio.protocol import wording
from agentrio.testing import DaemonProcess
from tests.e2e.cdp import Chromium, Page, connect
from tests.e2e.test_repl_tmux import ARMED, Tmux
from tests.frontends.conftest import TOKEN as TELEGRAM_TOKEN
from tests.frontends.conftest import USER, Bot, eventually
from tests.frontends.fake_discord import FakeDiscord, dm_channel
from tests.frontends.fake_telegram import FakeTelegram

__all__ = ["DECISIONS", "DISCORD_TOKEN", "Front", "make_front"]

#: The decisions of the matrix, by the id the tests are parametrized with.
DECISIONS = ("approve", "deny", "always", "turn", "prefix", "discard", "keep", "restricted")
DISCORD_TOKEN = "TEST.DISCORD.TOKEN"
#: Seconds a wait may take before it fails (three processes on a loaded machine).
DEADLINE_S = 30.0
#: The REPL dialog's hint while its system-password field has the keys (R7).
PASSWORD_HINT = "type the system password"


async def until(predicate: Callable[[], Any], what: str) -> Any:
    """Poll ``predicate`` (sync) until it returns something truthy."""
    return await eventually(predicate, seconds=DEADLINE_S, what=what)


def config(work: Path, extra: str = "") -> str:
    """Every command asks (no read-only ones); ``work/locked`` is a restricted path."""
    return f'[tools]\nreadonly_commands = []\nrestricted_paths = ["{work}/locked"]\n{extra}'


class Front(Protocol):
    name: str
    home: Path
    #: Where a command that names no directory runs (the session's directory, R86).
    work: Path

    def session(self) -> str: ...

    def open(self) -> Any: ...

    async def say(self, text: str) -> None: ...

    async def wait_confirm(self) -> None: ...

    async def choose(self, decision: str, reason: str = "") -> None: ...

    async def refused_shown(self) -> str: ...

    def screen_text(self) -> str: ...

    def close(self) -> None: ...


# ------------------------------------------------------------------- the chat bots


class BotFront:
    """A bot (``telegram`` or ``discord``) on its fake platform; the person is `USER` in
    a direct chat. A confirmation is a message with buttons; the button of a decision is
    found by its words (a prefix of its label)."""

    LABELS = {
        "approve": wording.APPROVE,
        "always": wording.ALWAYS_ALLOW,
        "turn": wording.ALLOW_TURN_BUTTON,
        "prefix": f"{wording.ALWAYS_ALLOW_RULE} rule 1 (above)",
        "discard": wording.STOP_DISCARD,
        "keep": wording.STOP_KEEP,
    }

    def __init__(self, name: str, root: Path, extra: str = "") -> None:
        self.name = name
        self.root, self.home, self.work = root, root / "home", root / "work"
        self.work.mkdir(parents=True, exist_ok=True)
        self.home.mkdir()
        self.fake: FakeTelegram | FakeDiscord
        if name == "telegram":
            self.fake = FakeTelegram(TELEGRAM_TOKEN).start()
            table = (
                f"[telegram]\nenabled = false\nallowed_users = [{USER}]\n"
                f'api_base_url = "{self.fake.base_url}"\n'
            )
            env = {"AGENTRIO_TELEGRAM_TOKEN": TELEGRAM_TOKEN, "PTB_TIMEDELTA": "1"}
            self._session = f"tg-{USER}"
        else:
            self.fake = FakeDiscord(DISCORD_TOKEN).start()
            table = (
                f"[discord]\nenabled = false\nallowed_users = [{USER}]\n"
                f'api_base_url = "{self.fake.base_url}"\n'
                f'gateway_url = "{self.fake.gateway_url}"\n'
            )
            env = {"AGENTRIO_DISCORD_TOKEN": DISCORD_TOKEN}
            self._session = f"dc-{dm_channel(USER)}"
        (self.home / "config.toml").write_text(config(self.work, table + extra))
        self.daemon = DaemonProcess(self.home, cwd=self.work)
        environment = {**os.environ, "AGENTRIO_HOME": str(self.home), **env}
        self.bot = Bot(self.home, name, environment)
        #: Confirmations seen so far (by message id): a new one is another message.
        self.seen: set[int] = set()
        self.shown: Any = None

    def session(self) -> str:
        return self._session

    def restart_daemon(self) -> None:
        """Stop the daemon (SIGTERM) and start another on the same home; the bot
        reconnects by itself (blocking: call it from a worker thread)."""
        assert self.daemon.stop() == 0
        self.daemon.close()
        self.daemon = DaemonProcess(self.home, cwd=self.work)

    @asynccontextmanager
    async def open(self) -> AsyncIterator[BotFront]:
        yield self

    async def say(self, text: str) -> None:
        self.fake.say(text)

    def _new_confirm(self, title: str) -> Any:
        def fresh(message: Any) -> bool:
            return (
                bool(message.buttons)
                and title in message.plain
                and message.message_id not in self.seen
            )

        return self.fake.find(fresh)

    async def wait_confirm(self, title: str = "Allow run_command?") -> None:
        """Wait for a confirmation not seen before whose text holds ``title``."""
        self.shown = await until(lambda: self._new_confirm(title), f"{self.name}: a confirmation")
        self.seen.add(self.shown.message_id)

    async def choose(self, decision: str, reason: str = "") -> None:
        if decision == "deny":
            self.fake.press(self.shown, wording.DENY)
            await until(lambda: self.fake.with_text("reply with the reason"), "the reason prompt")
            self.fake.say(reason)
            return
        self.fake.press(self.shown, self.LABELS[decision])

    async def refused_shown(self) -> str:
        found = await until(
            lambda: self.fake.with_text(f"Refused: {wording.RESTRICTED_ELSEWHERE}"),
            f"{self.name}: the refusal",
        )
        assert not found.buttons  # nothing to press: no approving choice at all
        return str(found.plain)

    def screen_text(self) -> str:
        return ""

    def close(self) -> None:
        try:
            assert self.bot.stop() == 0, (self.home / "bot.log").read_text()
            assert self.daemon.stop() == 0
        finally:
            self.daemon.close()
            self.fake.close()


# ------------------------------------------------------------------------ the REPL


class ReplFront:
    """``agentrio`` in tmux, started in the work directory (its session works there,
    R86). A decision is its number in the dialog (the six fixed, then the offered
    rules from 7, `repl.commands.confirm_choices`)."""

    KEYS = {"approve": "1", "always": "3", "turn": "4", "discard": "5", "keep": "6", "prefix": "7"}

    def __init__(self, root: Path) -> None:
        self.name = "repl"
        self.root, self.home, self.work = root, root / "home", root / "work"
        self.work.mkdir(parents=True, exist_ok=True)
        self.home.mkdir()
        (self.home / "config.toml").write_text(config(self.work))
        self.daemon = DaemonProcess(self.home, cwd=self.work)
        self.tmux = Tmux()
        command = (
            f"cd {self.work} && AGENTRIO_HOME={self.home} {sys.executable} -m agentrio.repl; "
            "echo REPL-EXITED $?; sleep 60"
        )
        self.tmux("new-session", "-d", "-s", "repl", "-x", "160", "-y", "45", command)
        self._session = ""
        end = time.monotonic() + DEADLINE_S
        while not self._session and time.monotonic() < end:
            found = re.search(r"session (cli-[0-9a-f]+)", self.tmux.screen())
            self._session = found.group(1) if found else ""
            time.sleep(0.05)
        assert self._session, self.tmux.screen()

    def session(self) -> str:
        return self._session

    @asynccontextmanager
    async def open(self) -> AsyncIterator[ReplFront]:
        # A line typed while a task runs would steer it: start from an idle REPL.
        # (the toolbar's "N running"; a stop's receipt may say "nothing else was running")
        await until(lambda: not re.search(r"\d running", self.tmux.screen()), "an idle REPL")
        yield self

    def _keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", "repl", *keys)

    async def say(self, text: str) -> None:
        self._keys(text, "Enter")

    async def wait_confirm(self) -> None:
        await until(lambda: "Confirm tool call" in self.tmux.screen(), "the REPL's dialog")
        armed = await until(
            lambda: next((h for h in (ARMED, PASSWORD_HINT) if h in self.tmux.screen()), ""),
            "the dialog to be armed",
        )
        if armed == PASSWORD_HINT:  # a restricted path's password field has the keys
            self._keys("Enter")  # (empty: on to the choices; only an approval needs it)
            await until(lambda: ARMED in self.tmux.screen(), "the choices")

    async def choose(self, decision: str, reason: str = "") -> None:
        if decision == "deny":
            self._keys("2")
            await until(lambda: "reason (Enter sends" in self.tmux.screen(), "the reason field")
            self._keys(reason, "Enter")
        else:
            self._keys(self.KEYS[decision])
        await until(lambda: "Confirm tool call" not in self.tmux.screen(), "the dialog to close")

    async def refused_shown(self) -> str:
        raise AssertionError("the REPL asks for the password: no refusal")

    def screen_text(self) -> str:
        """The terminal, wrapped lines joined."""
        return self.tmux.screen().replace("\n", "")

    def close(self) -> None:
        try:
            self.tmux("kill-server")
            assert self.daemon.stop() == 0
        finally:
            self.daemon.close()


# ------------------------------------------------------------------- the web page


class WebFront:
    """The page in headless Chromium, signed in with the daemon's token; each test opens
    a new tab (a new ``chat-`` session). A decision is a button of the open, armed
    confirmation, found by its ``data-action``."""

    ACTIONS = {
        "approve": "approve",
        "deny": "deny",
        "always": "remember",
        "turn": "allow-turn",
        "prefix": "remember-rule",
        "discard": "cancel-in-confirm",
        "keep": "abort-in-confirm",
    }
    OPEN = "#log .confirm[data-open][data-armed]"

    def __init__(self, root: Path, binary: str) -> None:
        self.name = "web"
        self.root, self.home, self.work = root, root / "home", root / "work"
        self.work.mkdir(parents=True, exist_ok=True)
        self.home.mkdir()
        (self.home / "config.toml").write_text(config(self.work))
        self.daemon = DaemonProcess(self.home, cwd=self.work)
        self.chromium = Chromium(binary, root / "profile")
        self.page: Page | None = None
        self._session = ""

    def session(self) -> str:
        return self._session

    @asynccontextmanager
    async def open(self) -> AsyncIterator[WebFront]:
        async with connect(self.chromium.ws_url) as connection:
            page = await Page.open(connection, self.daemon.info.base_url + "/")
            await page.wait_for("!document.getElementById('login').hidden", "the login form")
            await page.fill("#token", self.daemon.info.token)
            await page.click("#login-submit")
            await page.wait_for(
                "document.getElementById('stream-status').textContent === 'live'", "live"
            )
            self._session = str(await page.text("#chat-title"))
            self.page = page
            try:
                yield self
            finally:
                self.page = None
                # The next tab starts a session of its own, not this remembered one;
                # this one lets its event stream go (a browser keeps 6 to a host).
                await page.evaluate("localStorage.clear()")
                await page.navigate("about:blank")
            assert page.exceptions == []

    async def say(self, text: str) -> None:
        """Send ``text`` and wait for the page to show the task it started."""
        assert self.page is not None
        said = json.dumps(text)
        count = "[...document.querySelectorAll('#log .task .user-text')]" + (
            f".filter((n) => n.textContent === {said}).length"
        )
        before = await self.page.evaluate(count)
        await self.page.fill("#input", text)
        await self.page.click("#send")
        await self.page.wait_for(f"{count} > {before}", f"the task of {text!r}")

    async def wait_confirm(self) -> None:
        assert self.page is not None
        await self.page.wait_present(self.OPEN, "the page's armed confirmation")

    async def choose(self, decision: str, reason: str = "") -> None:
        assert self.page is not None
        if decision == "deny":
            await self.page.fill(f"{self.OPEN} .reason", reason)
        await self.page.click(f"{self.OPEN} [data-action={self.ACTIONS[decision]}]")
        await self.page.wait_for(
            f"!document.querySelector({json.dumps(self.OPEN)})", "the confirmation closed"
        )

    async def refused_shown(self) -> str:
        assert self.page is not None
        await self.wait_confirm()
        said = await self.page.text(f"{self.OPEN} .confirm-restricted")
        actions = await self.page.evaluate(
            f"[...document.querySelectorAll('{self.OPEN} button')].map((b) => b.dataset.action)"
        )
        assert actions == ["deny", "cancel-in-confirm", "abort-in-confirm"], actions
        assert await self.page.evaluate(f"document.querySelector('{self.OPEN} .password')") is None
        await self.choose("deny", "restricted")
        return str(said)

    def screen_text(self) -> str:
        return ""

    def close(self) -> None:
        try:
            self.chromium.close()
            assert self.daemon.stop() == 0
        finally:
            self.daemon.close()


def make_front(name: str, root: Path, chromium: str | None) -> Front:
    if name == "repl":
        return ReplFront(root)
    if name == "web":
        assert chromium is not None
        return WebFront(root, chromium)
    return BotFront(name, root)
