"""Log lines an unauthenticated client can cause, rate-limited (issue 29 finding 10).

A refused ``Origin`` or ``Host``, an unauthenticated connection over the cap: each is
worth one line in ``daemon.log``, but a client that repeats the refused request in a
loop must not be able to fill the disk (one local client wrote about 1 GiB an hour,
one browser tab 478 lines in 12 s). `RefusalLog` writes at most `BURST` lines per kind
in each `WINDOW_S`; the next line of that kind after the window says how many were
left out, so nothing is silently lost.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Final

import attrs

__all__ = ["BURST", "WINDOW_S", "RefusalLog"]

#: Lines of one kind written per window.
BURST: Final = 5
#: Seconds of one window.
WINDOW_S: Final = 60.0


@attrs.define
class _Window:
    started: float
    written: int = 0
    suppressed: int = 0


class RefusalLog:
    """``warning(kind, message, *args)``: like ``logger.warning``, at most ``burst``
    lines of each ``kind`` per ``window_s`` seconds (``clock`` is injectable for tests).
    Kinds are a small fixed set chosen by the caller, never text from a request, so
    the table of windows cannot grow."""

    def __init__(
        self,
        logger: logging.Logger,
        *,
        burst: int = BURST,
        window_s: float = WINDOW_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._logger = logger
        self._burst = burst
        self._window_s = window_s
        self._clock = clock
        self._windows: dict[str, _Window] = {}

    def warning(self, kind: str, message: str, *args: object) -> None:
        now = self._clock()
        window = self._windows.get(kind)
        if window is None or now - window.started >= self._window_s:
            if window is not None and window.suppressed:
                self._logger.warning(
                    "%d more line(s) like %r were left out in the last %g s",
                    window.suppressed,
                    kind,
                    self._window_s,
                )
            window = self._windows[kind] = _Window(started=now)
        if window.written < self._burst:
            window.written += 1
            self._logger.warning(message, *args)
            if window.written == self._burst:
                self._logger.warning(
                    "further %r lines are left out for up to %g s", kind, self._window_s
                )
        else:
            window.suppressed += 1
