"""engine/tools/sudo.py: the system password check (R7) and keeping the password out of
command lines, environments and messages (R73).

`SudoVerifier` runs against a fake ``sudo`` script written into ``tmp_path``: it logs
its argv and environment, accepts only ``s3cret`` on stdin, and keeps a "credentials
cached" flag file the way sudo keeps its timestamp.
"""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from agentrio.engine.tools.sudo import (
    NOT_AVAILABLE,
    TIMED_OUT,
    WRONG_PASSWORD,
    FakeVerifier,
    PasswordVerifier,
    SudoVerifier,
)

PASSWORD = "s3cret"
WRONG = "hunter2-wrong"

FAKE_SUDO = """#!/bin/sh
printf '%s|' "$@" >> "{log}"
printf '\\n' >> "{log}"
env >> "{env}"
case "$1" in
  -n)
    [ -e "{flag}" ] && exit 0
    exit 1
    ;;
  -S)
    IFS= read -r password
    if [ "$password" = "s3cret" ]; then
      touch "{flag}"
      exit 0
    fi
    echo "Sorry, try again." >&2
    exit 1
    ;;
esac
exit 2
"""


def _script(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.fixture
def fake_sudo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake ``sudo`` first on PATH; returns the directory holding its logs."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _script(
        bin_dir / "sudo",
        FAKE_SUDO.format(
            log=tmp_path / "argv.log", env=tmp_path / "env.log", flag=tmp_path / "cached"
        ),
    )
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    return tmp_path


async def test_sudo_verifier_right_password(fake_sudo: Path) -> None:
    """R7: the right password passes, and sudo then reports cached credentials."""
    verifier: PasswordVerifier = SudoVerifier()
    assert await verifier.credentials_cached() is False
    assert await verifier.verify(PASSWORD) == (True, "")
    assert await verifier.credentials_cached() is True
    calls = (fake_sudo / "argv.log").read_text().splitlines()
    assert calls == ["-n|-v|", "-S|-v|-p||", "-n|-v|"]


async def test_sudo_verifier_wrong_password_never_leaks(fake_sudo: Path) -> None:
    """R7, R73: a wrong password is refused with a fixed message; no password ever
    appears on sudo's command line, in its environment, or in the message."""
    verifier = SudoVerifier()
    ok, error = await verifier.verify(WRONG)
    assert (ok, error) == (False, WRONG_PASSWORD)
    assert await verifier.credentials_cached() is False
    assert await verifier.verify(PASSWORD) == (True, "")
    logged = (fake_sudo / "argv.log").read_text() + (fake_sudo / "env.log").read_text()
    assert "-S|-v|-p||" in logged
    assert WRONG not in logged
    assert PASSWORD not in logged
    assert WRONG not in error


async def test_sudo_verifier_without_sudo(tmp_path: Path) -> None:
    """R7: a machine without sudo refuses with "sudo is not available"."""
    verifier = SudoVerifier(str(tmp_path / "no-such-sudo"))
    assert await verifier.credentials_cached() is False
    assert await verifier.verify(PASSWORD) == (False, NOT_AVAILABLE)


async def test_sudo_verifier_times_out(tmp_path: Path) -> None:
    """R7: a sudo that never answers is killed after the timeout and refuses."""
    slow = _script(tmp_path / "slow-sudo", "#!/bin/sh\nexec sleep 100\n")
    verifier = SudoVerifier(str(slow), timeout_s=0.2)
    assert await verifier.verify(PASSWORD) == (False, TIMED_OUT)
    assert await verifier.credentials_cached() is False


async def test_fake_verifier_checks_and_counts() -> None:
    """R7: the fake refuses a wrong password, accepts the right one, then is cached."""
    fake = FakeVerifier(PASSWORD)
    assert await fake.credentials_cached() is False
    assert await fake.verify(WRONG) == (False, WRONG_PASSWORD)
    assert await fake.credentials_cached() is False
    assert await fake.verify(PASSWORD) == (True, "")
    assert await fake.credentials_cached() is True
    assert (fake.cached_calls, fake.verify_calls, fake.outcomes) == (3, 2, [False, True])


async def test_fake_verifier_cached_accepts_any_entry() -> None:
    """R7: while credentials are cached, like sudo, any entry passes."""
    fake = FakeVerifier(PASSWORD, cached=True)
    assert await fake.credentials_cached() is True
    assert await fake.verify(WRONG) == (True, "")
    assert fake.outcomes == [True]


async def test_fake_verifier_unavailable() -> None:
    """R7: the fake can play a machine without sudo."""
    fake = FakeVerifier(PASSWORD, cached=True, available=False)
    assert await fake.credentials_cached() is False
    assert await fake.verify(PASSWORD) == (False, NOT_AVAILABLE)
    assert (fake.cached_calls, fake.verify_calls) == (1, 1)


async def test_fake_verifier_keeps_no_wrong_password() -> None:
    """R73: nothing the fake keeps or shows holds a password it was given."""
    fake = FakeVerifier(PASSWORD)
    await fake.verify(WRONG)
    kept = repr(vars(fake)) + repr(fake)
    assert WRONG not in kept
    assert PASSWORD not in repr(fake)
