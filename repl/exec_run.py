"""``agentrio exec TEXT``: one task, no REPL (the habit of ``codex exec`` and
``claude -p``): for scripts, CI jobs and shell pipelines.

It finds the home's daemon, starting a detached one when none answers exactly as the
REPL does (`agentrio.repl.daemon.ensure_daemon`), connects with the client
(`agentrio.repl.client.connect_endpoint`) and sends one ``run`` in a new ``cli-``
session (``--session ID`` continues one). The task's text streams to stdout as it
arrives; what it does besides (tool calls, results, asks answered, how it ended) goes
to stderr, so ``agentrio exec "…" > answer.txt`` keeps only the answer. With
``--json`` stdout carries the protocol's own frames instead, one JSON object a line
(`agentrio.protocol.codec`): an ``event`` frame per event, then the run's ``done``
frame, always last.

Its asks go first to whoever else listens to the session (a REPL window open on it,
a ``listen`` script, a subscriber: ``share_asks``, R99), whose answers count as its
own; an ask nobody else can take `agentrio.repl.exec_asks` answers: it denies every
confirmation an ``--allow REGEX`` does not cover, and declines questions and secrets,
each with a reason the model reads.

The exit status says how the task ended (`EXIT_CODES`, also in ``--help``). The first
SIGINT (Ctrl-C) or SIGTERM cancels the task (cause ``user_canceled``: its commands are
killed, it leaves a history entry and no pending record) and waits for its ``done``;
a second one leaves at once, and the daemon then stops the run as it does for a
closed REPL window (cause ``disconnected``, kept resumable). A daemon ``exec`` started
keeps running, as one the REPL starts does.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Final, TextIO

import attrs
import trio

from agentrio import AuthRefused, ClientError, RunHandle, StartFailed, default_home
from agentrio.connecting import new_window_hash
from agentrio.handles import Decision
from agentrio.protocol.codec import dumps
from agentrio.protocol.events import (
    Canceled,
    Done,
    Event,
    Failed,
    Pending,
    TaskStarted,
    Text,
    ToolCall,
)
from agentrio.protocol.frames import Ask, DoneFrame, EventFrame
from agentrio.repl.cli import SESSION_ID, add_home_option, add_session_option
from agentrio.repl.client import HTTP_TIMEOUT_S, connect_endpoint, no_trust_roots
from agentrio.repl.commands import new_session_id
from agentrio.repl.daemon import DaemonStartError, ensure_daemon
from agentrio.repl.exec_asks import EXEC_CLIENT, ExecAsks
from agentrio.repl.launch import agentrio_command
from agentrio.repl.messages import Status
from agentrio.repl.render import line_text, render_done_status, render_event
from agentrio.transport import open_http

__all__ = [
    "EXIT_CODES",
    "EXIT_FAILED",
    "EXIT_FINISHED",
    "EXIT_INTERRUPTED",
    "EXIT_REFUSED",
    "EXIT_STDOUT_CLOSED",
    "EXIT_USAGE",
    "build_parser",
    "exit_code",
    "main",
]

#: The task finished and nothing it asked was refused.
EXIT_FINISHED: Final = 0
#: The task failed (the model, a tool, a lost daemon), or something other than this
#: ``exec`` stopped it (a daemon shutdown).
EXIT_FAILED: Final = 1
#: Bad arguments, empty input, or no daemon to run it: nothing ran.
EXIT_USAGE: Final = 2
#: The task finished, but something it asked was denied or declined (its answer may
#: lack what that would have done), or it waits for an answer.
EXIT_REFUSED: Final = 3
#: Interrupted by SIGINT (128 + 2); SIGTERM gives 143 (128 + 15). The task was canceled.
EXIT_INTERRUPTED: Final = 128 + signal.SIGINT

#: stdout's reader went away (``agentrio exec … | head -1``), as a SIGPIPE would end a
#: process (128 + 13): noticed at the next write, when the task, if it still runs, is
#: canceled (nobody reads its answer).
EXIT_STDOUT_CLOSED: Final = 128 + signal.SIGPIPE

#: Every exit status and what it means, as ``--help`` and the docs list them.
EXIT_CODES: Final = {
    EXIT_FINISHED: "finished",
    EXIT_FAILED: "failed, or stopped by the daemon",
    EXIT_USAGE: "usage or configuration error, nothing ran",
    EXIT_REFUSED: "finished, but a confirmation was denied or a question declined",
    EXIT_INTERRUPTED: "interrupted (Ctrl-C; SIGTERM: 143): the task was canceled",
    EXIT_STDOUT_CLOSED: "stdout was closed (| head): the task was canceled if it still ran",
}


def build_parser() -> argparse.ArgumentParser:
    codes = "; ".join(f"{code} {meaning}" for code, meaning in EXIT_CODES.items())
    parser = argparse.ArgumentParser(
        prog="agentrio exec",
        description=(
            "Run one task without the REPL and exit: its text goes to stdout, notes "
            "(tool calls, asks answered, how it ended) to stderr. Starts a daemon when "
            "none answers. Its asks go to another front-end listening to the session "
            "(agentrio --session ID, a listen script) when one is there; else every "
            "confirmation is denied unless an --allow pattern covers it, and questions "
            "and secrets are declined."
        ),
        epilog=f"Exit status: {codes}.",
    )
    parser.add_argument("text", metavar="TEXT", help="what to do; - reads it from stdin")
    add_session_option(parser)
    parser.add_argument(
        "--allow",
        metavar="REGEX",
        action="append",
        default=[],
        help=(
            "approve a run_command whose whole command fully matches REGEX and that runs "
            "in this directory (its real path); may be given more than once"
        ),
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the protocol's frames as JSON lines: each event, then done",
    )
    add_home_option(parser)
    return parser


def main(argv: list[str]) -> int:
    """``argv`` from the command's name on (``["exec", "run: ls"]``)."""
    parser = build_parser()
    args = parser.parse_args(argv[1:])
    if args.session is not None and not SESSION_ID.fullmatch(args.session):
        parser.error(f"--session must look like cli-<letters, digits, _ or ->: {args.session!r}")
    text = sys.stdin.read() if args.text == "-" else args.text
    if not text.strip():
        parser.error("nothing to run: the text is empty")
    try:
        asks = ExecAsks.of(args.allow)
    except re.error as exc:
        parser.error(f"--allow: not a regular expression: {exc}")
    if args.home:
        # Set, not just used: a daemon this starts must share the home (as the REPL's).
        os.environ["AGENTRIO_HOME"] = str(Path(args.home).expanduser().resolve())
    job = _Exec(
        home=default_home(),
        session_id=args.session or new_session_id(),
        text=text,
        asks=asks,
        json=args.json,
    )
    try:
        return trio.run(job.main)
    except KeyboardInterrupt:  # before the signal watcher or after it: nothing runs
        return EXIT_INTERRUPTED


def exit_code(done: DoneFrame, *, refused: int, signum: int | None) -> int:
    """The exit status of a run that ended with ``done`` (`EXIT_CODES`): ``refused``
    asks were denied or declined, ``signum`` is the signal that interrupted it
    (``SIGPIPE``: stdout was closed, so its output was not all written, whatever the
    ending)."""
    if signum == signal.SIGPIPE:
        return EXIT_STDOUT_CLOSED
    if done.status == "finished":
        return EXIT_REFUSED if refused else EXIT_FINISHED
    if done.status == "parked":
        return EXIT_REFUSED
    if signum is not None and done.status in ("canceled", "aborted", "paused"):
        return 128 + signum
    return EXIT_FAILED


@attrs.define
class _Exec:
    """One ``agentrio exec``: the task to run and what became of it."""

    home: Path
    session_id: str
    text: str
    asks: ExecAsks
    json: bool
    #: The signal that interrupted it, if one did.
    signum: int | None = None
    #: The run, once the daemon accepted it (a signal then cancels it).
    run: RunHandle | None = None
    #: A ``run`` was sent: a signal waits for its acceptance before cancelling it.
    starting: bool = False
    #: The exit status, once the run ended (None: left at a signal before that).
    code: int | None = None
    _out: _Output | None = None

    async def main(self) -> int:
        out = self._out = _Output(json=self.json, on_closed=self._stdout_closed, asks=self.asks)
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._watch, signals, nursery.cancel_scope)
                await self._connect_and_run(nursery.start_soon)
                nursery.cancel_scope.cancel()
        if self.code is None:  # left at a signal before the run ended
            await out.note("agentrio exec: interrupted")
            return 128 + (self.signum or signal.SIGINT)
        return self.code

    async def _watch(self, signals: AsyncIterator[int], leave: trio.CancelScope) -> None:
        """The first signal cancels the task (or, before a run was sent, leaves); the
        second leaves at once."""
        async for signum in signals:
            if self.signum is not None or not self.starting:
                self.signum = self.signum or signum
                leave.cancel()
                return
            self.signum = signum
            if self.run is not None:
                await self._cancel(self.run)

    async def _stdout_closed(self) -> None:
        """stdout's reader went away: cancel the task as a SIGPIPE would (exit 141)."""
        if self.signum is None:
            self.signum = signal.SIGPIPE
            if self.run is not None:
                await self._cancel(self.run, why="stdout was closed")

    async def _cancel(self, run: RunHandle, *, why: str = "interrupted") -> None:
        assert self._out is not None
        await self._out.note(f"agentrio exec: {why}, canceling the task")
        try:
            await run.cancel()
        except ClientError as exc:  # it ended meanwhile, or the connection did
            await self._out.note(f"agentrio exec: cancel: {exc.message}")

    async def _connect_and_run(self, spawn: Callable[..., object]) -> None:
        self.code = await self._exit_code(spawn)

    async def _exit_code(self, spawn: Callable[..., object]) -> int:
        out = self._out
        assert out is not None

        def status(said: Status) -> None:
            spawn(out.note, f"agentrio exec: {said.text}")

        async with open_http(timeout_s=HTTP_TIMEOUT_S, verify=no_trust_roots()) as http:
            try:
                endpoint = await ensure_daemon(self.home, http, status=status)
            except DaemonStartError as exc:
                await out.note(f"agentrio exec: {exc}")
                return EXIT_USAGE
            try:
                async with connect_endpoint(endpoint, http, client_name=EXEC_CLIENT) as client:
                    self.starting = True
                    run = await client.run(
                        self.session_id,
                        self.text,
                        window_hash=new_window_hash(),
                        on_ask=self._decide,
                        cwd="",  # the session's directory, as before the client's default
                        share_asks=True,  # another front-end there answers (R99)
                    )
                    self.run = run
                    if self.signum is not None:
                        await self._cancel(run)
                    await out.events(run)
                    done = await run.wait_done()
            except StartFailed as exc:
                await out.note(f"agentrio exec: the daemon did not start the task: {exc.message}")
                return EXIT_USAGE
            except AuthRefused as exc:
                await out.note(f"agentrio exec: the daemon refused our token: {exc.message}")
                return EXIT_USAGE
            except ClientError as exc:
                await out.note(f"agentrio exec: lost the daemon: {exc.message}")
                return EXIT_FAILED
        await out.finish(done, self.session_id)
        return exit_code(done, refused=self.asks.refused, signum=self.signum)

    async def _decide(self, ask: Ask) -> Decision:
        assert self._out is not None
        decision = self.asks.decide(ask)
        await self._out.ask_note(f"agentrio exec: {self.asks.judged[-1].note}")
        return decision


class _Output:
    """stdout and stderr, written off the Trio thread (a slow pipe must not stall the
    connection's reader), in the order things happened."""

    def __init__(
        self, *, json: bool, on_closed: Callable[[], Awaitable[None]], asks: ExecAsks
    ) -> None:
        self.json = json
        #: What another front-end answered is noted and counted there.
        self._asks = asks
        #: Called once when stdout's reader went away (``| head -1``).
        self._on_closed = on_closed
        self._stdout_closed = False
        self._write_stdout = _writer(sys.stdout)
        self._write_stderr = _writer(sys.stderr)
        #: Text streamed to stdout so far ends without a newline.
        self._open_line = False
        #: A note was shown since the last text: the next text starts a new line.
        self._noted = False
        self._streamed = False
        #: An event said how the run ended (the ``done`` frame's line would repeat it).
        self._ended = False
        #: How asks were answered, shown before the result they led to.
        self._ask_notes: list[str] = []

    async def note(self, line: str) -> None:
        await self._stderr(line + "\n")

    async def _stdout(self, text: str) -> None:
        """Write ``text`` to stdout; once its reader went away, nothing more is written
        there and `_on_closed` runs (the task is cancelled: nobody reads its answer)."""
        if self._stdout_closed:
            return
        try:
            await self._write_stdout(text)
        except BrokenPipeError:
            self._stdout_closed = True
            # Nothing left to flush at exit: the interpreter would report the pipe again.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)
            await self._on_closed()

    async def _stderr(self, text: str) -> None:
        try:
            await self._write_stderr(text)
        except BrokenPipeError:
            return  # notes are for a person who left

    async def ask_note(self, line: str) -> None:
        """How an ask was answered: at once with ``--json``; else with the next event
        after the call's own (the ask may arrive before the events' reader showed the
        call)."""
        if self.json:
            await self.note(line)
        else:
            self._ask_notes.append(line)

    async def _flush_ask_notes(self) -> None:
        notes, self._ask_notes = self._ask_notes, []
        for line in notes:
            await self.note(line)

    async def events(self, run: RunHandle) -> None:
        """Show each of the run's events as it arrives, until its last."""
        async for event in run.events():
            heard = self._asks.heard(event)
            if heard is not None:
                await self.ask_note(f"agentrio exec: {heard}")
            if self.json:
                frame = EventFrame(session_id=run.session_id, task_hash=run.task_hash, event=event)
                await self._stdout(dumps(frame) + "\n")
            else:
                await self._show(event)

    async def _show(self, event: Event) -> None:
        if not isinstance(event, ToolCall):  # an ask follows its call's event
            await self._flush_ask_notes()
        match event:
            case Text(text=text):
                await self._text(text)
            case Done(text=text):
                if text and not self._streamed:
                    await self._text(text)
            case TaskStarted():
                pass
            case _:
                self._ended = self._ended or isinstance(event, Canceled | Failed | Pending)
                lines = [line_text(line) for line in render_event(event)]
                if lines:
                    self._noted = True
                    await self._stderr("\n".join(lines) + "\n")

    async def _text(self, text: str) -> None:
        if not text:
            return
        if self._noted and self._open_line:
            text = "\n" + text
        self._noted = False
        self._streamed = True
        self._open_line = not text.endswith("\n")
        await self._stdout(text)

    async def finish(self, done: DoneFrame, session_id: str) -> None:
        """The run's ``done``: its frame (``--json``) or closing line, and how to
        continue the session."""
        await self._flush_ask_notes()
        if self.json:
            await self._stdout(dumps(done) + "\n")
        elif self._open_line:
            await self._stdout("\n")
        if not self._ended:
            for line in render_done_status(done.status, done.error):
                await self.note(line_text(line))
        command = agentrio_command()
        await self.note(
            f"agentrio exec: session {session_id}; continue it with "
            f"`{command} exec --session {session_id} …` or `{command} --session {session_id}`"
        )


def _writer(stream: TextIO) -> Callable[[str], Awaitable[None]]:
    """An async write-and-flush of ``stream`` in a worker thread."""
    wrapped = trio.wrap_file(stream)

    async def write(text: str) -> None:
        await wrapped.write(text)
        await wrapped.flush()

    return write
