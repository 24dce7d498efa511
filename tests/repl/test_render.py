"""The transcript's one-line tool calls show what ran faithfully (R77)."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from agentrio.protocol.events import (
    Compacted,
    LegFinished,
    LegReport,
    Retrying,
    SubagentEnd,
    SubagentLegEnd,
    ToolDetails,
    ToolResult,
)
from agentrio.repl.markdown import CODE, CODE_BLOCK
from agentrio.repl.render import (
    LINE_WIDTH,
    call_lines,
    format_args,
    line_fragments,
    line_text,
    render_event,
)


def test_a_two_line_command_never_reads_as_one() -> None:
    """R77: newlines, bidi and control characters in a tool call show as escapes."""
    assert format_args({"command": "echo safe\ntouch x"}) == "echo safe\\ntouch x"
    assert format_args({"command": "echo \u202egnp.exe\x1b[2J"}) == "echo \\u202egnp.exe\\x1b[2J"


#: A file that, printed raw, repaints "3 failed" into "passed, 0 failed": carriage
#: return, backspaces, an ANSI erase-line and a bidi override.
REPAINTING = (
    "ran 9 tests: 3 failed\r\x1b[2Kran 9 tests: passed\x08\x08\x08\x08\x08\x08, 0 failed\u202e"
)


@pytest.mark.parametrize(
    "event",
    [
        ToolResult(seq=1, at=0.0, call_id="c", tool_name="run_command", ok=True, output=REPAINTING),
        LegReport(seq=1, at=0.0, job_id="j", leg_id="cmd_0000000a", text=REPAINTING),
        LegFinished(
            seq=1, at=0.0, job_id="j", leg_id="cmd_0000000a", status="finished", result=REPAINTING
        ),
    ],
)
def test_command_output_is_escaped_like_commands(event: Any) -> None:
    """Issue 29 finding 10: command output (a result, a report, a finished leg) prints
    its control, invisible and bidi characters as escapes in their own style, never
    raw: the line reads exactly what the file holds, and no fragment carries a
    character a terminal would act on."""
    lines = render_event(event)
    (line,) = [line for line in lines if "ran 9 tests" in line_text(line)]
    assert line_text(line).strip() == (
        "ran 9 tests: 3 failed\\r\\x1b[2Kran 9 tests: passed"
        "\\x08\\x08\\x08\\x08\\x08\\x08, 0 failed\\u202e"
    )
    fragments = line_fragments([line])
    assert not [text for _, text in fragments if any(c in text for c in "\r\x1b\x08\u202e")]
    escapes = [text for style, text in fragments if "escape" in style]
    assert escapes == ["\\r", "\\x1b", *["\\x08"] * 6, "\\u202e"]


def test_output_keeps_its_columns_and_plain_lines() -> None:
    """Issue 29 finding 10: escaping output changes nothing else: a plain line stays
    one plain styled line, tabs and runs of spaces keep a table's columns."""
    output = "name        size\nlog.txt\t12"
    event = ToolResult(seq=1, at=0.0, call_id="c", tool_name="run_command", ok=True, output=output)
    assert render_event(event)[1:] == [
        ("class:result", "    name        size"),
        ("class:result", "    log.txt    12"),
    ]


def test_a_long_call_says_how_much_was_left_out() -> None:
    """R77: a cut is never silent: the count of characters left out is shown."""
    shown = format_args({"command": "ls " + "a" * 1000})
    assert len(shown) <= LINE_WIDTH + 16
    assert shown.endswith("… (+819 characters)")


def _call(name: str, args: dict[str, Any]) -> list[str]:
    return [line_text(line) for line in call_lines(name, args)]


def test_known_tool_calls_read_as_words() -> None:
    """Issue 19: the calls a model makes most read as what they do, not as JSON: a
    question with its options, one background command or objective per line (the
    model's ``objective``/``next`` notes left out), a secret's key, a history search."""
    question = {"text": "Which branch?", "options": ["main", "release"]}
    assert _call("ask_user", {"questions": [question]}) == [
        "⚙ ask_user: Which branch? (main / release)"
    ]
    args = {"commands": ["sleep 3 && echo built", "ls"], "objective": "o", "next": "n"}
    assert _call("background_command", args) == [
        "⚙ background_command:",
        "    sleep 3 && echo built",
        "    ls",
    ]
    assert _call("background_subagents", {"objectives": ["run: ls"], "objective": "x"}) == [
        "⚙ background_subagents: run: ls"
    ]
    assert _call("subagents", {"objectives": ["a", "b"]}) == ["⚙ subagents:", "    a", "    b"]
    assert _call("store_secret", {"key": "DEPLOY_TOKEN"}) == ["⚙ store_secret: DEPLOY_TOKEN"]
    assert _call("chat_history", {"mode": "search", "keyword": "echo"}) == [
        '⚙ chat_history: search "echo"'
    ]
    assert _call("chat_history", {"mode": "list"}) == ["⚙ chat_history: list"]


def test_readable_calls_stay_faithful() -> None:
    """Issue 19, R77: a readable call escapes what could mislead like the JSON did,
    keeps every argument it does not word as JSON, and an unknown tool or a call of
    unexpected shape stays JSON."""
    assert _call("background_command", {"commands": ["echo a\ntouch x"], "cwd": "/srv"}) == [
        '⚙ background_command: echo a\\ntouch x {"cwd": "/srv"}'
    ]
    assert _call("ask_user", {"questions": [{"text": "Ok?\u202e", "multi": True}]}) == [
        "⚙ ask_user: Ok?\\u202e (several answers)"
    ]
    assert _call("ask_user", {"questions": [{"text": "Ok?", "secret": True}]}) == [
        '⚙ ask_user: {"questions": [{"text": "Ok?", "secret": true}]}'
    ]
    assert _call("mystery", {"a": 1}) == ['⚙ mystery: {"a": 1}']
    assert _call("store_secret", {"key": 5}) == ['⚙ store_secret: {"key": 5}']


def test_a_subagents_result_folds_to_a_line_per_sub_agent() -> None:
    """Issue 19, issue 32: a ``subagents`` result shows as one line per sub-agent and
    how it ended, read from its typed details (not the prose the model reads); the
    model's reply quotes the answers."""
    output = (
        "[Sub-agent results]\n\n## sub-agent 1/2: run: ls\nstatus: finished\ncalls:\n"
        "- run_command {} → exit 0\nfinal answer:\nok\n\n## sub-agent 2/2: b\n"
        "status: failed\ncalls:\nfinal answer:\nno"
    )
    ended = [
        SubagentEnd(label="sub-agent 1/2: run: ls", status="finished", final="ok"),
        SubagentEnd(label="sub-agent 2/2: b", status="failed", final="no"),
    ]
    result = ToolResult(
        seq=1,
        at=0.0,
        call_id="c",
        tool_name="subagents",
        ok=True,
        output=output,
        details=ToolDetails(subagents=ended),
    )
    assert [line_text(line) for line in render_event(result)] == [
        "  ✓ subagents",
        "    sub-agent 1/2: run: ls — finished",
        "    sub-agent 2/2: b — failed",
    ]


def test_a_sub_agent_leg_report_is_rendered_for_the_person(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 19: a background sub-agent's result shows its report's path with ``~`` for
    the home directory, not the status its header already says, and its answer's
    Markdown rendered like model text (no backticks, code styled)."""
    monkeypatch.setenv("HOME", "/home/ann")
    result = (
        "report saved to /home/ann/.agentrio/sessions/cli-1/reports/sub_0000000a.md\n"
        "sub-agent finished\nfinal answer:\n`ls` finished:\n```\nnotes.txt\n```"
    )
    ending = SubagentLegEnd(
        report="/home/ann/.agentrio/sessions/cli-1/reports/sub_0000000a.md",
        answer="`ls` finished:\n```\nnotes.txt\n```",
    )
    finished = LegFinished(
        seq=1,
        at=0.0,
        job_id="job_1",
        leg_id="sub_0000000a",
        status="finished",
        result=result,
        subagent=ending,
    )
    lines = render_event(finished)
    assert [line_text(line) for line in lines] == [
        "⧗ background sub_0000000a finished",
        "  report: ~/.agentrio/sessions/cli-1/reports/sub_0000000a.md",
        "  final answer:",
        "    ls finished:",
        "    ───",
        "    notes.txt",
        "    ───",
    ]
    assert any(CODE in style for style, _ in line_fragments(lines[3:4]))
    assert any(CODE_BLOCK in style for style, _ in line_fragments(lines[5:6]))


def test_a_retry_reads_as_its_reason_and_wait() -> None:
    """Issue 31 (6): a ``retrying`` event is one warning line, the wait rounded up to
    the second ("rate limited, retrying in 4 s"); a fallback (no wait) is its reason,
    and a hostile reason cannot repaint the line."""
    assert render_event(Retrying(seq=1, at=0, reason="rate limited", attempt=1, delay_s=3.2)) == [
        ("class:warn", "↻ rate limited, retrying in 4 s")
    ]
    assert render_event(Retrying(seq=1, at=0, reason="timed out", attempt=2, delay_s=0.4)) == [
        ("class:warn", "↻ timed out, retrying in <1 s")
    ]
    fallback = Retrying(seq=1, at=0, reason="gpt-5 failed, trying claude", attempt=1, delay_s=0)
    assert render_event(fallback) == [("class:warn", "↻ gpt-5 failed, trying claude")]
    (hostile,) = render_event(Retrying(seq=1, at=0, reason="x\r\x1b[2K", attempt=1, delay_s=1))
    assert line_text(hostile) == "↻ x\\r\\x1b[2K, retrying in 1 s"


def test_a_subagents_retry_and_compaction_name_the_subagent() -> None:
    """Issue 31 (4, 6), R80: an in-process sub-agent's ``retrying`` and ``compacted``
    events name it first; a hostile objective in its label cannot repaint the line."""
    label = "sub-agent 1/2: look it up"
    retry = Retrying(seq=1, at=0, reason="rate limited", attempt=1, delay_s=4, subagent=label)
    assert render_event(retry) == [
        ("class:warn", "↻ [sub-agent 1/2: look it up] rate limited, retrying in 4 s")
    ]
    compacted = Compacted(seq=1, at=0, summarised=0, elided=2, reason="context_length")
    assert render_event(attrs.evolve(compacted, subagent=label)) == [
        (
            "class:dim",
            "⟲ [sub-agent 1/2: look it up] conversation compacted: 2 older tool results left out",
        )
    ]
    hostile = attrs.evolve(retry, subagent="sub-agent 1/1: x\r\x1b[2K")
    (line,) = render_event(hostile)
    assert line_text(line) == "↻ [sub-agent 1/1: x\\r\\x1b[2K] rate limited, retrying in 4 s"
