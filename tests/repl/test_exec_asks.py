"""Issue 31 item 8: how ``agentrio exec`` answers asks with nobody there (the rule of
``--allow REGEX``: the whole command, fully matched, in the real directory exec runs
in), what another front-end answered for it (R99), and the exit status of each
ending. The runs themselves, through the real daemon, are tests/e2e/test_exec.py."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from agentrio.handles import Decision
from agentrio.protocol.events import AskState, Confirm, Question
from agentrio.protocol.frames import Ask, DoneFrame, DoneStatus
from agentrio.repl.exec_asks import NO_PASSWORD, NO_QUESTIONS, NO_SECRETS, NOT_ALLOWED, ExecAsks
from agentrio.repl.exec_run import exit_code


def _confirm(command: Any, cwd: str, *, tool: str = "run_command", **fields: Any) -> Ask:
    return Ask(
        id="a" * 32,
        kind="tool_confirm",
        session_id="cli-t",
        task_hash="t" * 32,
        tool_name=tool,
        tool_args={"command": command, "cwd": cwd},
        **fields,
    )


@pytest.fixture
def here(tmp_path: Path) -> str:
    place = tmp_path / "project"
    place.mkdir()
    return os.path.realpath(place)


def test_allow_approves_exactly_the_whole_command_in_this_directory(here: str) -> None:
    """Item 8: ``--allow`` fully matches the command text that will run, in exec's
    real directory; a prefix, an appended ``; rm`` or ``&& rm``, another directory
    or another tool is denied with the reason the model reads."""
    asks = ExecAsks.of([r"touch [a-z]+\.txt"], here)
    allowed = asks.decide(_confirm("touch a.txt", here))
    assert allowed == Decision.allow()
    denied = Decision.deny(NOT_ALLOWED, denied_by="policy")
    assert asks.decide(_confirm("touch a.txt; rm -rf /", here)) == denied
    assert asks.decide(_confirm("touch a.txt && rm b", here)) == denied
    assert asks.decide(_confirm("touch a.txt\nrm b", here)) == denied
    assert asks.decide(_confirm("xtouch a.txt", here)) == denied
    assert asks.decide(_confirm("touch a.txt", "/tmp")) == denied
    assert asks.decide(_confirm("touch a.txt", here, tool="mcp_fs_write")) == denied
    assert asks.refused == 6
    assert [j.approved for j in asks.judged] == [True, *[False] * 6]
    assert asks.judged[0].note == f"allowed by --allow: touch a.txt (in {here})"
    assert asks.judged[1].note == (
        f"denied (no --allow rule covers it): touch a.txt; rm -rf / (in {here})"
    )


def test_an_argv_is_judged_as_the_shell_would_read_it(here: str) -> None:
    """An argv is matched as ``shlex.join`` of it, so ``["rm", "a b"]`` is never taken
    for ``rm a b``."""
    asks = ExecAsks.of(["rm a b"], here)
    assert asks.decide(_confirm(["rm", "a b"], here)).approve is False
    assert asks.decide(_confirm(["rm", "a", "b"], here)).approve is True


def test_the_directory_is_compared_as_a_real_path(here: str, tmp_path: Path) -> None:
    """exec's directory is taken by its real path: started through a symlink, the
    rule holds for the directory the link points to, and for nothing else."""
    link = tmp_path / "link"
    link.symlink_to(here)
    asks = ExecAsks.of(["make"], str(link))
    assert asks.decide(_confirm("make", here)).approve is True
    assert asks.decide(_confirm("make", str(link))).approve is False


def test_restricted_commands_questions_and_secrets_are_refused(here: str) -> None:
    """R7: a restricted-path command is denied whatever --allow says (no one to type
    the password); a question and a secret are declined, each with its reason."""
    asks = ExecAsks.of([".*"], here)
    restricted = _confirm("rm /etc/x", here, restricted=True, need_password=True)
    assert asks.decide(restricted) == Decision.deny(NO_PASSWORD, denied_by="policy")
    question = Ask(
        id="b" * 32,
        kind="ask_user",
        session_id="cli-t",
        task_hash="t" * 32,
        questions=[Question(text="which colour?")],
    )
    assert asks.decide(question) == Decision.deny(NO_QUESTIONS, denied_by="policy")
    secret = Ask(
        id="c" * 32,
        kind="secret",
        session_id="cli-t",
        task_hash="t" * 32,
        tool_name="store_secret",
        tool_args={"key": "API_KEY"},
        questions=[Question(text="Value", secret=True)],
    )
    assert asks.decide(secret) == Decision.deny(NO_SECRETS, denied_by="policy")
    assert [j.note for j in asks.judged] == [
        f"denied (restricted path): rm /etc/x (in {here})",
        "declined a question: which colour?",
        "declined a secret ask: API_KEY",
    ]


@pytest.mark.parametrize(
    ("status", "refused", "signum", "code"),
    [
        ("finished", 0, None, 0),
        ("finished", 1, None, 3),
        ("parked", 0, None, 3),
        ("failed", 0, None, 1),
        ("failed", 0, 2, 1),
        ("canceled", 0, 2, 130),
        ("canceled", 0, 15, 143),
        ("canceled", 0, None, 1),
        ("paused", 0, None, 1),
        ("finished", 0, 2, 0),
        ("finished", 0, 13, 141),
        ("canceled", 0, 13, 141),
    ],
)
def test_exit_codes(status: DoneStatus, refused: int, signum: int | None, code: int) -> None:
    """Item 8: the documented exit status of each ending (README, docs/frontends.md,
    ``agentrio exec --help``): a task stopped by something else than this exec's
    signal (a daemon shutdown pauses it) is a failure to the script."""
    done = DoneFrame(request_id="r1", task_hash="t" * 32, status=status)
    assert exit_code(done, refused=refused, signum=signum) == code


def test_what_another_front_end_answered_is_noted_once_and_counted(here: str) -> None:
    """R99: exec's task's ask shown on the REPL (shown, then acknowledged: one note)
    and denied there counts as refused, as exec's own denial would; an approval
    there refuses nothing; what exec itself showed and answered is not repeated."""
    asks = ExecAsks.of([], here)
    seen = [
        Confirm(seq=1, at=0, confirm_hash="c1", tool_name="run_command", args={"command": "ls"}),
        Confirm(
            seq=2,
            at=0,
            confirm_hash="c2",
            tool_name="run_command",
            args={"command": "rm x", "cwd": here},
        ),
    ]
    assert [asks.heard(event) for event in seen] == [None, None]
    states = [
        AskState(seq=3, at=0, ask_id="c1", state="shown", frontend="repl"),
        AskState(
            seq=4,
            at=0,
            ask_id="c1",
            state="shown",
            frontend="repl",
            acknowledged=True,
        ),
        AskState(
            seq=5,
            at=0,
            ask_id="c1",
            state="answered",
            frontend="repl",
            answer="approved",
        ),
        AskState(seq=6, at=0, ask_id="c2", state="shown", frontend="exec"),
        AskState(seq=7, at=0, ask_id="c2", state="answered", frontend="http", answer="denied"),
    ]
    assert [asks.heard(event) for event in states] == [
        "asked on repl, waiting for its answer: run_command",
        None,
        "approved on repl: run_command",
        None,
        f"denied on http: rm x (in {here})",
    ]
    assert asks.refused == 1
