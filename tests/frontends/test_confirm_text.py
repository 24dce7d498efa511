"""A chat confirmation shows every argument, faithfully (issue 29 finding 5): the one
renderer every Python front-end shares (`agentrio.protocol.faithful`), drawn in a chat's code
block; too long for a chat, it says how much is left out and is refused there."""

from __future__ import annotations

from typing import Any

import attrs

from agentrio.frontends.asks import (
    HEAD_LINES,
    MAX_CONFIRM_CHARS,
    command_text,
    command_too_long,
    confirm_buttons,
    confirm_parts,
    decision_of,
)
from agentrio.frontends.markup import DISCORD_MARKDOWN, TELEGRAM_HTML, paginate
from agentrio.handles import Decision
from agentrio.protocol.events import FileChange, ToolDetails
from agentrio.protocol.frames import Ask
from agentrio.protocol.rules import RuleOffer


def _ask(args: dict[str, Any]) -> Ask:
    return Ask(
        id="a", kind="tool_confirm", session_id="tg-1", task_hash="t", tool_name="run_command",
        tool_args=args,
    )  # fmt: skip


HOSTILE = {
    "command": "sh build.sh\u202e hs.dliub",
    "cwd": "/home/ada/src/hostile-checkout",
    "timeout_s": 600,
}


def test_telegram_and_discord_show_cwd_timeout_and_escapes() -> None:
    """Issue 29 finding 5: the confirmation a Telegram or Discord user approves names
    the real cwd and the timeout, and a bidi override shows as its escape -- the
    command cannot read backwards or hide where it runs."""
    shown = command_text(_ask(HOSTILE))
    assert shown == (
        "command: sh build.sh⟨\\u202e⟩ hs.dliub\n"
        "cwd: /home/ada/src/hostile-checkout\n"
        "timeout_s: 600"
    )
    for dialect in (TELEGRAM_HTML, DISCORD_MARKDOWN):
        [page] = paginate(confirm_parts(_ask(HOSTILE)), dialect)
        assert "\u202e" not in page
        assert "hostile-checkout" in page
        assert "timeout_s: 600" in page


def test_a_confirmation_too_long_for_a_chat_says_how_much_is_left_out() -> None:
    """Issue 29 finding 5: past `MAX_CONFIRM_CHARS` the chat shows the first lines and
    says exactly how many lines and characters are not shown; such an ask is refused
    in the chat (`command_too_long` names where to read it whole)."""
    command = "\n".join(f"echo line {n:05d}" for n in range(2000))
    ask = _ask({"command": command, "cwd": "/srv"})
    text = command_text(ask)
    assert len(text) > MAX_CONFIRM_CHARS
    assert "REPL" in command_too_long(text)
    parts = confirm_parts(ask)
    head, tail = parts[-2].text, parts[-1].text
    assert head.split("\n") == text.split("\n")[:HEAD_LINES]
    assert tail == (
        f"\n… {len(text.split(chr(10))) - HEAD_LINES:,} more lines and "
        f"{len(text) - len(head):,} more characters not shown here"
    )
    assert not command_too_long(command_text(_ask({"command": "ls", "cwd": "/"})))


def test_an_offered_rule_is_shown_whole_and_only_its_own_press_chooses_it() -> None:
    """R92: an offered rule is written out in a code block, a hostile directory name
    escaped (never read as markup); its button comes after the fixed ones; a press of
    ``p0`` chooses it, any other ``p…`` (forged data) chooses nothing."""
    offer = RuleOffer(kind="command_prefix", covers="`npm test …` in /srv/`x`\u202e")
    ask = attrs.evolve(_ask(HOSTILE), offers=[offer])
    [page] = paginate(confirm_parts(ask), TELEGRAM_HTML)
    assert page.endswith("Rule 1 offered:<pre>Always allow `npm test …` in /srv/`x`⟨\\u202e⟩</pre>")
    assert [b.data for row in confirm_buttons("7", ask) for b in row][-1] == "7|p0"
    assert decision_of("p0", ask) == Decision.allow(rule="command_prefix")
    for forged in ("p1", "p", "px", "p-1", "p00x"):
        assert decision_of(forged, ask) is None


def test_a_file_change_shows_its_diff_and_offers_only_its_edits_rule() -> None:
    """Issue 32 s2: a file change's confirmation shows the real path, then the diff one
    line per row with each line's marker before its ``│`` (a ``\\r`` and a bidi control
    escaped), then the directory; its buttons have no "this exact command" choice, and
    a forged ``r`` press gives nothing."""
    change = FileChange(
        path="/w/app.py",
        diff="@@ -1,2 +1,2 @@\n a\n-b\r\n+b\u202e2\r\n",
        added=1,
        removed=1,
        rule_dir="/w",
    )
    offer = RuleOffer(kind="edits", covers="edits of files under /w (write_file, edit_file)")
    ask = attrs.evolve(
        _ask({"path": "/w/app.py"}),
        tool_name="edit_file",
        details=ToolDetails(change=change),
        offers=[offer],
    )
    assert command_text(ask).split("\n") == [
        "  │ path: /w/app.py",
        "  │ diff (+1 -1 lines):",
        "@@│ -1,2 +1,2 @@",
        "  │ a",
        " -│ b⟨\\r⟩",
        " +│ b⟨\\u202e⟩2⟨\\r⟩",
        "  │ this directory: /w",
    ]
    data = [b.data for row in confirm_buttons("7", ask) for b in row]
    assert data == ["7|a", "7|d", "7|k", "7|x", "7|p0"]
    assert decision_of("r", ask) is None
    assert decision_of("p0", ask) == Decision.allow(rule="edits")
