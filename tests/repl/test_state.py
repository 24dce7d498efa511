"""The REPL state as plain transitions: Esc chain, held cancel, popups, runs, commands.

SPEC §11, R5, R7, R40–R47. Frames go to a list; every test asserts the exact frames.
"""

from __future__ import annotations

import attrs

from agentrio.protocol import wording
from agentrio.protocol.causes import Cause
from agentrio.protocol.events import (
    Canceled,
    Done,
    Failed,
    LegFinished,
    LegStarted,
    Question,
    TaskStarted,
    Text,
    ToolCall,
    ToolResult,
)
from agentrio.protocol.frames import (
    BackgroundCancel,
    Cancel,
    ErrorFrame,
    ListLegs,
    ListPending,
    OpenWindow,
    PendingFrame,
    PendingList,
    PendingTaskInfo,
    Reply,
    Run,
    Steer,
    Verify,
    Withdrawn,
)
from agentrio.protocol.stops import StoppedLeg, StopReceipt
from agentrio.repl.commands import ConfirmChoice
from agentrio.repl.messages import Connected, Disconnected, HttpCall, HttpResult, Status
from agentrio.repl.state import ReplState
from agentrio.repl.views import EscAction, Popup
from tests.repl.helpers import (
    HASH,
    SESSION,
    accepted,
    ask_confirm,
    ask_questions,
    connected_state,
    done,
    event,
    leg_list,
)


def start_run(state: ReplState, sent: list[object], text: str = "run: echo hello") -> str:
    state.submit(text)
    frame = sent.pop()
    assert isinstance(frame, Run)
    return frame.request_id


def test_connect_lists_legs_and_pending() -> None:
    """R47, R42: on connect the state asks for the session's legs and pending tasks."""
    sent: list[object] = []
    state = ReplState(session_id=SESSION, window_hash="w1", send=sent.append)
    assert state.connection == "connecting"
    state.handle(Connected(url="http://h:1", daemon_version="0.1.0"))
    assert state.connection == "connected"
    assert sent == [
        OpenWindow(session_id=SESSION, window_hash="w1"),
        ListLegs(session_id=SESSION),
        ListPending(origin="cli-"),
    ]
    assert "connected to agentrio daemon 0.1.0" in state.output[-1][1]


def test_submit_sends_run_with_window_hash() -> None:
    """R5: a run carries this window's hash and the cli- session."""
    state, sent = connected_state()
    state.submit("run: echo hello")
    (frame,) = sent
    assert isinstance(frame, Run)
    assert (frame.session_id, frame.input, frame.window_hash) == (
        SESSION,
        "run: echo hello",
        "w1",
    )
    assert state.runs[frame.request_id].input == "run: echo hello"
    assert state.output[-1] == ("class:user", "> run: echo hello")


def test_input_while_running_steers() -> None:
    """R35: text typed while this window's task runs is a steer of that task."""
    state, sent = connected_state()
    rid = start_run(state, sent)
    state.handle(accepted(rid))
    state.submit("use staging")
    assert sent == [Steer(session_id=SESSION, task_hash=HASH, input="use staging")]


def test_not_connected_sends_nothing() -> None:
    """R43: nothing is queued for a connection that is not there."""
    sent: list[object] = []
    state = ReplState(session_id=SESSION, window_hash="w1", send=sent.append)
    state.submit("hello")
    assert sent == []
    assert state.runs == {}
    assert state.notice is not None
    assert "not connected" in state.notice


# ---------------------------------------------------------------- Esc chain (R47)


def test_esc_closes_picker_first() -> None:
    """R47: an open / picker closes before anything else happens."""
    state, sent = connected_state()
    state.notice = "n"
    start_run(state, sent)
    assert state.esc(picker_open=True, input_text="/p") is EscAction.CLOSE_PICKER
    assert state.notice == "n"
    assert sent == []


def test_esc_closes_notice_second() -> None:
    """R47: the notice box closes before the run is touched."""
    state, sent = connected_state()
    start_run(state, sent)
    state.notice = "something"
    assert state.esc(picker_open=False, input_text="x") is EscAction.CLOSE_NOTICE
    assert state.notice is None
    assert sent == []


def test_esc_cancels_at_once_when_nothing_shown() -> None:
    """R47, R40: a run that has shown nothing is cancelled at once (user_canceled)."""
    state, sent = connected_state()
    rid = start_run(state, sent)
    state.handle(accepted(rid))
    state.handle(event(TaskStarted(seq=1, at=0.0, input="x", origin="cli-")))
    assert state.esc(picker_open=False, input_text="typed") is EscAction.CANCEL_NOW
    assert sent == [Cancel(task_hash=HASH, cause=Cause.USER_CANCELED)]
    assert state.popup is None


def test_esc_before_accepted_holds_the_cancel() -> None:
    """R46: a cancel requested before the task hash is known is sent once it arrives."""
    state, sent = connected_state()
    rid = start_run(state, sent)
    assert state.esc(picker_open=False, input_text="") is EscAction.CANCEL_NOW
    assert sent == []
    assert state.runs[rid].held_cancel is False
    state.handle(accepted(rid))
    assert sent == [Cancel(task_hash=HASH, cause=Cause.USER_CANCELED)]
    assert state.runs[rid].held_cancel is None
    state.handle(accepted(rid))
    assert sent == [Cancel(task_hash=HASH, cause=Cause.USER_CANCELED)]


def test_ctrl_c_before_accepted_holds_the_cancel() -> None:
    """R46: Ctrl+C before the first task hash is held too."""
    state, sent = connected_state()
    rid = start_run(state, sent)
    assert state.ctrl_c(input_text="") is EscAction.CANCEL_NOW
    assert sent == []
    state.handle(accepted(rid))
    assert sent == [Cancel(task_hash=HASH, cause=Cause.USER_CANCELED)]


def test_held_pause_is_sent_as_pause() -> None:
    """R46, R41: a held pause goes out as cancel{pause: true}."""
    state, sent = connected_state()
    rid = start_run(state, sent)
    state.request_cancel(state.runs[rid], pause=True)
    state.handle(accepted(rid))
    assert sent == [Cancel(task_hash=HASH, cause=Cause.PAUSED)]


def shown_run(state: ReplState, sent: list[object]) -> str:
    rid = start_run(state, sent)
    state.handle(accepted(rid))
    state.handle(event(Text(seq=2, at=0.0, text="Running")))
    return rid


def test_esc_opens_popup_once_something_was_shown() -> None:
    """R47: a run that has shown output is stopped through the stop menu ("Keep running",
    "Stop, keep to resume", "Stop and discard")."""
    state, sent = connected_state()
    rid = shown_run(state, sent)
    assert state.esc(picker_open=False, input_text="") is EscAction.CANCEL_POPUP
    assert state.popup is not None
    assert (state.popup.kind, state.popup.choices, state.popup.target) == (
        "cancel",
        (wording.ESC_KEEP_RUNNING, wording.STOP_KEEP, wording.STOP_DISCARD),
        rid,
    )
    assert sent == []


def test_popup_no_pause_yes() -> None:
    """R47, R40, R41: "Keep running" sends nothing, "Stop, keep to resume" sends
    cancel{pause:true}, "Stop and discard" cancel{pause:false}."""
    for index, expected in [
        (0, []),
        (1, [Cancel(task_hash=HASH, cause=Cause.PAUSED)]),
        (2, [Cancel(task_hash=HASH, cause=Cause.USER_CANCELED)]),
    ]:
        state, sent = connected_state()
        shown_run(state, sent)
        state.esc(picker_open=False, input_text="")
        state.choose(index)
        assert sent == expected, index
        assert state.popup is None


def test_esc_after_cancel_requested_moves_on() -> None:
    """R47: once a run's cancel is on its way, Esc goes on down the chain."""
    state, sent = connected_state()
    shown_run(state, sent)
    state.esc(picker_open=False, input_text="")
    state.choose(2)
    sent.clear()
    assert state.esc(picker_open=False, input_text="abc") is EscAction.CLEAR_INPUT
    assert sent == []


def test_esc_clears_input_when_no_run() -> None:
    """R47: with no run, Esc clears the input (even when legs run)."""
    state, _sent = connected_state()
    state.handle(leg_list(("cmd_00000001", "make")))
    assert state.esc(picker_open=False, input_text="abc") is EscAction.CLEAR_INPUT
    assert state.popup is None


def test_esc_opens_leg_menu_single_leg() -> None:
    """R47, R44: No and the leg; no All with one leg; then a confirmation."""
    state, sent = connected_state()
    state.handle(leg_list(("cmd_00000001", "make build")))
    assert state.esc(picker_open=False, input_text="") is EscAction.LEG_MENU
    assert state.popup is not None
    assert state.popup.kind == "legs"
    assert state.popup.choices == ("No", "cmd_00000001  make build (running)")
    state.choose(1)
    assert state.popup == Popup(
        kind="leg_confirm",
        title="Cancel background leg cmd_00000001 (make build)?",
        choices=("No", "Yes"),
        target="cmd_00000001",
    )
    assert sent == []
    state.choose(1)
    assert sent == [BackgroundCancel(session_id=SESSION, leg_id="cmd_00000001")]


def test_leg_menu_all_with_two_legs() -> None:
    """R47, R44: All appears with two or more legs and cancels every leg after confirming."""
    state, sent = connected_state()
    state.handle(leg_list(("cmd_00000001", "a"), ("sub_00000002", "b")))
    state.esc(picker_open=False, input_text="")
    assert state.popup is not None
    assert state.popup.choices[-1] == "All (2 legs)"
    state.choose(3)
    assert state.popup is not None
    assert state.popup.target == "all"
    state.choose(1)
    assert sent == [BackgroundCancel(session_id=SESSION, leg_id="all")]


def test_leg_menu_no_and_confirm_no_send_nothing() -> None:
    """R47: No in the menu and No in the confirmation send nothing."""
    state, sent = connected_state()
    state.handle(leg_list(("cmd_00000001", "a"), ("sub_00000002", "b")))
    state.esc(picker_open=False, input_text="")
    state.choose(0)
    assert state.popup is None
    state.esc(picker_open=False, input_text="")
    state.choose(2)
    state.choose(0)
    assert state.popup is None
    assert sent == []


def test_esc_nothing() -> None:
    """R47: with nothing to do, Esc does nothing."""
    state, sent = connected_state()
    assert state.esc(picker_open=False, input_text="") is EscAction.NOTHING
    assert sent == []


def test_ctrl_c_cancels_shown_run_without_popup() -> None:
    """R40: Ctrl+C is user_canceled at once, even after output, closing any popup."""
    state, sent = connected_state()
    shown_run(state, sent)
    state.esc(picker_open=False, input_text="")
    assert state.ctrl_c(input_text="") is EscAction.CANCEL_NOW
    assert sent == [Cancel(task_hash=HASH, cause=Cause.USER_CANCELED)]
    assert state.popup is None


def test_ctrl_c_without_run() -> None:
    """SPEC §11: Ctrl+C with no run clears the input, or asks for a second one to quit
    (tests/repl/test_keys.py: the second quits)."""
    state, sent = connected_state()
    assert state.ctrl_c(input_text="abc", now=0.0) is EscAction.CLEAR_INPUT
    assert state.ctrl_c(input_text="", now=1.0) is EscAction.NOTHING
    assert state.hint is not None
    assert state.hint[0].startswith("press Ctrl+C again to quit")
    assert not state.quit_requested
    assert sent == []


def test_legs_follow_events() -> None:
    """R44: legs appear on leg_started and leave on leg_finished."""
    state, sent = connected_state()
    rid = shown_run(state, sent)
    state.handle(
        event(LegStarted(seq=3, at=1.0, job_id="job_1", leg_id="cmd_1", label="sleep", queued=True))
    )
    assert state.legs["cmd_1"].state == "queued"
    state.handle(
        event(
            LegFinished(seq=4, at=2.0, job_id="job_1", leg_id="cmd_1", status="canceled", result="")
        )
    )
    assert state.legs == {}
    assert rid in state.runs


# ---------------------------------------------------------------- runs


def test_stream_and_done() -> None:
    """SPEC §11: text streams by line, tool calls and results show compactly."""
    state, sent = connected_state()
    rid = start_run(state, sent)
    state.handle(accepted(rid))
    state.handle(event(Text(seq=2, at=0.0, text="Run")))
    assert state.runs[rid].partial == "Run"
    state.handle(event(Text(seq=3, at=0.0, text="ning.\nnext")))
    state.handle(
        event(
            ToolCall(
                seq=4, at=0.0, call_id="c", tool_name="run_command", args={"command": "echo hello"}
            )
        )
    )
    output = "exit 0\n" + "".join(f"line {i}\n" for i in range(20))
    state.handle(
        event(
            ToolResult(seq=5, at=0.0, call_id="c", tool_name="run_command", ok=True, output=output)
        )
    )
    state.handle(event(Done(seq=6, at=0.0, text="Running.\nnext")))
    state.handle(done(rid))
    lines = [text for _, text in state.output[-13:]]
    assert lines == [
        "Running.",
        "next",
        "⚙ run_command: echo hello",
        "  ✓ run_command",
        "    exit 0",
        *[f"    line {i}" for i in range(7)],
        "    … 13 more lines (folded: /expand shows them)",
    ]
    assert state.runs == {}
    assert sent == [ListLegs(session_id=SESSION)]


def test_done_text_shown_when_nothing_streamed() -> None:
    """SPEC §11: a final reply that did not stream is shown from the done event."""
    state, sent = connected_state()
    rid = start_run(state, sent)
    state.handle(accepted(rid))
    state.handle(event(Done(seq=6, at=0.0, text="All done")))
    assert state.output[-1] == ("", "All done")


def test_done_statuses() -> None:
    """R41, R42: paused/parked/aborted runs point at /pending and refresh the list."""
    for status, line in [
        ("paused", "‖ paused — kept: resume it with /pending"),
        ("parked", "? waits for answers — answer it with /pending"),
        ("aborted", "‖ stopped: disconnected — kept: resume it with /pending"),
    ]:
        state, sent = connected_state()
        rid = start_run(state, sent)
        state.handle(accepted(rid))
        state.handle(done(rid, status, "disconnected" if status == "aborted" else ""))
        assert state.output[-1][1] == line
        assert sent == [ListLegs(session_id=SESSION), ListPending(origin="cli-")]


def test_canceled_event_is_not_repeated_by_done() -> None:
    """R40: the canceled event says it once; done adds no second line."""
    state, sent = connected_state()
    rid = start_run(state, sent)
    state.handle(accepted(rid))
    state.handle(event(Canceled(seq=2, at=0.0, cause="user_canceled", kept=False)))
    count = len(state.output)
    state.handle(done(rid, "canceled"))
    assert len(state.output) == count
    assert state.output[-1] == ("class:warn", "✗ stopped and discarded")


def test_a_stopped_runs_done_prints_what_the_stop_ended() -> None:
    """R44, R48 (issue 34 item 4): the ``done`` of a stopped run carries its receipt,
    printed under the end line; a receipt with a group still alive says so."""
    state, sent = connected_state()
    rid = start_run(state, sent)
    state.handle(accepted(rid))
    state.handle(event(Canceled(seq=2, at=0.0, cause="paused", kept=True)))
    leg = StoppedLeg(
        leg_id="cmd_1a2b3c4d", kind="cmd", label="sleep 600", status="canceled", process_groups=[7]
    )
    receipt = StopReceipt(
        cause="paused", legs=[leg], subagents=["sub-agent 1/1: x"], process_groups=[7]
    )
    state.handle(attrs.evolve(done(rid, "paused"), stopped=receipt))
    assert state.output[-2:] == [
        ("class:warn", wording.ended_line("paused")),
        (
            "class:dim",
            "■ ended with it: 1 background leg (cmd_1a2b3c4d), 1 sub-agent, 1 process group"
            " — nothing left running",
        ),
    ]
    alive = attrs.evolve(receipt, still_alive=[7])
    assert wording.stop_receipt_line(alive).endswith("— still alive: process group 7")
    assert wording.stop_receipt_line(StopReceipt(cause="paused")) == "■ nothing else was running"


def test_done_closes_its_popup_and_asks() -> None:
    """R3, R47: a run that ends takes its cancel popup and open asks with it."""
    state, sent = connected_state()
    rid = shown_run(state, sent)
    state.handle(ask_confirm())
    state.esc(picker_open=False, input_text="")
    state.handle(done(rid, "failed", "boom"))
    assert state.popup is None
    assert state.asks == {}
    assert state.output[-1] == ("class:error", "✗ failed: boom")


def test_disconnect_ends_runs_and_reconnect_says_so() -> None:
    """R43, SPEC §11: a lost connection ends this window's runs (kept in /pending) and a
    reconnect tells the user."""
    state, sent = connected_state()
    shown_run(state, sent)
    state.handle(ask_confirm())
    state.handle(leg_list(("cmd_1", "x")))
    state.handle(Disconnected(reason="daemon went away"))
    assert state.connection == "reconnecting"
    assert (state.runs, state.asks, state.legs) == ({}, {}, {})
    assert state.output[-1] == (
        "class:error",
        "lost the daemon connection (daemon went away); 1 running task kept in /pending "
        "— reconnecting…",
    )
    state.handle(Connected(url="http://h:2", daemon_version="0.1.0", reconnect=True))
    assert state.connection == "connected"
    assert state.output[-1][1].startswith("reconnected to the daemon at http://h:2 — the tasks cut")
    assert "/pending" in state.output[-1][1]


def test_status_lines() -> None:
    """SPEC §11: daemon start and connection problems are shown."""
    state, _ = connected_state()
    state.handle(Status(text="started one, its log: /h/daemon.log"))
    state.handle(Status(text="cannot reach", error=True))
    assert state.output[-2:] == [
        ("class:dim", "started one, its log: /h/daemon.log"),
        ("class:error", "cannot reach"),
    ]


# ---------------------------------------------------------------- asks


def test_asks_queue_and_withdraw() -> None:
    """R3, R5: asks queue in arrival order; withdrawn closes one."""
    state, _sent = connected_state()
    state.handle(ask_confirm("k1"))
    state.handle(ask_confirm("k2"))
    assert state.current_ask() is not None
    assert state.current_ask().id == "k1"
    state.handle(Withdrawn(id="k1", reason="task canceled"))
    assert list(state.asks) == ["k2"]
    assert state.output[-1] == ("class:dim", "  question withdrawn: task canceled")
    state.handle(Withdrawn(id="nope", reason="x"))
    assert list(state.asks) == ["k2"]


def test_answer_confirm_and_questions() -> None:
    """R1, R10: answers send one reply and close the ask; secrets are not echoed."""
    state, sent = connected_state()
    state.handle(ask_confirm("k1"))
    state.answer_confirm("k1", ConfirmChoice.DENY, reason="no")
    assert sent == [Reply(id="k1", approve=False, reason="no")]
    state.answer_confirm("k1", ConfirmChoice.APPROVE)
    assert len(sent) == 1
    state.handle(ask_questions([Question(text="token?", secret=True)], kind="secret"))
    state.answer_questions("q1", ["s3cret"])
    assert sent[-1] == Reply(id="q1", answers=["s3cret"])
    assert all("s3cret" not in text for _, text in state.output)


def test_an_answer_to_a_sub_agent_names_it() -> None:
    """R80 (issue 19): approving a sub-agent's call, or answering its question, says
    which sub-agent it went to (the ask's ``subagent`` label)."""
    state, _ = connected_state()
    label = "sub-agent 1/2: run: touch /tmp/x"
    state.handle(attrs.evolve(ask_confirm("k1"), subagent=label))
    state.answer_confirm("k1", ConfirmChoice.APPROVE)
    assert state.output[-1] == ("class:dim", f"  → Approve (run_command, {label})")
    state.handle(attrs.evolve(ask_questions([Question(text="Which?")]), subagent=label))
    state.answer_questions("q1", ["main"])
    assert state.output[-1] == ("class:dim", f"  → Which?: main ({label})")
    state.handle(ask_confirm("k2"))
    state.answer_confirm("k2", ConfirmChoice.APPROVE)
    assert state.output[-1] == ("class:dim", "  → Approve (run_command)")


def test_verify() -> None:
    """R7: the password check result is shown; a failure also in the notice box."""
    state, _ = connected_state()
    state.handle(Verify(id="k1", ok=True))
    assert state.output[-1] == ("class:ok", "  ✓ password accepted")
    state.handle(Verify(id="k1", ok=False, error="wrong password"))
    assert state.notice == "password check failed: wrong password — call denied"


def test_error_frame_goes_to_notice() -> None:
    """R71: daemon error frames are shown in the notice box."""
    state, _ = connected_state()
    state.handle(ErrorFrame(code="forbidden", message="not your task"))
    assert state.notice == "daemon error (forbidden): not your task"


# ---------------------------------------------------------------- commands


def pending_list(*hashes: str) -> PendingList:
    return PendingList(
        session_id=SESSION,
        tasks=[
            PendingTaskInfo(
                task_hash=h,
                objective=f"objective {h[:4]}",
                has_questions=i == 0,
                questions=[],
                updated_at=0.0,
                has_jobs=False,
            )
            for i, h in enumerate(hashes)
        ],
    )


def test_pending_list_resume_and_drop() -> None:
    """R42: /pending lists, /pending N resumes in this window, /pending drop N deletes."""
    state, sent = connected_state()
    state.submit("/pending 1")
    assert sent == []
    assert state.notice == "no pending tasks listed: type /pending first"
    state.submit("/pending")
    assert sent == [ListPending(origin="cli-")]
    a, b = "a" * 32, "b" * 32
    state.handle(pending_list(a, b))
    assert [t for _, t in state.output[-2:]] == [
        "  1. aaaaaaaa  objective aaaa [question]",
        "  2. bbbbbbbb  objective bbbb",
    ]
    sent.clear()
    state.submit("/pending 2")
    (frame,) = sent
    assert isinstance(frame, PendingFrame)
    assert (frame.session_id, frame.task_hash, frame.window_hash, frame.answers) == (
        SESSION,
        b,
        "w1",
        None,
    )
    assert frame.request_id in state.runs
    sent.clear()
    state.submit("/pending drop aaaa")
    assert sent == [
        HttpCall(method="DELETE", path=f"/v1/session/{SESSION}/task/{a}", purpose="drop", ref=a)
    ]
    state.handle(HttpResult(call=sent[0], status=204))  # type: ignore[arg-type]
    assert state.pending_tasks == []
    assert state.output[-1] == ("class:dim", "dropped pending task aaaaaaaa")


def test_pending_says_why_a_task_whose_model_failed_was_kept() -> None:
    """Issue 31 (6): a task kept because its model kept failing is listed with why,
    on its own line under it; the others have no such line."""
    state, _ = connected_state()
    state.submit("/pending")
    a, b = "a" * 32, "b" * 32
    listing = pending_list(a, b)
    failed = attrs.evolve(listing.tasks[1], failure="model error: HTTP 503 (gave up after 4 tries)")
    state.handle(attrs.evolve(listing, tasks=[listing.tasks[0], failed]))
    assert state.output[-3:] == [
        ("", "  1. aaaaaaaa  objective aaaa [question]"),
        ("", "  2. bbbbbbbb  objective bbbb"),
        ("class:error", "     stopped: model error: HTTP 503 (gave up after 4 tries)"),
    ]


def test_a_kept_failure_reads_as_kept() -> None:
    """Issue 31 (6): a ``failed`` event with ``kept`` says where the task waits."""
    state, sent = connected_state()
    shown_run(state, sent)
    state.handle(event(Failed(seq=3, at=0.0, error="model error: boom", kept=True)))
    assert state.output[-1] == (
        "class:error",
        "✗ failed: model error: boom — kept: resume it with /pending",
    )


def test_pending_bad_refs() -> None:
    """R42: out-of-range indexes and unknown hashes are reported."""
    state, sent = connected_state()
    state.handle(pending_list("a" * 32, "ab" + "0" * 30))
    state.submit("/pending 3")
    assert state.notice == "no pending task 3: choose 1-2"
    state.submit("/pending a")
    assert state.notice == "more than one pending task matches a"
    state.submit("/pending c")
    assert state.notice == "no pending task matches c"
    assert sent == []


def test_drop_conflict_shows_error_body() -> None:
    """R37: a drop of a running task shows the daemon's message."""
    state, _ = connected_state()
    call = HttpCall(method="DELETE", path="/x", purpose="drop", ref="a" * 32)
    body = {"error": {"code": "conflict", "message": "[Conflict] pending task: running"}}
    state.handle(HttpResult(call=call, status=409, body=body))
    assert state.notice == "[Conflict] pending task: running"
    state.handle(HttpResult(call=call, status=0, error="connection refused"))
    assert state.notice == "request failed: connection refused"


def test_history() -> None:
    """SPEC §11: /history WORD asks the history route with the keyword and lists it."""
    state, sent = connected_state()
    state.submit("/history echo")
    call = HttpCall(
        method="GET",
        path=f"/v1/session/{SESSION}/task/history",
        params={"limit": "20", "keyword": "echo"},
        purpose="history",
        ref="echo",
    )
    assert sent == [call]
    body = {
        "tasks": [
            {
                "task_hash": HASH,
                "end_at": 0.0,
                "objective": "run: echo hello",
                "model": "builtin",
                "reasoning": "",
                "status": "finished",
            }
        ]
    }
    state.handle(HttpResult(call=call, status=200, body=body))
    assert (
        state.output[-2][1] == "recent tasks matching 'echo' (/history show N opens one's record):"
    )
    assert state.output[-1][1].endswith("3f2a9c0d  finished run: echo hello")
    state.handle(HttpResult(call=call, status=200, body={"tasks": []}))
    assert state.output[-1][1] == "no finished tasks matching 'echo'"


def test_legs_session_new_help_quit() -> None:
    """SPEC §11: /legs lists, /session shows ids, /new changes session, /quit quits."""
    state, sent = connected_state()
    state.submit("/legs")
    assert sent == [ListLegs(session_id=SESSION)]
    state.handle(leg_list(("cmd_1", "make")))
    assert state.output[-1][1].startswith("  cmd_1  running")
    state.submit("/session")
    assert state.output[-1][1].startswith(f"session {SESSION} · window w1 · model builtin")
    sent.clear()
    state.submit("/new")
    assert state.session_id != SESSION
    assert state.session_id.startswith("cli-")
    assert state.legs == {}
    assert sent == [ListLegs(session_id=state.session_id)]
    state.submit("/help")
    assert any(str(text).startswith("  Ctrl+C") for _, text in state.output)
    assert state.output[-1][1].startswith("  fail: MESSAGE")
    state.submit("/nope")
    assert state.notice is not None
    assert state.notice.startswith("unknown command /nope")
    assert not state.quit_requested
    state.submit("/quit")
    assert state.quit_requested


def test_lists_of_other_sessions_are_ignored() -> None:
    """R5: a listing for another session does not replace this one's."""
    state, _ = connected_state()
    state.handle(leg_list(("cmd_1", "make")))
    state.handle(pending_list("a" * 32))
    state.submit("/new")
    state.handle(leg_list(("cmd_2", "other")))
    assert state.legs == {}


def test_events_of_a_task_not_requested_here_stream_whole_lines() -> None:
    """R26: a background job's follow-up (no request of this window) is shown under one
    header, streamed text as one block, its done not repeating it."""
    from agentrio.protocol.events import Done, TaskStarted, Text

    state, _ = connected_state()
    other = "ab" * 16
    state.handle(event(TaskStarted(seq=1, at=0.0, input="[Resumed Task …]", origin="cli-"), other))
    start = len(state.output)
    for seq, piece in enumerate(["The work fin", "ished:\nexit ", "0\n", "done"], start=2):
        state.handle(event(Text(seq=seq, at=0.0, text=piece), other))
    state.handle(event(Done(seq=9, at=0.0, text="The work finished:\nexit 0\ndone"), other))
    assert state.output[start:] == [
        ("class:leg", "⧗ follow-up on the background work:"),
        ("", "The work finished:"),
        ("", "exit 0"),
        ("", "done"),
    ]


def test_allowed_lists_and_forgets_remembered_rules() -> None:
    """R76, R92, issue 29 finding 4: /allowed lists the home's remembered rules by what
    each covers (its ``covers`` words; an older daemon's rule by its command and real
    directory) and since when, newlines and invisible characters escaped; /allowed
    forget N sends the rule's id and says what the daemon removed, forget all every
    one."""
    import time

    from agentrio.protocol.frames import AllowedList, AllowedRule, ForgetAllowed, ListAllowed

    state, sent = connected_state()
    sent.clear()
    state.submit("/allowed")
    assert sent == [ListAllowed(session_id=SESSION)]
    rules = [
        AllowedRule(
            id="rule_0000000a",
            kind="command_prefix",
            command="npm test",
            cwd="/srv/a",
            added_at=1.0,
            covers="`npm test …` in /srv/a (any further arguments that name no path outside it)",
        ),
        AllowedRule(
            id="rule_0000000b", command="echo safe\ntouch x", cwd="/srv/\u202eb", added_at=2.0
        ),
        AllowedRule(id="rule_0000000c", command="make", added_at=3.0),
    ]
    state.handle(AllowedList(session_id=SESSION, rules=rules))

    def since(at: float) -> str:
        return f"       since {time.strftime('%Y-%m-%d %H:%M', time.localtime(at))}"

    assert [text for _, text in state.output[-6:]] == [
        "  1. `npm test …` in /srv/a (any further arguments that name no path outside it)",
        since(1.0),
        "  2. exactly `echo safe⟨\\n⟩touch x` in /srv/⟨\\u202e⟩b",
        since(2.0),
        "  3. `make` (no directory: covers nothing)",
        since(3.0),
    ]
    sent.clear()
    state.submit("/allowed forget 1")
    assert sent == [ForgetAllowed(session_id=SESSION, rule_id="rule_0000000a")]
    state.handle(AllowedList(session_id=SESSION, rules=rules[1:], removed=rules[:1]))
    assert [text for _, text in state.output[-6:-4]] == [
        f"forgot {rules[0].covers} — it asks again from now on",
        "always allowed in this home, kept across restarts (each rule covers only what it "
        "says; /allowed forget N removes one, /allowed forget all every one):",
    ]
    sent.clear()
    state.submit("/allowed forget all")
    assert sent == [ForgetAllowed(session_id=SESSION, rule_id="all")]
    state.handle(AllowedList(session_id=SESSION, rules=[], removed=rules[1:]))
    assert [text for _, text in state.output[-3:]] == [
        "forgot exactly `echo safe⟨\\n⟩touch x` in /srv/⟨\\u202e⟩b — it asks again from now on",
        "forgot `make` (no directory: covers nothing) — it asks again from now on",
        "no remembered rules: every command that needs one asks",
    ]
    sent.clear()
    state.submit("/allowed forget 7")
    assert sent == []
    assert state.notice == "no remembered rule 7: see /allowed"
    state.submit("/allowed nonsense")
    assert state.notice == "usage: /allowed [forget N | forget all]"


def test_a_refused_run_ends_without_a_done() -> None:
    """§8, R78: a ``run`` refused by an ``error`` naming it (a bad field, a window
    open elsewhere) gets no ``done``; the window stops waiting for it."""
    state, sent = connected_state()
    state.submit("run: echo hello")
    (frame,) = sent
    assert isinstance(frame, Run)
    state.handle(ErrorFrame(code="forbidden", message="window in use", ref=frame.request_id))
    assert frame.request_id not in state.runs


def test_model_command_chooses_and_the_toolbar_names_it() -> None:
    """Issue 31 (5): /model NAME sends set_model for the session; the answer names the
    model in the status bar and lists the choices, the chosen one marked."""
    from agentrio.protocol.frames import ModelChoice, ModelInfo, SetModel
    from agentrio.repl.toolbar import toolbar_fragments

    state, sent = connected_state()
    sent.clear()
    state.submit("/model fast")
    assert sent == [SetModel(session_id=SESSION, name="fast")]
    choices = [ModelChoice(name="default", model="gpt-5"), ModelChoice(name="fast", model="haiku")]
    state.handle(ModelInfo(session_id=SESSION, name="fast", model="haiku", choices=choices))
    assert state.model == "fast: haiku"
    assert any("fast: haiku" in text for _, text in toolbar_fragments(state))
    assert [text for _, text in state.output[-3:]] == [
        "model fast: haiku for this session's next tasks; the choices:",
        "    default  gpt-5",
        "  ● fast  haiku",
    ]
    state.handle(ModelInfo(session_id="cli-other", name="default", model="gpt-5", choices=choices))
    assert state.model == "fast: haiku"
