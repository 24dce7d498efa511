"""Checking the system password for confirmations of restricted commands (R7, R73).

A confirmation of a command that touches a restricted path asks for the system password
unless sudo credentials are still cached. `SudoVerifier` asks the real ``sudo``;
`FakeVerifier` stands in for it in tests and demos, so nothing needs a real sudo. Both
satisfy `PasswordVerifier`, which is what the engine is given.

The password never appears on a command line (where any user can read it from ``ps``),
in a log, in a returned message or in an exception (R73): it travels only on ``sudo``'s
stdin, and the error messages here are fixed strings.
"""

from __future__ import annotations

import hmac
from typing import Final, Protocol

import trio

__all__ = [
    "NOT_AVAILABLE",
    "TIMED_OUT",
    "WRONG_PASSWORD",
    "FakeVerifier",
    "PasswordVerifier",
    "SudoVerifier",
]

WRONG_PASSWORD: Final = "wrong password"
NOT_AVAILABLE: Final = "sudo is not available"
TIMED_OUT: Final = "the password check timed out"


class PasswordVerifier(Protocol):
    """Checks the system password (R7); injectable so tests need no sudo."""

    async def credentials_cached(self) -> bool:
        """True when sudo would run without asking for the password now."""
        ...

    async def verify(self, password: str) -> tuple[bool, str]:
        """``(True, "")`` when ``password`` is right, else ``(False, fixed message)``.

        The message never contains the password.
        """
        ...


class SudoVerifier:
    """Asks the system's ``sudo``.

    ``credentials_cached`` runs ``sudo -n -v`` (never prompts; exit 0 means cached).
    ``verify`` runs ``sudo -S -v -p ''`` with the password and a newline on stdin: ``-S``
    reads it from there instead of a terminal, ``-p ''`` keeps the prompt out of the
    captured output. On success sudo caches the credentials, so the confirmed command can
    use them. While credentials are cached sudo does not read the password at all and
    any entry passes, which is why callers ask `credentials_cached` first and ask for the
    password only when it says False.

    A missing ``sudo`` gives ``(False, NOT_AVAILABLE)``; a check that takes longer than
    ``timeout_s`` is killed and gives ``(False, TIMED_OUT)``; every other failure gives
    ``(False, WRONG_PASSWORD)``. sudo's own output is never passed on (it is not needed,
    and keeping it out keeps anything it might echo out of events).
    """

    def __init__(self, program: str = "sudo", *, timeout_s: float = 10.0) -> None:
        self._program = program
        self._timeout_s = timeout_s

    async def _run(self, args: list[str], stdin: bytes) -> int | None:
        """sudo's exit code; None when it timed out. Raises OSError if it cannot start."""
        with trio.move_on_after(self._timeout_s):
            done = await trio.run_process(
                [self._program, *args],
                stdin=stdin,
                capture_stdout=True,
                capture_stderr=True,
                check=False,
                # No controlling terminal: sudo cannot prompt on the daemon's terminal,
                # and its credential cache is keyed the same way (to the daemon
                # process) whether the daemon was started from a terminal or detached.
                start_new_session=True,
            )
            return done.returncode
        return None

    async def credentials_cached(self) -> bool:
        try:
            code = await self._run(["-n", "-v"], b"")
        except OSError:
            return False
        return code == 0

    async def verify(self, password: str) -> tuple[bool, str]:
        try:
            code = await self._run(["-S", "-v", "-p", ""], password.encode() + b"\n")
        except OSError:
            return False, NOT_AVAILABLE
        if code is None:
            return False, TIMED_OUT
        if code != 0:
            return False, WRONG_PASSWORD
        return True, ""


class FakeVerifier:
    """A `PasswordVerifier` that knows one password; for tests and offline use.

    It behaves like sudo: a right password caches the credentials (so
    `credentials_cached` is True afterwards) and, while they are cached, `verify` accepts
    any entry. ``available=False`` plays a machine without sudo. It counts calls and
    keeps the outcome of each `verify`, but never keeps a password it was given.
    """

    def __init__(self, password: str, *, cached: bool = False, available: bool = True) -> None:
        self._password = password
        self.cached = cached
        self.available = available
        self.cached_calls = 0
        self.verify_calls = 0
        self.outcomes: list[bool] = []

    def __repr__(self) -> str:
        return (
            f"FakeVerifier(cached={self.cached}, available={self.available}, "
            f"verify_calls={self.verify_calls})"
        )

    async def credentials_cached(self) -> bool:
        await trio.lowlevel.checkpoint()
        self.cached_calls += 1
        return self.available and self.cached

    async def verify(self, password: str) -> tuple[bool, str]:
        await trio.lowlevel.checkpoint()
        self.verify_calls += 1
        if not self.available:
            self.outcomes.append(False)
            return False, NOT_AVAILABLE
        ok = self.cached or hmac.compare_digest(password.encode(), self._password.encode())
        self.outcomes.append(ok)
        if not ok:
            return False, WRONG_PASSWORD
        self.cached = True
        return True, ""
