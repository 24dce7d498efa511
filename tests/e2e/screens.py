"""REPL screenshots for the docs: a tmux capture (``capture-pane -e``) kept as ``.ansi``
and rendered to ``.png`` by headless Chromium (`tests.e2e.cdp`, the same browser the
web tests drive), so the pictures in the README are what the REPL really draws.

The tmux tests call `save_screen` at the moments the README shows; it writes only when
``AGENTRIO_UPDATE_GOLDEN=1`` (docs/testing.md), so an ordinary test run never touches
``docs/``. `retarget` shows a temporary path as the path the README names, keeping the
right border of a dialog box in its column.
"""

from __future__ import annotations

import base64
import html
import os
import re
import shutil
from pathlib import Path

import trio

from tests.e2e.cdp import Chromium, Page, connect, find_chromium

__all__ = ["DOCS", "UPDATE_ENV", "ansi_to_html", "retarget", "save_screen", "updating"]

DOCS = Path(__file__).resolve().parents[2] / "docs"
#: Set to 1 to rewrite the golden screens (tests/e2e/golden/) and the docs' screenshots.
UPDATE_ENV = "AGENTRIO_UPDATE_GOLDEN"

_SGR = re.compile(r"\x1b\[([0-9;]*)m")
_OTHER_ESCAPE = re.compile(r"\x1b\[[0-9;?]*[A-Za-ln-z]|\x1b[()][0-9A-Za-z]")
_FG, _BG = "#d0d0d0", "#1c1c1c"
_BASIC = (
    "#000000 #cd3131 #0dbc79 #e5e510 #2472c8 #bc3fbc #11a8cd #e5e5e5 "
    "#666666 #f14c4c #23d18b #f5f543 #3b8eea #d670d6 #29b8db #ffffff"
).split()


def updating() -> bool:
    return os.environ.get(UPDATE_ENV) == "1"


def _xterm(n: int) -> str:
    """The colour of xterm-256 palette entry ``n``."""
    if n < 16:
        return _BASIC[n]
    if n < 232:
        steps = (0, 95, 135, 175, 215, 255)
        n -= 16
        return f"#{steps[n // 36]:02x}{steps[n // 6 % 6]:02x}{steps[n % 6]:02x}"
    grey = 8 + 10 * (n - 232)
    return f"#{grey:02x}{grey:02x}{grey:02x}"


class _Style:
    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.fg: str | None = None
        self.bg: str | None = None
        self.bold = self.dim = self.italic = self.underline = self.reverse = False

    def apply(self, codes: list[int]) -> None:
        i = 0
        while i < len(codes):
            code = codes[i]
            if code == 0:
                self.reset()
            elif code in (1, 2, 3, 4, 7):
                attr = {1: "bold", 2: "dim", 3: "italic", 4: "underline", 7: "reverse"}[code]
                setattr(self, attr, True)
            elif code == 22:
                self.bold = self.dim = False
            elif code in (23, 24, 27):
                setattr(self, {23: "italic", 24: "underline", 27: "reverse"}[code], False)
            elif code in (38, 48) and i + 2 < len(codes) and codes[i + 1] == 5:
                self._set(code == 38, _xterm(codes[i + 2]))
                i += 2
            elif code in (38, 48) and i + 4 < len(codes) and codes[i + 1] == 2:
                r, g, b = codes[i + 2 : i + 5]
                self._set(code == 38, f"#{r:02x}{g:02x}{b:02x}")
                i += 4
            elif code in (39, 49):
                self._set(code == 39, None)
            elif 30 <= code <= 37 or 40 <= code <= 47:
                self._set(code < 40, _BASIC[code % 10])
            elif 90 <= code <= 97 or 100 <= code <= 107:
                self._set(code < 100, _BASIC[code % 10 + 8])
            i += 1

    def _set(self, foreground: bool, colour: str | None) -> None:
        if foreground:
            self.fg = colour
        else:
            self.bg = colour

    def css(self) -> str:
        fg, bg = self.fg or _FG, self.bg or _BG
        if self.reverse:
            fg, bg = bg, fg
        rules = [f"color:{fg}", f"background:{bg}"]
        if self.bold:
            rules.append("font-weight:bold")
        if self.dim:
            rules.append("opacity:0.7")
        if self.italic:
            rules.append("font-style:italic")
        if self.underline:
            rules.append("text-decoration:underline")
        return ";".join(rules)


def ansi_to_html(ansi: str) -> str:
    """A whole HTML page showing ``ansi`` (text with SGR colour codes) as a terminal."""
    style = _Style()
    out: list[str] = []
    for line in ansi.split("\n"):
        line = _OTHER_ESCAPE.sub("", line)
        pos = 0
        for match in _SGR.finditer(line):
            if match.start() > pos:
                out.append(
                    f'<span style="{style.css()}">{html.escape(line[pos : match.start()])}</span>'
                )
            style.apply([int(c) if c else 0 for c in match.group(1).split(";")])
            pos = match.end()
        if pos < len(line):
            out.append(f'<span style="{style.css()}">{html.escape(line[pos:])}</span>')
        out.append("\n")
    body = "".join(out).rstrip("\n")
    return (
        "<!doctype html><meta charset=utf-8><style>"
        f"html,body{{margin:0;background:{_BG}}}"
        f"pre{{display:inline-block;margin:0;padding:12px 16px;color:{_FG};"
        "font:14px/1.3 'DejaVu Sans Mono','Liberation Mono','DejaVu Math TeX Gyre',monospace}"
        "span{display:inline-block;vertical-align:top}"
        f"</style><pre>{body}</pre>"
    )


def retarget(text: str, path: str, shown: str) -> str:
    """``text`` with ``path`` written as ``shown``; a line that ends in a box border
    ``│`` gets the difference in length as spaces before it, so the border stays put."""
    lines = []
    for line in text.split("\n"):
        count = line.count(path)
        line = line.replace(path, shown)
        end = line.rfind("│")
        plain = _SGR.sub("", line).rstrip()
        if count and end > 0 and plain.endswith("│"):
            pad = count * (len(path) - len(shown))
            line = line[:end] + " " * pad + line[end:]
        lines.append(line)
    return "\n".join(lines)


def trim(ansi: str, keep: int = 32) -> str:
    """The screen without its unused rows (a run of 3+ empty lines), last ``keep`` lines."""
    lines = ansi.rstrip("\n").split("\n")
    kept: list[str] = []
    blank: list[str] = []
    for line in lines:
        if _SGR.sub("", line).strip():
            kept.extend(blank if len(blank) < 3 else [])
            blank = []
            kept.append(line)
        else:
            blank.append(line)
    return "\n".join(kept[-keep:]) + "\n"


async def _render(page_html: Path) -> bytes:
    binary = find_chromium()
    assert binary is not None, "rendering the docs' screenshots needs chromium"
    profile = page_html.parent / "screen-profile"
    shutil.rmtree(profile, ignore_errors=True)  # a stale DevToolsActivePort misleads
    browser = Chromium(binary, profile, width=1600, height=1200)
    try:
        async with connect(browser.ws_url) as connection:
            page = await Page.open(connection, page_html.as_uri(), width=1600, height=1400)
            box = await page.evaluate(
                "(() => { const r = document.querySelector('pre').getBoundingClientRect();"
                " return [r.width, r.height]; })()"
            )
            shot = await page.call(
                "Page.captureScreenshot",
                {
                    "format": "png",
                    "clip": {"x": 0, "y": 0, "width": box[0], "height": box[1], "scale": 1},
                },
            )
    finally:
        browser.close()
    return base64.b64decode(shot["data"])


def save_screen(name: str, ansi: str, scratch: Path) -> None:
    """Write ``docs/<name>.ansi`` and ``docs/<name>.png`` from a ``capture-pane -e``
    screen, when ``AGENTRIO_UPDATE_GOLDEN=1``; otherwise do nothing."""
    if not updating():
        return
    screen = trim(ansi)
    (DOCS / f"{name}.ansi").write_text(screen, encoding="utf-8")
    scratch.mkdir(parents=True, exist_ok=True)
    page_html = scratch / f"{name}.html"
    page_html.write_text(ansi_to_html(screen), encoding="utf-8")
    (DOCS / f"{name}.png").write_bytes(trio.run(_render, page_html))
