"""A home another user could have planted is refused (issue 29 finding 8).

The attack: another user pre-creates the home (in a shared parent), with a token they
know, and waits for the daemon to adopt it. Each case starts the real daemon
(``python -m agentrio.engine daemon``) and asserts the one start-up line, exit 2, and that the
daemon did nothing with the home: no ``daemon.json``, no socket, no store, the planted
token unchanged. Cases that need another owner use ``chown`` and so run as root
(tests and CI do); as another user they are skipped, the mode cases still run.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from agentrio.engine.server.ownership import UnsafeHome, check_home
from tests.e2e.conftest import ROOT, DaemonProcess

#: A uid that is not ours (``nobody``).
OTHER_UID = 65534
PLANTED_TOKEN = "planted-token-known-to-the-attacker"

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")


def _start(home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentrio.engine", "daemon", "--port", "0", "--home", str(home)],
        cwd=ROOT,
        env={**os.environ, "AGENTRIO_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _planted(parent: Path) -> Path:
    home = parent / "home"
    home.mkdir(mode=0o700)
    (home / "token").write_text(PLANTED_TOKEN)
    (home / "token").chmod(0o600)
    return home


def _refused(home: Path, *needles: str) -> None:
    done = _start(home)
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("agentrio daemon: "), done.stderr
    for needle in needles:
        assert needle in lines[0]
    assert "Traceback" not in done.stderr
    # Nothing was adopted: no address, no socket, no store, the token as planted.
    for name in ("daemon.json", "daemon.sock", "agentrio.db", "daemon.log"):
        assert not (home / name).exists(), name
    assert (home / "token").read_text() == PLANTED_TOKEN


@as_root
def test_a_home_owned_by_another_user_is_refused(tmp_path: Path) -> None:
    """Issue 29 finding 8: a home another user made (with a token they know) is not
    adopted, even by root."""
    home = _planted(tmp_path)
    os.chown(home, OTHER_UID, OTHER_UID)
    os.chown(home / "token", OTHER_UID, OTHER_UID)
    _refused(home, f"home {home}", f"owned by uid {OTHER_UID}", "--home")


def test_a_home_writable_by_others_is_refused(tmp_path: Path) -> None:
    """Issue 29 finding 8: a home others may write to (anyone could have put a token
    or config there) is refused; chmod go-w is the fix it names."""
    home = _planted(tmp_path)
    home.chmod(0o777)
    _refused(home, "writable by group or others", "chmod go-w")


def test_a_token_writable_by_others_is_refused(tmp_path: Path) -> None:
    """Issue 29 finding 8: a group-writable token is refused."""
    home = _planted(tmp_path)
    (home / "token").chmod(0o620)
    _refused(home, f"token {home / 'token'}", "writable by group or others")


@as_root
def test_a_config_of_another_user_is_refused_before_it_is_read(tmp_path: Path) -> None:
    """Issue 29 finding 8: a config.toml another user owns is refused, before it is
    parsed (a broken one would otherwise be reported as a config error)."""
    home = _planted(tmp_path)
    (home / "config.toml").write_text("[server\nbroken")
    os.chown(home / "config.toml", OTHER_UID, OTHER_UID)
    _refused(home, f"config.toml {home / 'config.toml'}", f"uid {OTHER_UID}")


@as_root
def test_a_home_below_a_directory_of_another_user_is_refused(tmp_path: Path) -> None:
    """Issue 29 finding 8: a home of ours inside a directory another user owns could
    be swapped by them for their own: refused."""
    shared = tmp_path / "shared"
    shared.mkdir()
    home = _planted(shared)
    os.chown(shared, OTHER_UID, OTHER_UID)
    _refused(home, f"{shared}, above the home", f"uid {OTHER_UID}")


def test_a_world_writable_parent_without_sticky_bit_is_refused(tmp_path: Path) -> None:
    """Issue 29 finding 8: a parent anyone may write to (no sticky bit) is refused;
    one with the sticky bit (like /tmp) is fine."""
    shared = tmp_path / "shared"
    shared.mkdir()
    home = _planted(shared)
    shared.chmod(0o777)
    _refused(home, f"{shared}, above the home", "sticky")
    shared.chmod(0o1777)
    check_home(home)


def test_homes_made_by_agentrio_and_older_loose_modes_keep_working(tmp_path: Path) -> None:
    """Issue 29 finding 8 without breaking anyone: a home an earlier release left
    readable (0755, token 0644) starts and is tightened; a missing one is made."""
    old = tmp_path / "old"
    old.mkdir(mode=0o755)
    old.chmod(0o755)
    (old / "token").write_text("an-old-token-of-this-user")
    (old / "token").chmod(0o644)
    (old / "config.toml").write_text("[server]\nport = 0\n")
    (old / "config.toml").chmod(0o644)
    daemon = DaemonProcess(old)
    try:
        assert daemon.info.token == "an-old-token-of-this-user"
        assert (old / "token").stat().st_mode & 0o077 == 0
    finally:
        assert daemon.stop() == 0
    check_home(tmp_path / "new" / "home")  # nothing there yet: made 0700 at start
    (tmp_path / "file").write_text("")
    with pytest.raises(UnsafeHome, match="not a directory"):
        check_home(tmp_path / "file")
