"""Acknowledged control frames on ``/v1/ws`` (§8, R2, R8, R35, R44, R46, R71, R76).

A control frame with a ``request_id`` gets exactly one answer naming it — ``ok``, its
list frame, or an ``error`` with that ``ref`` — after it was handled; without one the
daemon answers as protocol 1 always did.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import trio

from agentrio.protocol.events import Done, TaskStarted
from agentrio.protocol.frames import (
    Accepted,
    AllowedList,
    Ask,
    BackgroundCancel,
    Cancel,
    DoneFrame,
    ErrorFrame,
    EventFrame,
    ForgetAllowed,
    LegList,
    ListAllowed,
    Listen,
    ListLegs,
    ListPending,
    Ok,
    PendingList,
    Reply,
    Run,
    ServerFrame,
    Steer,
    Subscribe,
)
from agentrio.transport import FrameConnection
from tests.engine.server.conftest import Served, receive_type, receive_until_done

HASH = "0123456789abcdef0123456789abcdef"


async def answer_to(conn: FrameConnection, request_id: str) -> ServerFrame:
    """The one frame that names ``request_id`` (events and asks in between skipped)."""
    while True:
        frame = await conn.receive()
        if getattr(frame, "request_id", None) == request_id or (
            isinstance(frame, ErrorFrame) and frame.ref == request_id
        ):
            return frame


async def test_queries_answer_with_their_list_frame_naming_the_request(served: Served) -> None:
    """§8, R22, R45, R76: ``list_pending``, ``list_legs``, ``list_allowed`` and
    ``forget_allowed`` with a ``request_id`` are answered by their list frame carrying
    it, and by nothing else."""
    queries: list[tuple[Any, type]] = [
        (ListPending(session_id="cli-q", request_id="q1"), PendingList),
        (ListLegs(session_id="cli-q", request_id="q2"), LegList),
        (ListAllowed(session_id="cli-q", request_id="q3"), AllowedList),
        (ForgetAllowed(session_id="cli-q", rule_id="all", request_id="q4"), AllowedList),
    ]
    async with served.connect() as conn:
        for frame, expected in queries:
            await conn.send(frame)
            answer = await conn.receive()
            assert isinstance(answer, expected), answer
            assert getattr(answer, "request_id", None) == frame.request_id
        await conn.send(ListLegs(session_id="cli-q", request_id="last"))
        assert await conn.receive() == LegList(session_id="cli-q", legs=[], request_id="last")


async def test_commands_answer_ok_after_they_were_handled(served: Served, tmp_path: Path) -> None:
    """§8, R2, R35, R44, R46: ``listen``, ``steer``, ``reply``, ``background_cancel``
    and ``cancel`` with a ``request_id`` each get one ``ok``; the steer and the reply
    have taken effect when it arrives, and the cancelled run still ends in its ``done``."""
    target = tmp_path / "acked"
    async with served.connect() as conn:
        await conn.send(Listen(prefix="chat-", request_id="l1"))
        assert await conn.receive() == Ok(request_id="l1")
        await conn.send(
            Run(request_id="r", session_id="cli-ok", input=f"run: touch {target}", window_hash="w")
        )
        accepted = await receive_type(conn, Accepted)
        assert isinstance(accepted, Accepted)
        ask = await receive_type(conn, Ask)
        assert isinstance(ask, Ask)
        await conn.send(
            Steer(session_id="cli-ok", task_hash=ask.task_hash, input="x", request_id="s")
        )
        assert await answer_to(conn, "s") == Ok(request_id="s")
        run = served.engine.find_run(accepted.task_hash, "cli-ok")
        assert run is not None
        assert list(run.steers) == ["x"]
        await conn.send(Reply(id=ask.id, approve=True, request_id="a"))
        assert await answer_to(conn, "a") == Ok(request_id="a")
        assert served.engine.registry.get(ask.id) is None
        await receive_until_done(conn, "r")
        assert target.exists()
        await conn.send(BackgroundCancel(session_id="cli-ok", leg_id="all", request_id="b"))
        assert await conn.receive() == Ok(request_id="b")
        await conn.send(
            Run(request_id="r2", session_id="cli-ok", input="run: sleep 30", allow_all=True)
        )
        sleeping = await receive_type(conn, Accepted)
        assert isinstance(sleeping, Accepted)
        await conn.send(Cancel(task_hash=sleeping.task_hash, request_id="c"))
        assert await answer_to(conn, "c") == Ok(request_id="c")
        done = (await receive_until_done(conn, "r2"))[-1]
    assert attrs.evolve(done, stopped=None) == DoneFrame(
        request_id="r2", task_hash=sleeping.task_hash, status="canceled"
    )


async def test_subscribe_ok_comes_before_the_replay(served: Served) -> None:
    """§8, R8 B: the ``ok`` of a ``subscribe`` says the subscription is in place; the
    replayed events follow it. Subscribing again is answered ``ok`` and replays nothing."""
    async with served.connect() as starter:
        await starter.send(Run(request_id="r", session_id="cli-sub", input="run: echo one"))
        frames = await receive_until_done(starter, "r")
    accepted = frames[0]
    assert isinstance(accepted, Accepted)
    async with served.connect() as conn:
        await conn.send(Subscribe(session_id="cli-sub", request_id="u"))
        assert await conn.receive() == Ok(request_id="u")
        first = await conn.receive()
        assert isinstance(first, EventFrame)
        assert (first.task_hash, type(first.event)) == (accepted.task_hash, TaskStarted)
        while not isinstance(first.event, Done):
            first = await conn.receive()
            assert isinstance(first, EventFrame)
        await conn.send(Subscribe(session_id="cli-sub", request_id="again"))
        assert await conn.receive() == Ok(request_id="again")


async def test_errors_name_the_request_id(served: Served) -> None:
    """R46, R71, §8: a control frame with a ``request_id`` that fails gets one
    ``error`` whose ``ref`` is that ``request_id`` (not the task hash or ask id)."""
    async with served.connect() as owner, served.connect() as other:
        await owner.send(
            Run(request_id="r", session_id="cli-e", input="run: sleep 30", allow_all=True)
        )
        accepted = await receive_type(owner, Accepted)
        assert isinstance(accepted, Accepted)
        cases: list[tuple[Any, str]] = [
            (Cancel(task_hash=accepted.task_hash, request_id="e1"), "forbidden"),
            (Steer(session_id="cli-e", task_hash=HASH, input="x", request_id="e2"), "not_found"),
            (Reply(id=HASH, approve=True, request_id="e3"), "gone"),
            (BackgroundCancel(session_id="cli-e", leg_id="cmd_1a2b3c4d", request_id="e4"), ""),
            (ForgetAllowed(session_id="cli-e", rule_id="rule_1a2b3c4d", request_id="e5"), ""),
            (ListPending(session_id="../x", request_id="e6"), "bad_request"),
        ]
        for frame, code in cases:
            await other.send(frame)
            error = await other.receive()
            assert isinstance(error, ErrorFrame), (frame, error)
            assert error.ref == frame.request_id
            assert error.code == (code or "not_found")
        await owner.send(Cancel(task_hash=accepted.task_hash))
        await receive_until_done(owner, "r")


async def test_without_request_id_nothing_but_errors_and_lists_answer(served: Served) -> None:
    """§8: frames without ``request_id`` are answered as in the first release: no
    ``ok``; the old barrier (a ``reply`` to an id that cannot exist) still gets an
    ``error`` whose ``ref`` is that id."""
    barrier = "agentrio-client-barrier-7"
    async with served.connect() as conn:
        await conn.send(Listen(prefix="chat-"))
        await conn.send(Subscribe(session_id="chat-quiet"))
        await conn.send(BackgroundCancel(session_id="chat-quiet", leg_id="all"))
        await conn.send(Reply(id=barrier))
        with trio.fail_after(5):
            error = await conn.receive()
        assert isinstance(error, ErrorFrame)
        assert error.ref == barrier
        await conn.send(ListLegs(session_id="chat-quiet"))
        assert await conn.receive() == LegList(session_id="chat-quiet", legs=[])
