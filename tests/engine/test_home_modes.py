"""The home's file modes, in process: folders 0700, files 0600, from creation (R73,
issue 15 item 6).

Every test that creates files runs under umask 0, so a file made with the default mode
would come out 0666 (a folder 0777): only an explicit mode passes. Writers that go
through a temporary file are watched at each ``os.write``: the file already has its
final mode before the first byte of data is in it.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentrio.engine.background.jobs import _write_json_atomic, _write_text
from agentrio.engine.background.logs import open_log
from agentrio.engine.server.auth import load_or_create_token
from agentrio.engine.server.home_modes import tighten_home_logged
from agentrio.engine.server.lifecycle import instance_lock, write_daemon_json
from agentrio.engine.store.files import (
    make_home,
    make_private_dirs,
    open_private,
    tighten_home,
    write_private_atomic,
)
from agentrio.engine.store.sqlite import SqliteStore


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.fixture
def open_umask() -> Iterator[None]:
    """umask 0 for the test: whatever is not created with an explicit mode is 0666."""
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


@pytest.fixture
def writes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The mode of the file behind every ``os.write`` at the moment it is written."""
    seen: list[int] = []
    real_write = os.write

    def spy(fd: int, data: bytes | memoryview) -> int:
        seen.append(stat.S_IMODE(os.fstat(fd).st_mode))
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", spy)
    return seen


@pytest.mark.usefixtures("open_umask")
def test_make_home_is_0700_and_leaves_its_parents_alone(tmp_path: Path) -> None:
    """R73, issue 15 item 6: a new home is 0700; ``~/.config`` above it is not ours."""
    home = tmp_path / "config" / "agentrio"
    make_home(home)
    assert mode(home) == 0o700
    assert mode(home.parent) == 0o777
    os.chmod(home, 0o750)
    make_home(home)  # an existing home is tightened by the daemon's start, not here
    assert mode(home) == 0o750


@pytest.mark.usefixtures("open_umask")
def test_private_dirs_are_0700_at_every_level(tmp_path: Path) -> None:
    """R73, issue 15 item 6: ``sessions/<s>/background`` makes every missing level 0700."""
    home = tmp_path / "home"
    make_home(home)
    make_private_dirs(home / "sessions" / "cli-a" / "background")
    for folder in ("sessions", "sessions/cli-a", "sessions/cli-a/background"):
        assert mode(home / folder) == 0o700, folder


@pytest.mark.usefixtures("open_umask")
def test_open_private_creates_0600_and_sets_an_existing_file_back(tmp_path: Path) -> None:
    """R73, issue 15 item 6: created 0600; an existing 0644 file is 0600 once opened."""
    path = tmp_path / "f"
    os.close(open_private(path, os.O_WRONLY))
    assert mode(path) == 0o600
    os.chmod(path, 0o644)
    os.close(open_private(path, os.O_RDONLY, create=False))
    assert mode(path) == 0o600
    with pytest.raises(FileNotFoundError):
        open_private(tmp_path / "absent", os.O_RDONLY, create=False)
    assert not (tmp_path / "absent").exists()


@pytest.mark.usefixtures("open_umask")
def test_atomic_writes_are_0600_before_the_data_is_in(tmp_path: Path, writes: list[int]) -> None:
    """R73, issue 15 item 6: the temporary file of an atomic write (job files, reports,
    ``daemon.json``) is 0600 at every write, even over a stale looser one."""
    folder = tmp_path / "sessions" / "cli-a" / "background"
    stale = folder.parent / "reports" / ".sub_1.md.tmp"
    make_private_dirs(stale.parent)
    stale.write_text("old")
    os.chmod(stale, 0o644)
    _write_json_atomic(folder / "job_1.json", {"legs": [], "objective": "é"})
    _write_text(folder.parent / "reports" / "sub_1.md", "# report")
    write_daemon_json(tmp_path, {"pid": 1})
    write_private_atomic(tmp_path / "x", b"")
    assert writes
    assert set(writes) == {0o600}
    for path in (folder / "job_1.json", folder.parent / "reports" / "sub_1.md"):
        assert mode(path) == 0o600, path
    assert mode(tmp_path / "daemon.json") == 0o600
    assert mode(folder) == mode(folder.parent) == mode(folder.parent.parent) == 0o700
    assert sorted(p.name for p in folder.iterdir()) == ["job_1.json"]


@pytest.mark.usefixtures("open_umask")
def test_leg_log_is_0600(tmp_path: Path) -> None:
    """R73, issue 15 item 6: a leg's log (command output) is created 0600."""
    path = tmp_path / "cmd_1.log"
    with open_log(path) as log:
        log.write(b"output\n")
    assert mode(path) == 0o600
    assert path.read_bytes() == b"output\n"


@pytest.mark.usefixtures("open_umask")
def test_token_lock_and_log_files(tmp_path: Path) -> None:
    """R73, issue 15 item 6: the daemon's own files in a home it makes itself."""
    home = tmp_path / "home"
    load_or_create_token(home)
    assert mode(home) == 0o700
    assert mode(home / "token") == 0o600
    with instance_lock(home):
        assert mode(home / "daemon.lock") == 0o600
    assert {p.name for p in home.iterdir()} == {"token", "daemon.lock"}


@pytest.mark.usefixtures("open_umask")
async def test_database_and_side_files_are_0600(tmp_path: Path) -> None:
    """R73, issue 15 item 6: ``agentrio.db`` (secrets included) and its ``-wal`` and
    ``-shm`` files are 0600; a side file left looser is set back when a store opens."""
    path = tmp_path / "home" / "agentrio.db"
    store = await SqliteStore.open(path)
    try:
        await store.put_secret("cli-a", "API_TOKEN", "value")
        wal, shm = path.with_name("agentrio.db-wal"), path.with_name("agentrio.db-shm")
        assert wal.exists()
        assert shm.exists()
        assert mode(path.parent) == 0o700
        for file in (path, wal, shm):
            assert mode(file) == 0o600, file.name
        os.chmod(wal, 0o644)
        os.chmod(shm, 0o644)
        second = await SqliteStore.open(path)
        await second.aclose()
        assert (mode(wal), mode(shm)) == (0o600, 0o600)
    finally:
        await store.aclose()


def test_tighten_home_takes_group_and_world_bits_off(tmp_path: Path) -> None:
    """R73, issue 15 item 6: a home made earlier with loose modes is tightened whole;
    a symbolic link and what it points at outside the home are left alone."""
    home, outside = tmp_path / "home", tmp_path / "outside"
    (home / "sessions" / "cli-a" / "reports").mkdir(parents=True)
    (home / "sessions" / "cli-a" / "reports" / "sub_1.md").write_text("r")
    (home / "token").write_text("t")
    (home / "config.toml").write_text("")
    os.chmod(home / "config.toml", 0o664)
    outside.write_text("not ours")
    (home / "link").symlink_to(outside)
    for path in (home, home / "sessions", home / "sessions" / "cli-a"):
        os.chmod(path, 0o755)
    os.chmod(home / "sessions" / "cli-a" / "reports", 0o770)
    os.chmod(home / "sessions" / "cli-a" / "reports" / "sub_1.md", 0o644)
    os.chmod(home / "token", 0o600)
    os.chmod(outside, 0o644)
    changed, failed = tighten_home(home)
    assert failed == []
    assert sorted(str(p.relative_to(home)) for p in changed) == [
        ".",
        "sessions",
        "sessions/cli-a",
        "sessions/cli-a/reports",
        "sessions/cli-a/reports/sub_1.md",
    ]
    assert mode(home) == mode(home / "sessions" / "cli-a" / "reports") == 0o700
    assert mode(home / "sessions" / "cli-a" / "reports" / "sub_1.md") == 0o600
    assert mode(outside) == 0o644
    assert mode(home / "config.toml") == 0o664  # the person's own file (issue 30)
    assert tighten_home(home) == ([], [])


def test_daemon_start_says_once_what_it_tightened(tmp_path: Path) -> None:
    """R73, issue 15 item 6: the start-up step logs one warning when it had to tighten
    something, and nothing when the home was already owner-only; issue 30: it leaves
    the person's config.toml as it is and warns, at each start, that others can read
    it."""
    home = tmp_path / "home"
    home.mkdir(mode=0o755)
    os.chmod(home, 0o755)
    (home / "config.toml").write_text("")
    os.chmod(home / "config.toml", 0o644)
    records: list[logging.LogRecord] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Collect(logging.DEBUG)
    logger = logging.getLogger("agentrio.daemon")
    logger.addHandler(handler)
    try:
        tighten_home_logged(home)
        tighten_home_logged(home)
    finally:
        logger.removeHandler(handler)
    tightened, config, again = records
    assert tightened.levelno == config.levelno == logging.WARNING
    message = tightened.getMessage()
    assert "1 path(s) were open to group or world" in message
    assert message.endswith(": .")
    assert config.getMessage() == (
        f"{home / 'config.toml'} can be read by other users (mode 0644): agentrio leaves "
        f"your file as it is; chmod 600 {home / 'config.toml'} to keep it private"
    )
    # Issue 30: the person's own file is never rewritten, not even its mode.
    assert (mode(home), mode(home / "config.toml")) == (0o700, 0o644)
    assert again.getMessage() == config.getMessage()
