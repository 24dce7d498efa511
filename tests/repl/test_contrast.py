"""The command of a confirmation is readable: contrast >= 4.5:1, WCAG AA (R77).

Computed from the styles themselves, not from numbers copied here:

- REPL: a confirmation holding every kind of piece (text, escapes, marks, names, the
  gutter, the scroll line) is rendered by the real `ReplApp`; each drawn character's
  style string is resolved the way prompt_toolkit resolves it (its default UI style
  under `agentrio.repl.layout.STYLE`), colours are mapped to the 256-colour palette the
  terminal gets (prompt_toolkit's own mapping), and the ratio is taken per cell. Both
  colours must be set: a terminal's default colours are unknown.
- Web: engine/server/static/style.css is parsed (rules, ``var(--x)`` from ``:root``)
  for the command box and each piece class.
"""

from __future__ import annotations

import re
from pathlib import Path

from prompt_toolkit.output.vt100 import _256ColorCache
from prompt_toolkit.styles import default_pygments_style, default_ui_style, merge_styles

from agentrio.protocol.frames import Ask
from agentrio.repl.layout import STYLE
from tests.repl.helpers import HASH, SESSION
from tests.repl.test_app import Harness, run_app
from tests.repl.test_arming import until_drawn

STYLE_CSS = Path(__file__).resolve().parents[2] / "engine" / "server" / "static" / "style.css"
AA = 4.5
#: Borders are not text: WCAG asks 3:1 of user-interface components.
NON_TEXT = 3.0

_PALETTE = _256ColorCache()


def luminance(hex_colour: str) -> float:
    """WCAG 2.x relative luminance of ``rrggbb``."""

    def linear(channel: int) -> float:
        c = channel / 255
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (int(hex_colour[i : i + 2], 16) for i in (0, 2, 4))
    return 0.2126 * linear(r) + 0.7152 * linear(g) + 0.0722 * linear(b)


def ratio(fg: str, bg: str) -> float:
    light, dark = sorted((luminance(fg), luminance(bg)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def in_256(hex_colour: str) -> str:
    """The colour a 256-colour terminal shows for ``rrggbb`` (prompt_toolkit's map)."""
    rgb = tuple(int(hex_colour[i : i + 2], 16) for i in (0, 2, 4))
    r, g, b = _PALETTE.colors[_PALETTE[rgb]]  # type: ignore[index]
    return f"{r:02x}{g:02x}{b:02x}"


# ---------------------------------------------------------------- REPL


def test_repl_confirmation_contrast() -> None:
    """R77: every character of a confirmation's command area (text, escapes, marks,
    names, gutter, scroll line) has explicit colours at >= 4.5:1, in true colour and
    as a 256-colour terminal shows them; the rest of the dialog's text too, its
    border >= 3:1."""
    lines = "\n".join(f"echo {n}" for n in range(30))
    ask = Ask(
        id="k1",
        kind="tool_confirm",
        session_id=SESSION,
        task_hash=HASH,
        tool_name="run_command",
        tool_args={"command": f"a\x1b\u202eb{' ' * 9}\n{lines}", "cwd": "/tmp"},
        restricted=True,
    )
    style = merge_styles([default_ui_style(), default_pygments_style(), STYLE])
    checked: dict[str, float] = {}

    async def scenario(h: Harness) -> None:
        h.app.deliver(ask)
        await h.armed()
        await until_drawn(h, "more characters below")
        drawn = h.app.application.renderer.last_rendered_screen
        assert drawn is not None
        for y in range(drawn.height):
            for char in drawn.data_buffer[y].values():
                if "class:dialog" not in char.style or not char.char.strip():
                    continue
                attrs = style.get_attrs_for_style_str(char.style)
                fg, bg = (
                    (attrs.bgcolor, attrs.color) if attrs.reverse else (attrs.color, attrs.bgcolor)
                )
                where = f"{char.char!r} ({char.style})"
                assert re.fullmatch(r"[0-9a-f]{6}", fg or ""), f"no explicit colour: {where}"
                assert re.fullmatch(r"[0-9a-f]{6}", bg or ""), f"no explicit background: {where}"
                least = NON_TEXT if "frame.border" in char.style else AA
                for shown_fg, shown_bg in ((fg, bg), (in_256(fg), in_256(bg))):
                    value = ratio(shown_fg, shown_bg)
                    assert value >= least, f"{value:.2f}:1 for {where}"
                key = char.style.split("class:dialog", 1)[1].strip()
                checked[key] = min(checked.get(key, 99.0), ratio(fg, bg))

    run_app(scenario)
    kinds = " ".join(checked)
    for piece in (
        "command.gutter",
        "command.escape",
        "command.mark",
        "command.key",
        "command.more",
    ):
        assert piece in kinds, f"{piece} was not drawn: {sorted(checked)}"


# ---------------------------------------------------------------- web page


def css_rules(text: str) -> dict[str, dict[str, str]]:
    """``selector -> {property: value}`` of a plain stylesheet (no nesting; a
    selector list is split; later rules override earlier ones)."""
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    rules: dict[str, dict[str, str]] = {}
    for selectors, body in re.findall(r"([^{}]+)\{([^{}]*)\}", text):
        declarations = {}
        for declaration in body.split(";"):
            name, _, value = declaration.partition(":")
            if value.strip():
                declarations[name.strip()] = value.strip()
        for selector in selectors.split(","):
            rules.setdefault(" ".join(selector.split()), {}).update(declarations)
    return rules


def css_colour(value: str, variables: dict[str, str]) -> str:
    """``rrggbb`` of a declared colour (``#rgb``, ``#rrggbb`` or ``var(--x)``)."""
    found = re.fullmatch(r"var\((--[\w-]+)\)", value)
    if found:
        return css_colour(variables[found.group(1)], variables)
    found = re.fullmatch(r"#([0-9a-fA-F]{3}|[0-9a-fA-F]{6})", value)
    assert found is not None, f"not a plain colour: {value}"
    digits = found.group(1).lower()
    return "".join(c * 2 for c in digits) if len(digits) == 3 else digits


def test_web_command_contrast() -> None:
    """R77: in style.css, the command box's text and each piece class (gutter,
    escape, mark, name) and the hidden-length line have colours at >= 4.5:1 against
    their backgrounds, a piece without its own background taking the box's."""
    rules = css_rules(STYLE_CSS.read_text())
    variables = {k: v for k, v in rules[":root"].items() if k.startswith("--")}

    def declared(selector: str, *names: str) -> str | None:
        for name in names:
            if name in rules.get(selector, {}):
                return css_colour(rules[selector][name].split()[0], variables)
        return None

    box_fg = declared(".command", "color")
    box_bg = declared(".command", "background", "background-color")
    assert box_fg is not None
    assert box_bg is not None
    results = {".command": ratio(box_fg, box_bg)}
    for selector in (".command .gutter", ".command .escape", ".command .mark", ".command .key"):
        fg = declared(selector, "color") or box_fg
        bg = declared(selector, "background", "background-color") or box_bg
        results[selector] = ratio(fg, bg)
    size_fg = declared(".command-size", "color")
    size_bg = declared(".command-size", "background", "background-color")
    assert size_fg is not None
    assert size_bg is not None
    results[".command-size"] = ratio(size_fg, size_bg)
    low = {selector: round(value, 2) for selector, value in results.items() if value < AA}
    assert low == {}
