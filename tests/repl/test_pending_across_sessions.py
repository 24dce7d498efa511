"""The REPL keeps paused work in sight across its sessions (issue 17 item 6, R41, R42).

Each start of the REPL is a new ``cli-`` session, so the REPL asks for the pending work
of its *origin*: at start it says how many tasks wait, ``/pending`` lists them with
their session and age, and resuming one of another session continues in that session.
"""

from __future__ import annotations

import time

from agentrio.protocol.frames import (
    ListLegs,
    ListPending,
    OpenWindow,
    PendingFrame,
    PendingList,
    PendingTaskInfo,
)
from agentrio.repl.lists import age_text, origin_of
from agentrio.repl.messages import Connected, HttpCall
from agentrio.repl.state import ReplState
from tests.repl.helpers import SESSION, connected_state

OTHER = "cli-99887766"


def task(
    task_hash: str, session_id: str, age_s: float, *, question: bool = False
) -> PendingTaskInfo:
    return PendingTaskInfo(
        task_hash=task_hash,
        objective=f"objective {task_hash[:4]}",
        has_questions=question,
        questions=[],
        updated_at=time.time() - age_s,
        has_jobs=False,
        session_id=session_id,
    )


def by_origin(*tasks: PendingTaskInfo) -> PendingList:
    return PendingList(session_id="", origin="cli-", tasks=list(tasks))


def test_origin_and_age_helpers() -> None:
    assert origin_of("cli-0a1b") == "cli-"
    assert origin_of("chat-x-y") == "chat-"
    assert origin_of("plain") == ""
    assert origin_of("-x") == ""
    assert [age_text(s) for s in (-3, 0, 59, 60, 3_599, 3_600, 86_400 * 2)] == [
        "0s",
        "0s",
        "59s",
        "1m",
        "59m",
        "1h",
        "2d",
    ]


def test_start_says_how_many_tasks_wait() -> None:
    """R41, R42: the first connect asks for the origin's pending work and says, once,
    how many tasks wait; a later list says nothing unasked."""
    sent: list[object] = []
    state = ReplState(session_id=SESSION, window_hash="w1", send=sent.append)
    state.handle(Connected(url="http://h:1", daemon_version="0.1.0"))
    assert sent == [
        OpenWindow(session_id=SESSION, window_hash="w1"),
        ListLegs(session_id=SESSION),
        ListPending(origin="cli-"),
    ]
    state.handle(by_origin(task("a" * 32, OTHER, 120), task("b" * 32, OTHER, 30)))
    assert state.output[-1] == (
        "class:warn",
        "2 paused tasks wait in your cli- sessions — /pending lists them, /pending N resumes one",
    )
    lines = len(state.output)
    state.handle(by_origin(task("a" * 32, OTHER, 120)))
    assert len(state.output) == lines


def test_start_with_nothing_waiting_says_nothing() -> None:
    state, _ = connected_state()
    lines = len(state.output)
    state.handle(by_origin())
    assert len(state.output) == lines


def test_pending_lists_session_and_age() -> None:
    """R42: /pending lists the origin's tasks with their session (or "this session")
    and how long ago they stopped."""
    state, sent = connected_state()
    state.submit("/pending")
    assert sent == [ListPending(origin="cli-")]
    state.handle(by_origin(task("a" * 32, SESSION, 5, question=True), task("b" * 32, OTHER, 7_200)))
    assert [t for _, t in state.output[-2:]] == [
        "  1. aaaaaaaa  this session  5s ago  objective aaaa [question]",
        f"  2. bbbbbbbb  {OTHER}  2h ago  objective bbbb",
    ]
    state.submit("/pending")
    state.handle(by_origin())
    assert state.output[-1] == ("class:dim", "no pending tasks in your cli- sessions")


def test_a_list_of_another_origin_is_ignored() -> None:
    state, _ = connected_state()
    state.submit("/pending")
    state.handle(PendingList(session_id="", origin="chat-", tasks=[task("c" * 32, "chat-1", 1)]))
    assert state.pending_tasks == []


def test_resume_of_another_session_continues_there() -> None:
    """R42: resuming a task of an earlier session sends ``pending`` for that session
    and makes it the REPL's session; dropping one names its session."""
    state, sent = connected_state()
    state.submit("/pending")
    state.handle(by_origin(task("a" * 32, OTHER, 60), task("b" * 32, OTHER, 90)))
    sent.clear()
    state.submit("/pending drop 2")
    assert sent == [
        HttpCall(
            method="DELETE",
            path=f"/v1/session/{OTHER}/task/{'b' * 32}",
            purpose="drop",
            ref="b" * 32,
        )
    ]
    sent.clear()
    state.submit("/pending 1")
    legs, frame = sent
    assert legs == ListLegs(session_id=OTHER)
    assert isinstance(frame, PendingFrame)
    assert (frame.session_id, frame.task_hash, frame.window_hash) == (OTHER, "a" * 32, "w1")
    assert state.session_id == OTHER
    assert ("class:dim", f"continuing in session {OTHER}") in state.output


def test_resume_of_another_session_waits_for_the_running_task() -> None:
    """A run shown here steers and cancels in this session: switching is refused."""
    state, sent = connected_state()
    state.submit("/pending")
    state.handle(by_origin(task("a" * 32, OTHER, 60)))
    state.submit("run: sleep 5")
    sent.clear()
    state.submit("/pending 1")
    assert sent == []
    assert state.session_id == SESSION
    assert state.notice is not None
    assert "wait for it" in state.notice
