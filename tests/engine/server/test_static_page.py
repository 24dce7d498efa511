"""The web page's script read as text (no browser): the words it shows are the REPL's
(protocol/wording.py), its Markdown parser is pure and safe, and it never writes markup.

engine/server/static/app.js is served as is, with no build step that could share
protocol/wording.py, so the page spells the same strings; these tests hold the two
equal. The pure sections (``// ---- wording``, ``// ---- markdown``) run under node when
it is installed. The page itself is driven in Chromium by tests/e2e/test_web.py.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from agentrio.protocol import wording

APP_JS = Path(__file__).resolve().parents[3] / "engine" / "server" / "static" / "app.js"
INDEX_HTML = APP_JS.with_name("index.html")
NODE = shutil.which("node")

#: Every label of protocol/wording.py.
LABELS = [
    wording.APPROVE,
    wording.DENY,
    wording.ALWAYS_ALLOW,
    wording.ALLOW_TURN,
    wording.STOP_DISCARD,
    wording.STOP_KEEP,
    wording.ESC_KEEP_RUNNING,
    wording.ALWAYS_ALLOW_RULE,
    wording.RESTRICTED_ELSEWHERE,
]


def section(name: str) -> str:
    text = APP_JS.read_text()
    match = re.search(rf"// ---- {name}: begin.*?// ---- {name}: end[^\n]*\n", text, re.S)
    assert match is not None, f"app.js lost its {name} section markers"
    return match.group(0)


def run_node(script: str, cases: Any) -> Any:
    assert NODE is not None
    done = subprocess.run(
        [NODE, "-e", script],
        input=json.dumps(cases),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(done.stdout)


def test_every_wording_label_is_spelled_in_app_js() -> None:
    """R40, R41: each label of agentrio.protocol.wording appears in app.js as a string literal,
    so the page and the REPL cannot drift apart; the old, backwards names are gone."""
    source = APP_JS.read_text()
    words = section("wording")
    for label in LABELS:
        assert json.dumps(label, ensure_ascii=False) in words, label
    for old in ('"Cancel task"', '"Abort task"', '"Deny"', '"Pause"', '"Cancel"'):
        assert old not in source, old


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_js_wording_is_the_python_wording() -> None:
    """R40, R41: ``confirmTitle`` and ``endedLine`` of app.js, run under node, give
    exactly ``confirm_title`` and ``ended_line`` for every status the engine sends;
    ``agentsMdLine`` is ``agents_md_line`` (R87, issue 31 item 2)."""
    statuses = [
        "user_canceled", "canceled", "paused", "aborted", "user_aborted", "disconnected",
        "parked", "failed", "failed_kept", "shutdown", "superseded", "something new",
    ]  # fmt: skip
    cases = [[status, reason] for status in statuses for reason in ("", "timed out")]
    script = (
        section("wording")
        + "\nconst cases = JSON.parse(require('fs').readFileSync(0, 'utf8'));\n"
        + "process.stdout.write(JSON.stringify({\n"
        + "  ended: cases.map(([s, r]) => endedLine(s, r)),\n"
        + "  titles: [confirmTitle('run_command'), confirmTitle('write_file', true)],\n"
        + "  agents: agentsMdLine(['/r/AGENTS.md', '/r/a b/AGENTS.md']),\n"
        + "  labels: [APPROVE, DENY, ALWAYS_ALLOW, ALLOW_TURN, STOP_DISCARD, STOP_KEEP,"
        + " ESC_KEEP_RUNNING, ALWAYS_ALLOW_RULE, RESTRICTED_ELSEWHERE],\n"
        + "  offer: offerLabel('`npm test …` in /srv/a (any further arguments)'),\n"
        + "}));\n"
    )
    got = run_node(script, cases)
    assert got["ended"] == [wording.ended_line(s, reason=r) for s, r in cases]
    assert got["titles"] == [
        wording.confirm_title("run_command"),
        wording.confirm_title("write_file", restricted=True),
    ]
    assert got["labels"] == LABELS
    covers = "`npm test …` in /srv/a (any further arguments)"
    assert got["offer"] == wording.offer_label(covers)
    assert got["agents"] == wording.agents_md_line(["/r/AGENTS.md", "/r/a b/AGENTS.md"])


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_js_retry_and_usage_lines_are_the_python_ones() -> None:
    """Issue 31 (6, 7): ``retryingLine`` and ``usageLine`` of app.js, run under node,
    give exactly ``retrying_line`` and ``usage_line``: the page and the REPL say "rate
    limited, retrying in 4 s" (an in-process sub-agent's named first, and its
    ``compacted`` line too) and a task's tokens in the same words."""
    delays = [0, 0.25, 0.999, 1, 3.2, 4, 29.5, 30]
    usages = [[120, 0, 7, 0], [1830, 1024, 96, 0.0031], [5, 0, 0, 12.5]]
    script = (
        section("wording")
        + "\nconst [delays, usages] = JSON.parse(require('fs').readFileSync(0, 'utf8'));\n"
        + "process.stdout.write(JSON.stringify({\n"
        + "  retrying: delays.map((d) => retryingLine('rate limited', d)),\n"
        + "  sub: delays.map((d) => retryingLine('rate limited', d, 'sub-agent 1/2: x')),\n"
        + "  compacted: [compactedLine(2, 1), compactedLine(0, 3, 'sub-agent 2/2: y')],\n"
        + "  usage: usages.map(([i, c, o, d]) => usageLine({input_tokens: i,"
        + " cached_input_tokens: c, output_tokens: o, cost_usd: d})),\n"
        + "}));\n"
    )
    got = run_node(script, [delays, usages])
    assert got["retrying"] == [wording.retrying_line("rate limited", d) for d in delays]
    label = "sub-agent 1/2: x"
    assert got["sub"] == [wording.retrying_line("rate limited", d, label) for d in delays]
    assert got["compacted"] == [
        wording.compacted_line(2, 1),
        wording.compacted_line(0, 3, "sub-agent 2/2: y"),
    ]
    assert got["usage"] == [wording.usage_line(*u) for u in usages]


def text(value: str) -> list[str]:
    return ["text", value]


#: Markdown inputs and the blocks `parseMarkdown` must give.
MARKDOWN_CASES: list[tuple[str, list[dict[str, Any]]]] = [
    ("", []),
    ("plain\nsecond line", [{"kind": "para", "inline": [text("plain\nsecond line")]}]),
    (
        "## Plan\n- **bold** item\n- *em* and `code`",
        [
            {"kind": "heading", "level": 2, "inline": [text("Plan")]},
            {
                "kind": "list",
                "ordered": False,
                "items": [
                    {
                        "depth": 0,
                        "number": 0,
                        "inline": [["strong", [text("bold")]], text(" item")],
                    },
                    {
                        "depth": 0,
                        "number": 0,
                        "inline": [["em", [text("em")]], text(" and "), ["code", "code"]],
                    },
                ],
            },
        ],
    ),
    (
        "3. three\n  - nested\n4) four",
        [
            {
                "kind": "list",
                "ordered": True,
                "items": [{"depth": 0, "number": 3, "inline": [text("three")]}],
            },
            {
                "kind": "list",
                "ordered": False,
                "items": [{"depth": 1, "number": 0, "inline": [text("nested")]}],
            },
            {
                "kind": "list",
                "ordered": True,
                "items": [{"depth": 0, "number": 4, "inline": [text("four")]}],
            },
        ],
    ),
    (
        "```sh\n<script>x</script>\n**not bold**\n```\nafter",
        [
            {"kind": "code", "info": "sh", "text": "<script>x</script>\n**not bold**"},
            {"kind": "para", "inline": [text("after")]},
        ],
    ),
    ("````\nstill streaming", [{"kind": "code", "info": "", "text": "still streaming"}]),
    (
        "snake_case_name, 2 * 3 * 4, __strong__ and _em_",
        [
            {
                "kind": "para",
                "inline": [
                    text("snake_case_name, 2 * 3 * 4, "),
                    ["strong", [text("strong")]],
                    text(" and "),
                    ["em", [text("em")]],
                ],
            }
        ],
    ),
    (
        "``a ` b`` and `unclosed <img src=x onerror=alert(1)>",
        [
            {
                "kind": "para",
                "inline": [
                    ["code", "a ` b"],
                    text(" and `unclosed <img src=x onerror=alert(1)>"),
                ],
            }
        ],
    ),
    (
        "> quoted\n> more\n\n---\n####### seven",
        [
            {"kind": "quote", "inline": [text("quoted\nmore")]},
            {"kind": "rule"},
            {"kind": "para", "inline": [text("####### seven")]},
        ],
    ),
    ("**open and *half", [{"kind": "para", "inline": [text("**open and *half")]}]),
]


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_markdown_parser_blocks() -> None:
    """§7: ``parseMarkdown`` of app.js (pure: no DOM, no HTML) reads fenced code
    (unclosed while streaming), headings, lists with their numbers and depth, quotes,
    rules, bold, emphasis and inline code; markup and unmatched marks stay text."""
    script = (
        section("markdown")
        + "\nconst cases = JSON.parse(require('fs').readFileSync(0, 'utf8'));\n"
        + "process.stdout.write(JSON.stringify(cases.map(parseMarkdown)));\n"
    )
    got = run_node(script, [source for source, _ in MARKDOWN_CASES])
    for (source, expected), blocks in zip(MARKDOWN_CASES, got, strict=True):
        assert blocks == expected, source


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_markdown_parser_keeps_every_character_of_plain_text() -> None:
    """§7: text with no Markdown marks comes back whole: parsing drops only the marks it
    renders, never a character of the text around them (the invisible ones are shown
    as escapes when the page draws it)."""
    cases = [
        "a\u202eb \x1b[2J c\u200bd",
        "tabs\tand  spaces   ",
        "<b>html</b> & [link](http://x) | table |",
        "😀 日本語 e\u0301",
    ]
    script = (
        section("markdown")
        + "\nconst cases = JSON.parse(require('fs').readFileSync(0, 'utf8'));\n"
        + "process.stdout.write(JSON.stringify(cases.map(parseMarkdown)));\n"
    )
    got = run_node(script, cases)
    assert got == [[{"kind": "para", "inline": [text(case)]}] for case in cases]


def test_page_writes_no_markup() -> None:
    """§7: the page builds every node with textContent or text nodes: no innerHTML,
    outerHTML, insertAdjacentHTML or document.write anywhere in its script, and no
    Legs tab (a ``chat-`` session cannot start background legs, R20)."""
    source = APP_JS.read_text()
    found = re.findall(r"(?:inner|outer)HTML\s*\+?=|insertAdjacentHTML|document\.write", source)
    assert found == []
    page = INDEX_HTML.read_text()
    assert 'data-tab="legs"' not in page
    assert "legs" not in re.findall(r'data-tab="(\w+)"', page)
