"""An interrupted call is never re-run silently, through the real server (issue 34 item
5; R6, R41, R42, R76).

A ``cli-`` task runs an approved command that writes a line and then sleeps; it is
paused while the command runs and resumed in its window. Its model repeats the call:
the confirmation says the call may have partly run -- even though the person chose
"Always allow this exact command" the first time -- and, denied, the command does not
run again (the file keeps its one line). A call paused while its confirmation was
still open never ran: its repeat is asked as usual, with no such note. Real
subprocesses, so real time.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path

import trio

from agentrio.engine.messages import INTERRUPTED_CALL_NOTE, INTERRUPTED_RESUME_HEADER
from agentrio.engine.models.base import (
    Message,
    ModelReply,
    RetrySink,
    TextSink,
    ToolCallRequest,
    ToolSpec,
)
from agentrio.frontends.asks import command_text
from agentrio.protocol.faithful import confirm_lines, plain_text
from agentrio.protocol.frames import Ask, DoneFrame, EventFrame, PendingFrame, Reply, Run
from agentrio.transport import FrameConnection, open_frame_connection
from tests.engine.conftest import first_input
from tests.engine.server.test_stop_receipt import served_with

SESSION = "cli-interrupted"


class RepeatModel:
    """The task calls ``command`` once; a resumed run repeats it (same arguments) and
    then ends with the result it read."""

    name = "repeat-model"

    def __init__(self, command: str) -> None:
        self.call = ToolCallRequest(id="c1", name="run_command", args={"command": command})
        self.results: list[str] = []

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        *,
        on_text: TextSink | None = None,
        on_retry: RetrySink | None = None,
    ) -> ModelReply:
        await trio.lowlevel.checkpoint()
        first = first_input(messages)
        if messages[-1].role == "tool":
            self.results.append(messages[-1].content)
            return ModelReply(text="done")
        assert first == "parent" or first.startswith(INTERRUPTED_RESUME_HEADER)
        return ModelReply(text="", tool_calls=[self.call])


async def next_ask(conn: FrameConnection) -> tuple[str, Ask]:
    """The task hash of the run and its next ask."""
    task_hash = ""
    while True:
        frame = await conn.receive()
        if isinstance(frame, EventFrame):
            task_hash = task_hash or frame.task_hash
        if isinstance(frame, Ask):
            return task_hash or frame.task_hash, frame


async def done_of(conn: FrameConnection, request_id: str) -> DoneFrame:
    while True:
        frame = await conn.receive()
        if isinstance(frame, DoneFrame) and frame.request_id == request_id:
            return frame


async def until_lines(path: Path, count: int) -> None:
    """Wait for the command's own write (a subprocess: polled, bounded by the test)."""
    while not path.exists() or len(path.read_text().splitlines()) < count:
        await trio.sleep(0.01)


async def test_a_call_paused_while_it_ran_asks_again_saying_it_may_have_partly_run(
    tmp_path: Path,
) -> None:
    """R41, R42, R76 (issue 34 item 5): paused while its approved command runs, the task
    resumed repeats the call; the remembered rule the person chose does not let it
    through: the confirmation carries ``details.interrupted`` (shown by every
    front-end's rendering), and denied, the command does not run again."""
    marker = tmp_path / "ran.txt"
    command = f"echo ran >> {shlex.quote(str(marker))}; sleep 600"
    model = RepeatModel(command)
    with trio.fail_after(60):
        async with (
            served_with(tmp_path / "home", model) as (ws_url, http),
            open_frame_connection(ws_url, http.headers["Authorization"][7:]) as conn,
        ):
            await conn.send(
                Run(request_id="r1", session_id=SESSION, input="parent", window_hash="w1")
            )
            task_hash, first = await next_ask(conn)
            assert first.details is None or not first.details.interrupted
            await conn.send(Reply(id=first.id, approve=True, remember=True))
            await until_lines(marker, 1)
            paused = await http.post(f"/v1/session/{SESSION}/pause/{task_hash}")
            assert paused.json()["stopped"]["calls"] == ["run_command"]
            assert (await done_of(conn, "r1")).status == "paused"

            await conn.send(
                PendingFrame(
                    request_id="p1", session_id=SESSION, task_hash=task_hash, window_hash="w1"
                )
            )
            _, again = await next_ask(conn)
            assert (again.tool_name, again.tool_args["command"]) == ("run_command", command)
            assert again.details is not None
            assert again.details.interrupted == INTERRUPTED_CALL_NOTE
            shown = command_text(again)  # the chat bots' text; the REPL draws the same lines
            assert shown.splitlines()[0] == f"interrupted: {INTERRUPTED_CALL_NOTE}"
            assert plain_text(confirm_lines(again.tool_args, None, INTERRUPTED_CALL_NOTE)) == shown
            await conn.send(Reply(id=again.id, approve=False, reason="it may have run"))
            assert (await done_of(conn, "p1")).status == "finished"
    assert marker.read_text().splitlines() == ["ran"]  # the denied repeat never ran
    assert model.results[-1].startswith("not run: denied")


async def test_a_call_paused_at_its_confirmation_never_ran_and_is_asked_plainly(
    tmp_path: Path,
) -> None:
    """R6, R41 (issue 34 item 5): paused while its confirmation was open, the call never
    ran (``ran`` false in its snapshot): the resumed task's repeat is asked with no
    "may have partly run" note, and approved it runs once."""
    marker = tmp_path / "ran.txt"
    model = RepeatModel(f"echo ran >> {shlex.quote(str(marker))}")
    with trio.fail_after(60):
        async with (
            served_with(tmp_path / "home", model) as (ws_url, http),
            open_frame_connection(ws_url, http.headers["Authorization"][7:]) as conn,
        ):
            await conn.send(
                Run(request_id="r1", session_id=SESSION, input="parent", window_hash="w1")
            )
            task_hash, first = await next_ask(conn)
            paused = await http.post(f"/v1/session/{SESSION}/pause/{task_hash}")
            assert paused.json()["stopped"]["asks_withdrawn"] == [first.id]
            await done_of(conn, "r1")
            assert not marker.exists()
            await conn.send(
                PendingFrame(
                    request_id="p1", session_id=SESSION, task_hash=task_hash, window_hash="w1"
                )
            )
            _, again = await next_ask(conn)
            assert again.details is None or not again.details.interrupted
            await conn.send(Reply(id=again.id, approve=True))
            assert (await done_of(conn, "p1")).status == "finished"
    assert marker.read_text().splitlines() == ["ran"]
