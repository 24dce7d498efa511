"""The file tools through the real daemon, seen in a real terminal (issue 32 section 2).

aimock (``--strict``) plays the model and asks for ``edit_file``/``write_file``/
``read_file`` calls; ``agentrio`` runs in tmux against the real daemon and a person's
keys answer its confirmations. What is checked is what a person would see -- the diff
in the dialog, the choices it offers -- and what happened on disk: an approved diff
applies exactly, a file changed between the dialog and the approval is left as it was,
a denied edit leaves the file byte-identical, and the home's token read through a
symlink is refused, in no output and in no request to the model. Waits poll the
screen; nothing is timed by sleeping.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.aimock import start_aimock, write_fixture
from tests.e2e.test_dialects_e2e import start_daemon
from tests.e2e.test_repl_tmux import Tmux, _start_repl, wait_armed, wait_for

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


def _turns(prompt: str, call: str, args: dict[str, Any], after: str) -> list[dict[str, Any]]:
    return [
        {
            "match": {"userMessage": prompt, "hasToolResult": False},
            "response": {"toolCalls": [{"id": f"call_{call}", "name": call, "arguments": args}]},
        },
        {"match": {"userMessage": prompt, "hasToolResult": True}, "response": {"content": after}},
    ]


def _joined(tmux: Tmux) -> str:
    return tmux.screen().replace("\n", "")


def _keys(tmux: Tmux, *keys: str) -> None:
    tmux("send-keys", "-t", "repl", *keys)


def _idle(tmux: Tmux, reply: str) -> None:
    """Wait for the model's ``reply`` and the task's end (no run in the toolbar): a
    line typed while a task runs would steer it."""
    wait_for(lambda: reply in tmux.screen(), f"the model's reply {reply!r}")
    wait_for(lambda: " running" not in tmux.screen(), "the task's end")


def _flows(home: Path, work: Path) -> None:
    """The person's side, in tmux (blocking: run in a thread)."""
    app, note, keep = work / "app.py", work / "note.txt", work / "keep.txt"
    tmux = Tmux()
    try:
        _start_repl(tmux, home)
        # 1. An edit: the dialog shows the real path and the diff; approved, it applies.
        _keys(tmux, "edit the app", "Enter")
        wait_for(lambda: "Confirm tool call" in tmux.screen(), "the edit's dialog")
        wait_for(lambda: "-│ b = 2" in tmux.screen(), "the removed line")
        screen = tmux.screen()
        assert "+│ b = 20" in screen
        assert "@@│ -1,3 +1,3 @@" in screen
        assert f"path: {app}" in _joined(tmux)
        assert "Always allow this exact command" not in screen  # a file change's own choices
        assert "Allow this turn" not in screen
        assert f"5. Always allow edits of files under {work}" in _joined(tmux)
        wait_armed(tmux)
        _keys(tmux, "1")
        wait_for(lambda: "✓ edit_file" in tmux.screen(), "the edit's result")
        _idle(tmux, "the app is edited")
        assert app.read_bytes() == b"a = 1\nb = 20\nc = 3\n"

        # 2. The file changes while the dialog is open: approving writes nothing.
        _keys(tmux, "write the note", "Enter")
        wait_for(lambda: "+│ fresh" in tmux.screen(), "the write's diff")
        note.write_bytes(b"someone else wrote this\n")
        wait_armed(tmux)
        _keys(tmux, "1")
        wait_for(lambda: "changed after the diff was computed" in _joined(tmux), "the refusal")
        _idle(tmux, "the note is handled")
        assert note.read_bytes() == b"someone else wrote this\n"

        # 3. A denied edit leaves the file byte-identical.
        before = keep.read_bytes()
        _keys(tmux, "change keep", "Enter")
        wait_for(lambda: "+│ changed" in tmux.screen(), "the denied edit's diff")
        wait_armed(tmux)
        _keys(tmux, "2")
        wait_for(lambda: "reason" in tmux.screen(), "the reason field")
        _keys(tmux, "not this one", "Enter")
        wait_for(lambda: "denied by the user: not this one" in _joined(tmux), "the denial")
        _idle(tmux, "keep is unchanged")
        assert keep.read_bytes() == before

        # 4. The home's token through a symlink: refused, never asked, never shown.
        _keys(tmux, "read the link", "Enter")
        wait_for(lambda: "read_file not run" in tmux.screen(), "the refusal")
        _idle(tmux, "nothing to read")
        assert "is in a hidden place" in _joined(tmux)
        token = (home / "token").read_text().strip()
        assert token not in tmux.screen()
    finally:
        tmux("kill-server")


async def test_file_tools_in_the_repl(nursery: trio.Nursery, tmp_path: Path) -> None:
    """Issue 32 s2: see the module docstring; every outcome is checked on disk, and the
    token is in no request the model got."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "app.py").write_bytes(b"a = 1\nb = 2\nc = 3\n")
    (work / "keep.txt").write_bytes(b"keep me\r\n")
    (work / "note.txt").write_bytes(b"old note\n")
    home = tmp_path / "home"
    (work / "link").symlink_to(home / "token")
    fixture = [
        *_turns(
            "edit the app",
            "edit_file",
            {"path": str(work / "app.py"), "old_string": "b = 2", "new_string": "b = 20"},
            "the app is edited",
        ),
        *_turns(
            "write the note",
            "write_file",
            {"path": str(work / "note.txt"), "content": "fresh\n"},
            "the note is handled",
        ),
        *_turns(
            "change keep",
            "edit_file",
            {"path": str(work / "keep.txt"), "old_string": "keep me", "new_string": "changed"},
            "keep is unchanged",
        ),
        *_turns("read the link", "read_file", {"path": str(work / "link")}, "nothing to read"),
    ]
    aimock = await start_aimock(nursery, write_fixture(tmp_path, fixture))
    daemon = await start_daemon(home, aimock, "openai")
    try:
        await trio.to_thread.run_sync(_flows, home, work)
    finally:
        assert await trio.to_thread.run_sync(daemon.stop) == 0
    token = (home / "token").read_text().strip()
    journal = await aimock.journal()
    assert len(journal) == 8
    assert all(entry["response"]["status"] == 200 for entry in journal)
    for entry in journal:
        assert token not in str(entry)
    assert os.path.islink(work / "link")
