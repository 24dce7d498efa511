"""R82: the daemon starts the enabled front-ends as children, restarts them with
backoff when they exit, logs them to the home and stops them on shutdown."""

from __future__ import annotations

import os
import signal
import stat
import sys
from pathlib import Path

import trio

from agentrio.engine.frontends_supervisor import FrontendSpec, supervise
from agentrio.testing import DaemonProcess
from tests.frontends.conftest import TOKEN, eventually, write_config
from tests.frontends.fake_telegram import FakeTelegram


def _children(pid: int, needle: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        ppid = next(
            (line.split()[1] for line in status.splitlines() if line.startswith("PPid:")), ""
        )
        if ppid == str(pid) and needle in cmdline and "\nState:\tZ" not in status:
            found.append(int(entry.name))
    return found


async def test_daemon_starts_restarts_and_stops_the_bot(fake: FakeTelegram, tmp_path: Path) -> None:
    """R82: ``[telegram] enabled``: the daemon runs the bot (it answers), starts it
    again after it was killed, logs it to <home>/telegram.log (0600), and ends it on
    shutdown."""
    home = tmp_path / "home"
    write_config(home, fake, enabled=True)
    daemon = await trio.to_thread.run_sync(
        lambda: DaemonProcess(home, {"AGENTRIO_TELEGRAM_TOKEN": TOKEN})
    )
    try:
        bots = await eventually(lambda: _children(daemon.pid, "agentrio.frontends.telegram"))
        fake.say("/pending")
        await eventually(lambda: fake.with_text("Nothing is waiting"), what="the bot's answer")
        os.kill(bots[0], signal.SIGKILL)
        await eventually(
            lambda: [
                p for p in _children(daemon.pid, "agentrio.frontends.telegram") if p != bots[0]
            ],
            what="a new bot",
        )
        await eventually(lambda: len(fake.calls_of("getMe")) >= 2, what="the new bot's getMe")
        log = home / "telegram.log"
        assert stat.S_IMODE(log.stat().st_mode) == 0o600
        assert "polling" in log.read_text()
        assert TOKEN not in log.read_text()
    finally:
        code = await trio.to_thread.run_sync(daemon.stop)
    assert code == 0
    assert _children(daemon.pid, "agentrio.frontends.telegram") == []
    assert "exited with -9; restarting" in (home / "daemon.log").read_text()


async def test_a_crashing_front_end_is_restarted_with_backoff(tmp_path: Path) -> None:
    """R82: a front-end that keeps exiting is started again, later each time."""
    marker = tmp_path / "starts"
    spec = FrontendSpec(
        name="crashy",
        argv=[sys.executable, "-c", f"open({str(marker)!r}, 'a').write('x'); raise SystemExit(1)"],
        log_path=tmp_path / "crashy.log",
        backoff_base_s=0.05,
        backoff_cap_s=0.4,
    )
    with trio.move_on_after(3):
        await supervise(spec)
    starts = len(marker.read_text())
    assert 4 <= starts <= 40


async def test_a_setup_error_is_not_restarted(tmp_path: Path) -> None:
    """R82: exit code 2 (no token, a bad table) cannot be fixed by a restart."""
    marker = tmp_path / "starts"
    spec = FrontendSpec(
        name="unconfigured",
        argv=[sys.executable, "-c", f"open({str(marker)!r}, 'a').write('x'); raise SystemExit(2)"],
        log_path=tmp_path / "x.log",
        backoff_base_s=0.01,
    )
    with trio.fail_after(10):
        await supervise(spec)
    assert marker.read_text() == "x"
