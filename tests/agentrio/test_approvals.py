"""A script's rule of commands judges the command and its directory (issue 29 finding
4): `agentrio.approvals`, which ``agentrio.testing.allow_commands`` and
examples/chat_frontend.py use."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from agentrio.approvals import RuleOfCommands, confirmed_command
from agentrio.protocol.frames import Ask
from agentrio.testing import allow_commands


def _ask(tool_args: dict[str, Any], tool_name: str = "run_command") -> Ask:
    return Ask(
        id="a1",
        kind="tool_confirm",
        session_id="chat-x",
        task_hash="t",
        tool_name=tool_name,
        tool_args=tool_args,
    )


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[str, str, Path]:
    trusted, hostile = tmp_path / "trusted", tmp_path / "hostile"
    trusted.mkdir()
    hostile.mkdir()
    link = tmp_path / "link"
    link.symlink_to(trusted)
    return os.path.realpath(trusted), os.path.realpath(hostile), link


def test_the_command_and_its_directory_are_judged(dirs: tuple[str, str, Path]) -> None:
    """Issue 29 finding 4: a rule for ``sh build.sh`` in the trusted checkout (given
    through a symlink: its real path counts) approves it there only; not in a hostile
    checkout, not without a directory (an older daemon's ask), not another tool."""
    trusted, hostile, link = dirs
    rule = RuleOfCommands.of(r"sh build\.sh", [link])
    assert rule.directories == {trusted}
    assert rule.allows(_ask({"command": "sh build.sh", "cwd": trusted}))
    assert not rule.allows(_ask({"command": "sh build.sh", "cwd": hostile}))
    assert not rule.allows(_ask({"command": "sh build.sh"}))
    assert not rule.allows(_ask({"command": "sh build.sh", "cwd": "build"}))
    assert not rule.allows(_ask({"command 1": "sh build.sh", "cwd 1": trusted}, "run_commands"))


def test_an_argv_is_judged_as_the_shell_would_read_it(dirs: tuple[str, str, Path]) -> None:
    """Issue 29 finding 4: an argv is ``shlex.join`` of it: ``["touch", "a b"]`` is
    ``touch 'a b'``, never ``touch a b``; a word with ``;`` cannot pass for two
    commands."""
    trusted, _, _ = dirs
    rule = RuleOfCommands.of(r"touch [\w./-]+( [\w./-]+)*", [trusted])
    assert rule.allows(_ask({"command": ["touch", "a", "b"], "cwd": trusted}))
    assert not rule.allows(_ask({"command": ["touch", "a b"], "cwd": trusted}))
    assert not rule.allows(_ask({"command": ["touch", "a;rm", "-rf", "x"], "cwd": trusted}))
    assert confirmed_command(_ask({"command": ["rm", "a b"], "cwd": trusted})) == (
        "rm 'a b'",
        trusted,
    )


def test_allow_commands_defaults_to_the_working_directory(dirs: tuple[str, str, Path]) -> None:
    """Issue 29 finding 4: ``allow_commands`` with no ``cwd`` covers this process's
    working directory only (where a daemon it started runs commands that name none);
    ``cwd=`` names others, and the denial says which."""
    trusted, hostile, _ = dirs
    here = os.path.realpath(os.getcwd())
    default = allow_commands(r"make")
    assert default(_ask({"command": "make", "cwd": here})).approve  # type: ignore[union-attr]
    refused = default(_ask({"command": "make", "cwd": hostile}))
    assert not refused.approve  # type: ignore[union-attr]
    assert here in refused.reason  # type: ignore[union-attr]
    chosen = allow_commands(r"make", cwd=[trusted])
    assert chosen(_ask({"command": "make", "cwd": trusted})).approve  # type: ignore[union-attr]
    assert not chosen(_ask({"command": "make", "cwd": here})).approve  # type: ignore[union-attr]
