"""What the REPL and ``agentrio status|stop`` read in a home: who holds its lock, and
the note of a deliberate stop (SPEC §11, R53)."""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path

import pytest

from agentrio.engine.server import lifecycle
from agentrio.repl.daemon import STOPPED_FILE, StopNote, home_lock_holder, read_stopped


@pytest.mark.skipif(not Path("/proc/locks").exists(), reason="needs /proc/locks")
def test_home_lock_holder_reads_proc_locks_without_taking_the_lock(tmp_path: Path) -> None:
    """§11: the holder of the home's flock is found in /proc/locks; another folder's
    lock is not mistaken for it, and looking does not take the lock."""
    home, other = tmp_path / "home", tmp_path / "other"
    home.mkdir()
    other.mkdir()
    assert home_lock_holder(home) is None
    assert home_lock_holder(tmp_path / "missing") is None
    fd = os.open(other, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert home_lock_holder(home) is None
        assert home_lock_holder(other) == os.getpid()
    finally:
        os.close(fd)
    assert home_lock_holder(other) is None


def test_stop_note_round_trip_and_sanitised(tmp_path: Path) -> None:
    """R53: the daemon's note (``agentrio.engine.server.lifecycle.write_stop_note``) is what the
    REPL reads, under the same file name; control characters never reach a terminal;
    a broken note counts as none, and the next daemon's removal clears it."""
    assert lifecycle.STOPPED_FILE == STOPPED_FILE
    assert read_stopped(tmp_path) is None
    lifecycle.write_stop_note(tmp_path, 4242, "agentrio stop")
    note = read_stopped(tmp_path)
    assert note is not None
    assert (note.pid, note.reason) == (4242, "agentrio stop")
    assert (tmp_path / STOPPED_FILE).stat().st_mode & 0o777 == 0o600
    (tmp_path / STOPPED_FILE).write_text(json.dumps({"pid": 1, "at": 0, "reason": "\x1b[2Jx"}))
    assert read_stopped(tmp_path) == StopNote(pid=1, at=0.0, reason="[2Jx")
    (tmp_path / STOPPED_FILE).write_text("{broken")
    assert read_stopped(tmp_path) is None
    lifecycle.remove_stop_note(tmp_path)
    assert not (tmp_path / STOPPED_FILE).exists()
