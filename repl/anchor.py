"""How the live area is laid out while a dialog is open, so that a resize leaves none
of it behind (issue 33 item 7).

prompt_toolkit erases what it drew by moving the cursor up by the row it left it on
and erasing down. A terminal that re-wraps its lines when it is narrowed (tmux, VTE,
kitty) splits every row wider than the new width — a dialog's rows are all full
width — into two or more rows; the cursor keeps its place in the text, so the rows
above it grow in number, the cursor up by its old row falls short of the area's first
row, and the rows it misses (the dialog's top border, its title) stay on screen and
scroll into the scrollback with the next output. Three rules make the erase reach them:

- The cursor rests on the area's first row (its column 0), above everything drawn:
  every row that can split is at or below it, where the erase down clears it however
  re-wrapped. The cursor that shows where typing goes (a reason, a password, an
  answer) is drawn in reverse video at its cell instead; the terminal's own cursor is
  hidden.
- Empty rows go above the dialog, not under it. A re-wrapping terminal keeps the
  *last* rows of its screen in view, empty ones included, and moves the lines above
  into the scrollback, out of reach of any erase: with empty rows under a dialog (a
  REPL started in a fresh terminal) the re-wrapped dialog's first rows went there.
  So the area draws its rows lower, leaving empty rows (never drawn in, they never
  split) above them, until there are as many rows above the drawn ones (transcript or
  empty) as it draws: narrowed to half its width or more, the dialog's re-wrapped rows
  push only those into the scrollback. A narrowing to less than half the width in one
  step can still push its first rows there; an erase never pushes anything
  (`SafeEraseRenderer`).
- The dialog is drawn only once the rows below the area's first one are known (a
  cursor position report, asked for after each erase); drawn before, at the height
  it needs, it had empty rows under it.

What is left behind is empty rows: a narrowing moves the rows above the dialog,
transcript or empty, into the scrollback, as a re-wrapping terminal does with any
text, and they stay there.

All three hold only while a dialog is open: the input line keeps the terminal's cursor.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from prompt_toolkit.application import Application
from prompt_toolkit.application.current import get_app
from prompt_toolkit.data_structures import Point
from prompt_toolkit.key_binding import KeyBindingsBase
from prompt_toolkit.layout import Container, Dimension, Layout
from prompt_toolkit.layout.mouse_handlers import MouseHandlers
from prompt_toolkit.layout.screen import Char, Screen, WritePosition
from prompt_toolkit.renderer import CPR_Support, Renderer

__all__ = ["DRAWN_CURSOR", "DialogAnchor", "SafeEraseRenderer"]

#: Style of the drawn cursor's cell (see `agentrio.repl.layout.STYLE`).
DRAWN_CURSOR = "class:drawn-cursor"


class DialogAnchor(Container):
    """``body`` as it is, except that while ``active()`` it is drawn at the bottom of
    the rows it was given, its cursor is drawn, and the terminal's cursor rests on its
    first cell (see the module docstring)."""

    def __init__(self, body: Container, active: Callable[[], bool]) -> None:
        self.body = body
        self.active = active
        #: The row the body was last drawn from (-1: not anchored).
        self._top = -1

    def reset(self) -> None:
        self.body.reset()

    def preferred_width(self, max_available_width: int) -> Dimension:
        return self.body.preferred_width(max_available_width)

    def preferred_height(self, width: int, max_available_height: int) -> Dimension:
        return self.body.preferred_height(width, max_available_height)

    def write_to_screen(
        self,
        screen: Screen,
        mouse_handlers: MouseHandlers,
        write_position: WritePosition,
        parent_style: str,
        erase_bg: bool,
        z_index: int | None,
    ) -> None:
        if not self.active():
            self._top = -1
            self.body.write_to_screen(
                screen, mouse_handlers, write_position, parent_style, erase_bg, z_index
            )
            return
        renderer = get_app().renderer
        if not renderer.height_is_known and renderer.cpr_support is not CPR_Support.NOT_SUPPORTED:
            # The rows below the area's first one are asked for (after a resize, after
            # lines printed above): drawn now, at the height it needs, the dialog would
            # have empty rows under it until the answer comes, and a resize then
            # would push its first rows into the scrollback. Drawn once it is known.
            screen.show_cursor = False
            return
        # The renderer gives the rows from the area's first one to the terminal's last.
        x, y, width, height = (
            write_position.xpos,
            write_position.ypos,
            write_position.width,
            write_position.height,
        )
        need = min(height, self.body.preferred_height(width, height).preferred)
        above = get_app().output.get_size().rows - height  # the transcript's rows in view
        top = y + max(0, min(height - need, need - above))
        if top != self._top and isinstance(renderer, SafeEraseRenderer):
            renderer.redraw_whole()  # the rows left empty above it must be empty lines
        self._top = top
        self.body.write_to_screen(
            screen,
            mouse_handlers,
            WritePosition(x, top, width, need),
            parent_style,
            erase_bg,
            z_index,
        )
        window = get_app().layout.current_window
        if screen.show_cursor:
            at = screen.get_cursor_position(window)
            cell = screen.data_buffer[at.y][at.x]
            screen.data_buffer[at.y][at.x] = Char(cell.char, f"{cell.style} {DRAWN_CURSOR}")
        screen.show_cursor = False
        screen.set_cursor_position(window, Point(x=x, y=y))

    def get_children(self) -> list[Container]:
        return [self.body]

    def get_key_bindings(self) -> KeyBindingsBase | None:
        return None


class SafeEraseRenderer(Renderer):
    """prompt_toolkit's renderer, whose erase never scrolls the screen into the
    scrollback, and which erases before it redraws at a new size.

    An erase down from the screen's top-left cell is taken by tmux (and some other
    terminals) as a clear screen that first pushes the whole screen into the
    scrollback. The area's first cell is there in a fresh terminal, and after a
    narrowing that moved the lines above into the scrollback; so the first row is
    erased on its own and the rest from the row below (a drawn area has at least the
    input row and the toolbar row, or nothing). A render at a new size erases first,
    the same way: the resize's own erase may come later (a signal handler's)."""

    @classmethod
    def of(cls, app: Application[Any]) -> SafeEraseRenderer:
        """The renderer ``app`` made, as this class (the same style, output, options)."""
        old = app.renderer
        return cls(
            old.style,
            old.output,
            full_screen=old.full_screen,
            mouse_support=old.mouse_support,
            cpr_not_supported_callback=old.cpr_not_supported_callback,
        )

    def redraw_whole(self) -> None:
        """Draw the next screen whole, after an erase down from the area's first row
        (as after a resize), not as a difference from the last one.

        A row erased to its end keeps, in tmux, the length it had for re-wrapping:
        a blank row that held a full-width row (a dialog's, the toolbar's) splits in
        two when the terminal is narrowed, as the dialog's rows do. The erase down
        empties them. It is this class's erase, not the renderer's own erase down
        (which, from the screen's top-left cell, pushes the screen into the scrollback);
        the rows below the area's first row are still known."""
        if self.last_rendered_screen is None:
            return
        below = self._min_available_height
        self.erase(leave_alternate_screen=False)
        self._min_available_height = below

    def erase(self, leave_alternate_screen: bool = True) -> None:
        drawn = self.last_rendered_screen
        if drawn is None or drawn.height < 2:
            # Nothing drawn (or a dialog waiting for the rows below to be known): the
            # row below may not exist (the cursor on the last row), and there is
            # nothing under the cursor for an erase down to push anywhere.
            super().erase(leave_alternate_screen)
            return
        output = self.output
        output.cursor_backward(self._cursor_pos.x)
        output.cursor_up(self._cursor_pos.y)
        output.erase_end_of_line()
        output.cursor_down(1)
        output.erase_down()
        output.cursor_up(1)
        output.reset_attributes()
        output.enable_autowrap()
        output.flush()
        self.reset(leave_alternate_screen=leave_alternate_screen)

    def render(self, app: Application[Any], layout: Layout, is_done: bool = False) -> None:
        if self.last_rendered_screen is not None and self.output.get_size() != self._last_size:
            self.erase(leave_alternate_screen=False)
            self.request_absolute_cursor_position()
        super().render(app, layout, is_done)
