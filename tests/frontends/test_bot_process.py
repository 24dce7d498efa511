"""The chat front-ends' processes as a person runs them by hand (issue 33 items 12-14,
R82): SIGTERM and SIGINT stop a bot whose platform is unreachable; ``--store-token``
checks the token's shape and reads it hidden on a terminal; a token never reaches a
log (the refused one included).

Real processes throughout (``python -m agentrio.frontends.<name>``, tmux for the
terminal, the daemon for its ``<home>/<name>.log``): waits poll with a deadline.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentrio.testing import DaemonProcess
from tests.e2e.test_repl_tmux import Tmux, wait_for
from tests.frontends.fake_telegram import FakeTelegram

#: Well-formed tokens no platform knows (each test's own, so a grep finds only it).
TELEGRAM_TOKEN = "8123456789:AAH" + "x" * 32
DISCORD_TOKEN = "MTA" + "d" * 21 + ".GhIjKl." + "e" * 30


def _closed_port() -> int:
    """A loopback port nobody listens on: connecting is refused (the platform is down)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _unreachable_home(tmp_path: Path, name: str) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    port = _closed_port()
    urls = (
        f'api_base_url = "http://127.0.0.1:{port}/bot"\n'
        f'api_file_url = "http://127.0.0.1:{port}/file/bot"\n'
        if name == "telegram"
        else f'api_base_url = "http://127.0.0.1:{port}/api/v10"\n'
        f'gateway_url = "ws://127.0.0.1:{port}/gateway"\n'
    )
    (home / "config.toml").write_text(f"[{name}]\nallowed_users = [1]\n{urls}", encoding="utf-8")
    return home


def _module(name: str, home: Path) -> list[str]:
    return [sys.executable, "-m", f"agentrio.frontends.{name}", "--home", str(home)]


def _env(name: str, token: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTRIO_")}
    return env | {f"AGENTRIO_{name.upper()}_TOKEN": token, "PTB_TIMEDELTA": "1"}


def _wait_text(path: Path, needle: str, deadline_s: float = 30.0) -> str:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        text = path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""
        if needle in text:
            return text
        time.sleep(0.05)
    raise AssertionError(f"{needle!r} never appeared in {path}:\n{text}")


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
@pytest.mark.parametrize("name", ["telegram", "discord"])
def test_a_signal_stops_a_bot_whose_platform_is_unreachable(
    tmp_path: Path, name: str, signum: signal.Signals
) -> None:
    """Issue 33 item 12: while the bot retries an unreachable platform (its first
    contact), SIGTERM or SIGINT ends it within seconds, exit 0 (it used to retry for
    ten minutes, until ``kill -9``)."""
    home = _unreachable_home(tmp_path, name)
    log = tmp_path / "bot.log"
    token = TELEGRAM_TOKEN if name == "telegram" else DISCORD_TOKEN
    with log.open("wb") as out:
        process = subprocess.Popen(
            _module(name, home),
            env=_env(name, token),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            _wait_text(log, "not reachable")
            process.send_signal(signum)
            assert process.wait(timeout=5) == 0, log.read_text()
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    assert "stopped before" in log.read_text()
    assert token not in log.read_text()


@pytest.mark.parametrize("name", ["telegram", "discord"])
@pytest.mark.parametrize("typed", ["\n", "not a token\n", "123:short\n", "a.b.c\n"])
def test_store_token_refuses_what_is_not_a_token(tmp_path: Path, name: str, typed: str) -> None:
    """Issue 33 item 13: an empty line or a line not shaped like the platform's token
    is refused (exit 2, "nothing stored", what was typed not repeated) and no token
    file is written."""
    done = subprocess.run(
        [*_module(name, tmp_path), "--store-token"],
        env=_env(name, ""),
        input=typed,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "nothing stored" in done.stderr
    assert "stored the bot token" not in done.stdout
    if typed.strip():
        assert typed.strip() not in done.stderr + done.stdout
    assert not (tmp_path / f"{name}.token").exists()


@pytest.mark.parametrize(
    ("name", "token"), [("telegram", TELEGRAM_TOKEN), ("discord", DISCORD_TOKEN)]
)
def test_store_token_from_a_pipe_stores_a_well_formed_token(
    tmp_path: Path, name: str, token: str
) -> None:
    """Issue 33 item 13: a well-formed token on stdin is stored 0600."""
    done = subprocess.run(
        [*_module(name, tmp_path), "--store-token"],
        env=_env(name, ""),
        input=f"  {token}\n",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    path = tmp_path / f"{name}.token"
    assert path.read_text() == token + "\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_store_token_on_a_terminal_prompts_and_hides_it(tmp_path: Path) -> None:
    """Issue 33 item 13: on a terminal ``--store-token`` shows a prompt and reads the
    token hidden: the screen never shows it; it is stored."""
    tmux = Tmux()
    command = " ".join([*_module("telegram", tmp_path), "--store-token"])
    tmux(
        "new-session", "-d", "-s", "repl", "-x", "120", "-y", "20",
        f"{command}; echo STORE-EXITED $?; sleep 60",
    )  # fmt: skip
    try:
        wait_for(lambda: "Telegram bot token (typing is hidden):" in tmux.screen(), "the prompt")
        tmux("send-keys", "-t", "repl", "-l", TELEGRAM_TOKEN)
        tmux("send-keys", "-t", "repl", "Enter")
        wait_for(lambda: "STORE-EXITED 0" in tmux.screen(), "the command to end")
        screen = tmux.screen()
    finally:
        tmux("kill-server")
    assert "stored the bot token" in screen
    assert TELEGRAM_TOKEN not in screen
    assert TELEGRAM_TOKEN[-20:] not in screen
    assert (tmp_path / "telegram.token").read_text() == TELEGRAM_TOKEN + "\n"


def _daemon_home(tmp_path: Path, fake: FakeTelegram) -> Path:
    """A home whose daemon runs the Telegram bot against ``fake``."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(
        f'[telegram]\nenabled = true\nallowed_users = [1]\napi_base_url = "{fake.base_url}"\n',
        encoding="utf-8",
    )
    return home


def test_a_refused_token_is_in_no_log(tmp_path: Path) -> None:
    """Issue 33 item 14: the daemon runs the Telegram bot with a token Telegram
    refuses; the bot exits as a setup error, and no file the run wrote -- the bot's
    ``telegram.log``, the daemon's log -- holds the token, whole or its secret part."""
    fake = FakeTelegram().start()  # knows its own token, not ours
    wrong = f"{secrets.randbelow(10**9) + 10**9}:AAF{secrets.token_hex(16)}"
    home = _daemon_home(tmp_path, fake)
    try:
        daemon = DaemonProcess(home, {"AGENTRIO_TELEGRAM_TOKEN": wrong})
        try:
            _wait_text(home / "daemon.log", "cannot start as configured")
        finally:
            assert daemon.stop() == 0
    finally:
        fake.close()
    log = (home / "telegram.log").read_text()
    assert "Telegram refused the bot token" in log
    secret = wrong.partition(":")[2]
    written = [p for p in tmp_path.rglob("*") if p.is_file() and p.suffix in (".log", ".json")]
    assert home / "telegram.log" in written
    for path in written:
        assert secret not in path.read_text(errors="replace"), path


def _status(home: Path) -> tuple[str, dict[str, object]]:
    """``agentrio status`` and ``agentrio status --json`` of ``home``'s daemon."""
    argv = [sys.executable, "-m", "agentrio.repl", "status", "--home", str(home)]
    text = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True)
    data = subprocess.run([*argv, "--json"], capture_output=True, text=True, timeout=60)
    return text.stdout, json.loads(data.stdout)


def _health(home: Path) -> dict[str, Any]:
    info = json.loads((home / "daemon.json").read_text())
    with httpx.Client(base_url=f"http://{info['host']}:{info['port']}") as http:
        body: dict[str, Any] = http.get("/v1/health").json()
    return body


def _until_health(home: Path, ready: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    end = time.monotonic() + 30
    while time.monotonic() < end:
        body = _health(home)
        if ready(body):
            return body
        time.sleep(0.1)
    raise AssertionError(f"health never became ready: {body}")


def test_health_and_status_report_the_bots_and_the_store(tmp_path: Path) -> None:
    """Issue 33 item 15: ``/v1/health`` and ``agentrio status`` say which bots the
    daemon runs and how they are: a Telegram bot polling the (fake) API is running
    with its pid; one whose token is refused is stopped, with the refusal as its last
    error (the token redacted); the store is named and answering."""
    fake = FakeTelegram().start()
    home = _daemon_home(tmp_path, fake)
    try:
        daemon = DaemonProcess(home, {"AGENTRIO_TELEGRAM_TOKEN": fake.token})
        try:
            body = _until_health(
                home, lambda b: bool(b["frontends"]) and b["frontends"][0]["state"] == "running"
            )
            bot = body["frontends"][0]
            assert (bot["name"], bot["restarts"], bot["last_error"]) == ("telegram", 0, "")
            assert isinstance(bot["pid"], int)
            text, data = _status(home)
            assert f"  bots      telegram running (pid {bot['pid']})" in text.splitlines()
            assert "  store     sqlite, answering" in text.splitlines()
            assert data["frontends"] == [bot]
            assert data["store"] == {"backend": "sqlite", "ok": True, "detail": ""}
        finally:
            assert daemon.stop() == 0
        daemon = DaemonProcess(home, {"AGENTRIO_TELEGRAM_TOKEN": TELEGRAM_TOKEN})
        try:
            body = _until_health(home, lambda b: b["frontends"][0]["state"] == "stopped")
            bot = body["frontends"][0]
            assert bot["restarts"] == 1
            assert "Telegram refused the bot token" in bot["last_error"]
            assert TELEGRAM_TOKEN.partition(":")[2] not in bot["last_error"]
            text, _ = _status(home)
            assert "  bots      telegram stopped: cannot start as configured" in text
        finally:
            assert daemon.stop() == 0
    finally:
        fake.close()
