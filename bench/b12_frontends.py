"""B12: the Telegram and Discord front-ends' added latency, from a platform message to
the task's first event, against a direct WebSocket ``run`` of the same message.

One daemon subprocess; the real bots (``python -m agentrio.frontends.telegram`` and
``…discord``, python-telegram-bot and discord.py) as subprocesses on its home, each
against the fake platform server of the tests (tests/frontends/fake_telegram.py: the
Bot API, long-polled ``getUpdates``; tests/frontends/fake_discord.py: REST + gateway).
A script connection subscribes to the three sessions (``tg-111``, ``dc-900111``, a
``chat-`` one) and stamps the arrival of each task's ``task_started`` event.

* **direct**: ``run`` on a second script connection → ``task_started`` seen.
* **Telegram**: the fake hands the person's message to the pending ``getUpdates`` →
  the bot reads it, sends ``run`` → ``task_started`` seen.
* **Discord**: the fake dispatches ``MESSAGE_CREATE`` on the gateway → the same.

The message is ``hello`` (the builtin model answers it); after each sample the bench
waits for the task's ``done`` and for the bot's reply on the fake, so the next sample
starts with everything idle. The kinds alternate one sample at a time.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio

from agentrio.protocol.events import Done, TaskStarted
from agentrio.protocol.frames import EventFrame, Run, Subscribe
from agentrio.transport import FrameConnection, open_frame_connection
from bench.common import ROOT, BenchArgs, BenchResult, DaemonProcess, Stats, main
from tests.frontends.fake_discord import FakeDiscord, dm_channel
from tests.frontends.fake_telegram import FakeTelegram

__all__ = ["run"]

USER = 111
TELEGRAM_TOKEN = "123:BENCH"
DISCORD_TOKEN = "BENCH.DISCORD.TOKEN"
MESSAGE = "hello"
SESSIONS = {
    "direct": "chat-b12",
    "telegram": f"tg-{USER}",
    "discord": f"dc-{dm_channel(USER)}",
}
WAIT_S = 30.0


def _config(telegram: FakeTelegram, discord: FakeDiscord) -> str:
    return (
        "[telegram]\nenabled = false\n"
        f"allowed_users = [{USER}]\n"
        f'api_base_url = "{telegram.base_url}"\n'
        "[discord]\nenabled = false\n"
        f"allowed_users = [{USER}]\n"
        f'api_base_url = "{discord.base_url}"\n'
        f'gateway_url = "{discord.gateway_url}"\n'
    )


def _bot(home: Path, name: str) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "AGENTRIO_HOME": str(home),
        "AGENTRIO_TELEGRAM_TOKEN": TELEGRAM_TOKEN,
        "AGENTRIO_DISCORD_TOKEN": DISCORD_TOKEN,
    }
    with (home / f"{name}.log").open("ab") as log:
        return subprocess.Popen(
            [sys.executable, "-m", f"agentrio.frontends.{name}", "--home", str(home)],
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )


class _Watch:
    """The subscriber's view: when each task started and whether it is done."""

    def __init__(self) -> None:
        self.started: dict[str, int] = {}  # task hash → perf_counter_ns
        self.done: set[str] = set()
        self.changed = trio.Event()

    async def read(self, conn: FrameConnection) -> None:
        while True:
            frame = await conn.receive()
            if not isinstance(frame, EventFrame):
                continue
            if isinstance(frame.event, TaskStarted):
                self.started.setdefault(frame.task_hash, time.perf_counter_ns())
            elif isinstance(frame.event, Done):
                self.done.add(frame.task_hash)
            self.changed.set()
            self.changed = trio.Event()

    async def until(self, predicate: Callable[[], Any]) -> Any:
        with trio.fail_after(WAIT_S):
            while not (value := predicate()):
                await self.changed.wait()
        return value


async def _sample(watch: _Watch, say: Callable[[], Any], replies: Callable[[], int] | None) -> int:
    """One message: its latency to ``task_started``; returns once all is idle again."""
    known = set(watch.started)
    before = replies() if replies is not None else 0
    t0 = time.perf_counter_ns()
    await say()
    task = await watch.until(lambda: next(iter(set(watch.started) - known), None))
    elapsed = watch.started[task] - t0
    await watch.until(lambda: task in watch.done)
    if replies is not None:
        with trio.fail_after(WAIT_S):
            while replies() <= before:  # the fakes are threads: poll them
                await trio.sleep(0.005)
    return elapsed


async def _measure(
    daemon: DaemonProcess, telegram: FakeTelegram, discord: FakeDiscord, rounds: int
) -> dict[str, list[int]]:
    samples: dict[str, list[int]] = {kind: [] for kind in SESSIONS}
    watch = _Watch()
    async with (
        open_frame_connection(daemon.ws_url, daemon.token) as listener,
        open_frame_connection(daemon.ws_url, daemon.token) as sender,
        trio.open_nursery() as nursery,
    ):
        for session in SESSIONS.values():
            await listener.send(Subscribe(session_id=session))
        nursery.start_soon(watch.read, listener)
        serial = 0

        async def direct() -> None:
            nonlocal serial
            serial += 1
            await sender.send(
                Run(request_id=f"b12-{serial}", session_id=SESSIONS["direct"], input=MESSAGE)
            )

        async def via_telegram() -> None:
            telegram.say(MESSAGE, user=USER)

        async def via_discord() -> None:
            discord.say(MESSAGE, user=USER)

        kinds: dict[str, tuple[Callable[[], Any], Callable[[], int] | None]] = {
            "direct": (direct, None),
            "telegram": (via_telegram, lambda: len(telegram.messages(USER))),
            "discord": (via_discord, lambda: len(discord.messages(dm_channel(USER)))),
        }
        for _ in range(2):  # warm-up: both bots connected and answering
            for say, replies in kinds.values():
                await _sample(watch, say, replies)
        for _ in range(rounds):
            for kind, (say, replies) in kinds.items():
                samples[kind].append(await _sample(watch, say, replies))
        nursery.cancel_scope.cancel()
    return samples


def run(args: BenchArgs) -> BenchResult:
    rounds = 5 if args.quick else 30
    result = BenchResult("B12", "Front-ends: platform message → task's first event")
    telegram = FakeTelegram(TELEGRAM_TOKEN).start()
    discord = FakeDiscord(DISCORD_TOKEN).start()
    bots: list[subprocess.Popen[bytes]] = []
    try:
        with tempfile.TemporaryDirectory(prefix="agentrio-b12-") as tmp:
            home = Path(tmp) / "home"
            with DaemonProcess(home, config=_config(telegram, discord)) as daemon:
                daemon.wait_ready()
                bots = [_bot(home, "telegram"), _bot(home, "discord")]
                samples = trio.run(_measure, daemon, telegram, discord, rounds)
                for bot in bots:
                    bot.terminate()
                    bot.wait(timeout=10)
    finally:
        for bot in bots:
            if bot.poll() is None:
                bot.kill()
                bot.wait()
        telegram.close()
        discord.close()
    direct = Stats.of_ns(samples["direct"])
    for kind, label in (("telegram", "Telegram"), ("discord", "Discord")):
        stats = Stats.of_ns(samples[kind])
        for name in ("p50", "p99"):
            value, base = getattr(stats, name), getattr(direct, name)
            result.add(
                f"{label} message → task_started {name}",
                f"{value:.3f} ms",
                f"direct WebSocket run {base:.3f} ms",
                f"+{value - base:.3f} ms",
            )
    result.notes.append(
        f"{direct.n} samples of each kind, alternating, `{MESSAGE}` to the builtin model; "
        "the real bots against the tests' fake Bot API and fake Discord (loopback); "
        "each sample waits for done and the bot's reply before the next; no target: "
        "the rows show what a front-end adds"
    )
    return result


if __name__ == "__main__":
    main(run)
