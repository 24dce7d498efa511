"""``agentrio logs [-f] [-n N] [--home DIR]``: the daemon's log, ``<home>/daemon.log``.

Without ``-f`` it prints the last ``N`` lines (default 100; 0: all) and exits. With
``-f`` it then keeps printing what the daemon appends, like ``tail -F``: a log that is
not there yet is waited for, one that is truncated or replaced is read again from its
start. Ctrl+C (or SIGTERM) ends it cleanly, exit 0.

Plain blocking reads and a short sleep between looks: one file, one reader, nothing
else to do in this process, so an event loop would buy nothing.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import IO, Final

from agentrio.repl.cli import add_home_option

__all__ = ["POLL_S", "build_parser", "main"]

#: How often ``-f`` looks for new lines.
POLL_S: Final = 0.2
_CHUNK: Final = 64 * 1024


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agentrio logs",
        description=(
            "Print the daemon's log (<home>/daemon.log): its last lines, and with -f what "
            "follows as the daemon writes it (Ctrl+C stops)."
        ),
    )
    parser.add_argument("-f", "--follow", action="store_true", help="keep printing new lines")
    parser.add_argument(
        "-n",
        "--lines",
        type=int,
        default=100,
        metavar="N",
        help="how many of the last lines to print first (default 100; 0: all)",
    )
    add_home_option(parser)
    return parser


def main(argv: list[str]) -> int:
    """``argv`` from the command's name on (``["logs", "-f"]``)."""
    args = build_parser().parse_args(argv[1:])
    from agentrio.home import default_home

    home = Path(args.home).expanduser() if args.home else default_home()
    log = home / "daemon.log"
    out = sys.stdout.buffer
    try:
        with _stop_on_sigterm():
            position = _print_tail(log, max(args.lines, 0), out)
            if position is None and not args.follow:
                print(
                    f"agentrio logs: no log yet at {log} (a daemon writes it once started: "
                    "agentrio start)",
                    file=sys.stderr,
                )
                return 1
            if args.follow:
                _follow(log, position, out)
    except KeyboardInterrupt:
        return 0
    except BrokenPipeError:  # `agentrio logs | head`
        sys.stderr.close()
        return 0
    return 0


def _print_tail(log: Path, lines: int, out: IO[bytes]) -> tuple[int, int] | None:
    """Print the last ``lines`` lines (all for 0); return ``(inode, offset)`` read up
    to, or None when there is no log."""
    try:
        f = log.open("rb")
    except FileNotFoundError:
        return None
    with f:
        inode = os.fstat(f.fileno()).st_ino
        if lines == 0:
            while chunk := f.read(_CHUNK):
                out.write(chunk)
        else:
            kept: deque[bytes] = deque(f, maxlen=lines)
            out.writelines(kept)
        out.flush()
        return inode, f.tell()


def _follow(log: Path, position: tuple[int, int] | None, out: IO[bytes]) -> None:
    """Print what is appended to ``log`` from ``position`` on, until interrupted."""
    inode, offset = position if position is not None else (-1, 0)
    while True:
        try:
            st = log.stat()
        except FileNotFoundError:
            time.sleep(POLL_S)
            continue
        if st.st_ino != inode or st.st_size < offset:
            inode, offset = st.st_ino, 0  # replaced or truncated: from its start
        if st.st_size > offset:
            with log.open("rb") as f:
                f.seek(offset)
                while chunk := f.read(_CHUNK):
                    out.write(chunk)
                offset = f.tell()
            out.flush()
        time.sleep(POLL_S)


@contextmanager
def _stop_on_sigterm() -> Iterator[None]:
    """SIGTERM ends ``-f`` as Ctrl+C does (KeyboardInterrupt); restored afterwards."""
    before = signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt
