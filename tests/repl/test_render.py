"""The transcript's one-line tool calls show what ran faithfully (R77)."""

from __future__ import annotations

from repl.render import LINE_WIDTH, format_args


def test_a_two_line_command_never_reads_as_one() -> None:
    """R77: newlines, bidi and control characters in a tool call show as escapes."""
    assert format_args({"command": "echo safe\ntouch x"}) == "echo safe\\ntouch x"
    assert format_args({"command": "echo \u202egnp.exe\x1b[2J"}) == "echo \\u202egnp.exe\\x1b[2J"


def test_a_long_call_says_how_much_was_left_out() -> None:
    """R77: a cut is never silent: the count of characters left out is shown."""
    shown = format_args({"command": "ls " + "a" * 1000})
    assert len(shown) <= LINE_WIDTH + 16
    assert shown.endswith("… (+819 characters)")
