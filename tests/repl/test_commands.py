"""Slash-command parsing and the choice → frame mappings (SPEC §11, R40, R41, R44, R47).

Pure functions: no terminal, no loop.
"""

from __future__ import annotations

import re

import pytest

from agentrio.protocol.causes import Cause
from agentrio.protocol.frames import BackgroundCancel, Cancel, Reply
from agentrio.repl.commands import (
    COMMANDS,
    CancelChoice,
    ConfirmChoice,
    DropPending,
    Empty,
    Help,
    History,
    Input,
    Legs,
    ListPendingCmd,
    ModelCmd,
    NewSession,
    Quit,
    ResumePending,
    SessionInfo,
    Unknown,
    background_cancel_frame,
    cancel_frame,
    complete_command,
    confirm_reply,
    help_text,
    new_request_id,
    new_session_id,
    new_window_hash,
    parse_line,
    question_reply,
)


@pytest.mark.parametrize(
    ("line", "command"),
    [
        ("", Empty()),
        ("   ", Empty()),
        ("run: echo hello", Input("run: echo hello")),
        ("  ask: which? | a, b  ", Input("ask: which? | a, b")),
        ("//etc is a folder", Input("/etc is a folder")),
        ("/pending", ListPendingCmd()),
        ("/pending 2", ResumePending("2")),
        ("/pending 3f2a9c", ResumePending("3f2a9c")),
        ("/pending drop 1", DropPending("1")),
        ("/legs", Legs()),
        ("/history", History("")),
        ("/history deploy", History("deploy")),
        ("/history two words", History("two words")),
        ("/session", SessionInfo()),
        ("/new", NewSession()),
        ("/help", Help()),
        ("/quit", Quit()),
        ("/exit", Quit()),
        ("/model", ModelCmd("")),
        ("/model fast", ModelCmd("fast")),
    ],
)
def test_parse_line(line: str, command: object) -> None:
    """SPEC §11: each command of the REPL parses to its command value; other text is input."""
    assert parse_line(line) == command


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("/pending drop", "usage: /pending drop N"),
        ("/pending drop 1 2", "usage: /pending drop N"),
        ("/pending 1 2", "usage: /pending [N | drop N]"),
        ("/legs now", "usage: /legs (takes no arguments)"),
        ("/quit please", "usage: /quit (takes no arguments)"),
        ("/model a b", "usage: /model [NAME]"),
        ("/frobnicate", "unknown command /frobnicate (type /help; start with // to send a slash)"),
    ],
)
def test_parse_line_misuse_is_unknown_with_usage(line: str, message: str) -> None:
    """SPEC §11: a wrong command use is reported with its usage, never sent as input."""
    assert parse_line(line) == Unknown(message)


def test_complete_command() -> None:
    """SPEC §11: the / picker offers the commands matching the first word, with help."""
    assert [name for name, _ in complete_command("/")] == [name for name, _ in COMMANDS]
    assert complete_command("/p") == [COMMANDS[0]]
    assert [name for name, _ in complete_command("/h")] == ["/history", "/help"]
    assert complete_command("/pending ") == []
    assert complete_command("hello") == []
    assert complete_command("//x") == []
    assert complete_command("/zzz") == []


def test_help_lists_every_command() -> None:
    """SPEC §11: /help names every command and the Esc/Ctrl+C keys (R47)."""
    text = help_text()
    for name, _ in COMMANDS:
        assert f"  {name}" in text
    assert "Esc" in text
    assert "Ctrl+C" in text


def test_help_lists_the_builtin_models_verbs() -> None:
    """R61, issue 19: /help has a section on the built-in model's verbs when the model is
    the built-in one, and it names every verb the model's own help reply names."""
    from agentrio.engine.models.builtin import HELP_TEXT
    from agentrio.repl.commands import BUILTIN_VERBS, verbs_text
    from tests.repl.helpers import connected_state

    text = verbs_text()
    assert "Built-in model verbs" in text
    engine_verbs = re.findall(r"^- (\w+):", HELP_TEXT, re.MULTILINE)
    assert sorted(verb.split(":")[0] for verb, _ in BUILTIN_VERBS) == sorted(engine_verbs)
    for verb, _ in BUILTIN_VERBS:
        assert f"  {verb}" in text
    state, _ = connected_state()  # model "builtin"
    state.submit("/help")
    shown = "\n".join(str(line) for _, line in state.output)
    assert "Built-in model verbs" in shown
    assert "  ask: Q options: a, b" in shown
    state.model = "openai:gpt-4o"
    state.output.clear()
    state.submit("/help")
    assert not any("Built-in model verbs" in str(line) for _, line in state.output)


def test_ids() -> None:
    """SPEC §0: REPL session ids have origin cli- plus 8 hex; window hashes are random."""
    assert re.fullmatch(r"cli-[0-9a-f]{8}", new_session_id())
    assert new_session_id() != new_session_id()
    assert re.fullmatch(r"w[0-9a-f]{16}", new_window_hash())
    assert new_window_hash() != new_window_hash()
    assert new_request_id() != new_request_id()


@pytest.mark.parametrize(
    ("choice", "reply"),
    [
        (ConfirmChoice.APPROVE, Reply(id="a1", approve=True)),
        (ConfirmChoice.DENY, Reply(id="a1", approve=False, reason="not today")),
        (ConfirmChoice.ALWAYS, Reply(id="a1", approve=True, remember=True)),
        (ConfirmChoice.TURN, Reply(id="a1", approve=True, allow_turn=True)),
        (ConfirmChoice.CANCEL_TASK, Reply(id="a1", stop=Cause.USER_CANCELED)),
        (ConfirmChoice.ABORT_TASK, Reply(id="a1", stop=Cause.USER_ABORTED)),
    ],
)
def test_confirm_reply(choice: ConfirmChoice, reply: Reply) -> None:
    """SPEC §11, R40, R41: each confirmation choice maps to its exact reply frame."""
    reason = "not today" if choice is ConfirmChoice.DENY else ""
    assert confirm_reply("a1", choice, reason=reason) == reply


def test_confirm_reply_password_only_with_approval() -> None:
    """R7, R73: the password rides with approving choices only."""
    assert confirm_reply("a1", ConfirmChoice.APPROVE, password="pw") == Reply(
        id="a1", approve=True, password="pw"
    )
    assert confirm_reply("a1", ConfirmChoice.TURN, password="pw").password == "pw"
    assert confirm_reply("a1", ConfirmChoice.ALWAYS, password="pw").password == "pw"
    for choice in (ConfirmChoice.DENY, ConfirmChoice.CANCEL_TASK, ConfirmChoice.ABORT_TASK):
        assert confirm_reply("a1", choice, password="pw").password is None


def test_question_reply() -> None:
    """R10: answers go back one string per question, in order."""
    assert question_reply("q", ["main", "a, b"]) == Reply(id="q", answers=["main", "a, b"])


def test_cancel_frame() -> None:
    """R40, R41, R47: popup No sends nothing, Pause pauses, Yes cancels."""
    assert cancel_frame("t" * 32, CancelChoice.NO) is None
    assert cancel_frame("t" * 32, CancelChoice.PAUSE) == Cancel(
        task_hash="t" * 32, cause=Cause.PAUSED
    )
    assert cancel_frame("t" * 32, CancelChoice.YES) == Cancel(
        task_hash="t" * 32, cause=Cause.USER_CANCELED
    )


def test_background_cancel_frame() -> None:
    """R44: a leg or all legs of the session."""
    assert background_cancel_frame("cli-1", "cmd_1a2b3c4d") == BackgroundCancel(
        session_id="cli-1", leg_id="cmd_1a2b3c4d"
    )
    assert background_cancel_frame("cli-1", "all").leg_id == "all"


def test_a_file_change_offers_four_fixed_choices_and_its_edits_rule() -> None:
    """Issue 32 s2: a file change's dialog has no "Always allow this exact command" and
    no "Allow this turn"; its edits rule follows the four others, and choosing it sends
    ``rule`` ``edits``."""
    from agentrio.protocol.events import FileChange, ToolDetails
    from agentrio.protocol.frames import Ask
    from agentrio.protocol.rules import RuleOffer
    from agentrio.repl.commands import ConfirmChoice, confirm_choices, confirm_reply

    change = FileChange(path="/w/a", diff="@@ -1 +1 @@\n-a\n+b\n", added=1, removed=1)
    ask = Ask(
        id="q",
        kind="tool_confirm",
        session_id="cli-x",
        task_hash="t",
        tool_name="edit_file",
        tool_args={"path": "/w/a"},
        offers=[RuleOffer(kind="edits", covers="edits of files under /w (write_file, edit_file)")],
        details=ToolDetails(change=change),
    )
    choices = confirm_choices(ask)
    assert [label for _, label, _ in choices] == [
        "Approve",
        "Deny with reason",
        "Stop and discard",
        "Stop, keep to resume",
        "Always allow edits of files under /w (write_file, edit_file)",
    ]
    choice, _, rule = choices[-1]
    assert choice is ConfirmChoice.RULE
    assert confirm_reply("q", choice, rule=rule) == Reply(id="q", approve=True, rule="edits")
