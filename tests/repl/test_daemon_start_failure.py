"""Issue 30 "Start-up tells the truth where the person is looking": a daemon the REPL
starts that cannot start gives the REPL its own one-line reason, and one that finds the
default port held by another home's daemon takes a free port (recorded in
``daemon.json``, said once) instead of failing. Real daemons (``python -m agentrio.engine
daemon`` spawned as the REPL spawns it), real sockets.
"""

from __future__ import annotations

import errno
import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentrio.engine.config import DEFAULT_PORT
from agentrio.repl.daemon import PORT_FALLBACK_KEY, DaemonStartError, ensure_daemon, start_failure
from agentrio.repl.messages import Status
from agentrio.transport import open_http


def test_the_reason_is_the_daemons_last_own_line_since_it_was_started(tmp_path: Path) -> None:
    """Issue 30: only what the started daemon wrote counts (an older run's reason, before
    the offset, does not), its last ``agentrio daemon:`` line, without the prefix; none
    gives ""."""
    log = tmp_path / "daemon.log"
    log.write_text("agentrio daemon: an old reason\n")
    start = log.stat().st_size
    assert start_failure(log, start) == ""
    with log.open("a") as f:
        f.write(
            "2026-01-01 WARNING agentrio.daemon: noise\nagentrio daemon: port 1 is taken\x1b[2J\n"
        )
    assert start_failure(log, start) == "port 1 is taken[2J"
    assert start_failure(tmp_path / "none.log", 0) == ""


async def test_a_started_daemon_that_cannot_start_gives_its_reason(tmp_path: Path) -> None:
    """Issue 30: ``provider = "openai"`` without ``name``: the daemon the REPL starts
    exits 2, and the REPL's error is the daemon's own line (file, line, key), not only
    "see its log"."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text('[model]\nprovider = "openai"\n')
    said: list[Status] = []
    async with open_http() as http:
        with pytest.raises(DaemonStartError) as caught:
            await ensure_daemon(home, http, status=said.append, wait_s=30)
    assert str(caught.value) == (
        f"the daemon could not start: {home / 'config.toml'}:2: model.name: required with "
        f'provider = "openai" (the model to call) (its log: {home / "daemon.log"})'
    )
    assert not (home / "daemon.json").exists()


@pytest.fixture
def default_port_held() -> Iterator[None]:
    """The default port held for the test: by us, or already by someone else (another
    home's daemon on this machine) -- held either way."""
    holder = socket.socket()
    try:
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            holder.bind(("127.0.0.1", DEFAULT_PORT))
            holder.listen()
        except OSError as exc:
            assert exc.errno == errno.EADDRINUSE
        yield
    finally:
        holder.close()


@pytest.mark.usefixtures("default_port_held")
async def test_a_started_daemon_takes_a_free_port_when_the_default_is_held(
    tmp_path: Path,
) -> None:
    """Issue 30: with the default port held, the daemon the REPL starts serves on a
    free port, ``daemon.json`` records it and the taken one, and the REPL says so once;
    the same daemon found again is not announced again."""
    import trio

    home = tmp_path / "home"
    said: list[Status] = []
    try:
        async with open_http() as http:
            endpoint = await ensure_daemon(home, http, status=said.append, wait_s=30)
            again = await ensure_daemon(home, http, status=said.append)
        info = json.loads((home / "daemon.json").read_text())
        assert endpoint.port == again.port == info["port"] != DEFAULT_PORT
        assert info[PORT_FALLBACK_KEY] == DEFAULT_PORT
        notes = [s.text for s in said if "is in use" in s.text]
        assert notes == [
            f"port {DEFAULT_PORT} is in use (another home's daemon?): this home's daemon "
            f"listens on port {info['port']} instead (recorded in {home / 'daemon.json'})"
        ]
        log = await trio.to_thread.run_sync((home / "daemon.log").read_text)
        assert f"port {DEFAULT_PORT} on 127.0.0.1 is in use" in log
    finally:
        await trio.to_thread.run_sync(_stop_sync, home)


def _stop_sync(home: Path) -> None:
    from agentrio.repl.control import main as control

    if (home / "daemon.json").exists():
        assert control(["stop", "--home", str(home)]) == 0


@pytest.mark.usefixtures("default_port_held")
def test_a_daemon_run_by_hand_on_a_held_port_still_fails_in_one_line(tmp_path: Path) -> None:
    """Issue 30: only the REPL's started daemons move: ``agentrio daemon`` by hand on the
    held default port says so in one line and exits 2 (the person chose to run it)."""
    import subprocess
    import sys

    home = tmp_path / "home"
    done = subprocess.run(
        [sys.executable, "-m", "agentrio.engine", "daemon", "--home", str(home)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1].startswith(
        f"agentrio daemon: port {DEFAULT_PORT} on 127.0.0.1 is already in use"
    )


def test_the_repl_and_the_daemon_name_the_fallback_key_alike() -> None:
    """The REPL does not import the engine, so the key is written twice: the same."""
    from agentrio.engine.server.ports import PORT_FALLBACK_KEY as DAEMONS

    assert PORT_FALLBACK_KEY == DAEMONS
