"""engine/sessions.py: who owns a session, and what a dropped one keeps (R8 B, R11, R36,
R45, R76; issue 16 "Sessions have an owner").

The registry's clock is Trio's, so every idle time here passes under
``autojump_clock`` in no real time; the stores run inline (tests/engine/conftest.py),
so a store call is no thread wait the mock clock would jump across.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from pathlib import Path

import attrs
import pytest
import trio
import trio.testing

from agentrio.engine.assembly import open_engine
from agentrio.engine.config import Config, ServerConfig
from agentrio.engine.core import Engine
from agentrio.engine.models.base import Message, ModelReply, RetrySink, TextSink, ToolSpec
from agentrio.engine.nursery_tasks import Supervisor, TaskHandle
from agentrio.engine.pending import AskRequest
from agentrio.engine.rules import CommandSubject, command_rule
from agentrio.engine.sessions import SESSION_BYTES, SessionRegistry
from agentrio.protocol import events as ev
from agentrio.protocol.causes import Cause
from agentrio.protocol.events import Question

IDLE_S = 10.0


@attrs.define
class _Run:
    """A run as the session sees it (`agentrio.engine.sessions.LiveRun`)."""

    queued: bool = False


@attrs.define
class _Holder:
    """A `SessionHolder` whose held sessions the test sets."""

    held: set[str] = attrs.field(factory=set)

    def sessions_in_use(self) -> Collection[str]:
        return self.held


def _registry(holder: _Holder | None = None, idle_s: float = IDLE_S) -> SessionRegistry[_Run]:
    return SessionRegistry(
        clock=lambda: trio.current_time(), idle_s=idle_s, holders=[holder or _Holder()]
    )


# -- the registry alone -------------------------------------------------------------------


def test_an_idle_session_goes_after_two_looks_idle_s_apart() -> None:
    """A session is dropped once it was idle at two sweeps at least ``idle_s`` apart
    and not used in between; a use starts the count again."""
    sessions = _registry()
    sessions.session("chat-a")
    assert sessions.sweep(0.0) == 0  # first seen idle
    assert sessions.sweep(IDLE_S / 2) == 0
    sessions.session("chat-a")  # used: idle again from the next look
    assert sessions.sweep(IDLE_S) == 0
    assert sessions.sweep(2 * IDLE_S - 1) == 0
    assert sessions.sweep(2 * IDLE_S) == 1
    assert sessions.get("chat-a") is None
    assert sessions.statistics().dropped_total == 1
    assert len(sessions) == 0


def test_runs_subscribers_and_holders_keep_a_session() -> None:
    """R8 B, R11, R25: a session with a run, a subscriber, or a holder naming it (an
    open ask, a background job) is never idle; once they are gone it goes."""
    holder = _Holder(held={"cli-held"})
    sessions = _registry(holder)
    running = sessions.session("chat-run")
    running.runs["f" * 32] = _Run()
    watched = sessions.session("chat-sub")
    sessions.session("cli-held")
    with watched.hub.subscribe():
        for now in (0.0, IDLE_S, 3 * IDLE_S):
            assert sessions.sweep(now) == 0
    running.runs.clear()
    holder.held.clear()
    assert sessions.sweep(4 * IDLE_S) == 0
    assert sessions.sweep(5 * IDLE_S) == 3
    assert sessions.live() == []


def test_idle_zero_keeps_every_session() -> None:
    """``session_idle_s = 0`` turns dropping off."""
    sessions = _registry(idle_s=0.0)
    sessions.session("chat-a")
    assert [sessions.sweep(t) for t in (0.0, 1e6, 1e9)] == [0, 0, 0]


def test_idle_sessions_past_their_bound_go_when_a_run_ends() -> None:
    """Issue 23 (memory with nothing live): sessions whose last run ended are charged
    what they hold; past ``idle_bytes`` the longest-quiet idle ones go at once, down
    to three quarters of the bound, with no sweep and no ``idle_s`` waited."""
    sessions: SessionRegistry[_Run] = SessionRegistry(
        clock=lambda: 0.0, idle_s=IDLE_S, idle_bytes=4 * SESSION_BYTES
    )
    for index in range(4):
        sessions.run_ended(sessions.session(f"chat-{index}"))
    assert len(sessions) == 4  # exactly at the bound
    sessions.run_ended(sessions.session("chat-4"))
    # 5 charged > 4 allowed: the oldest go until at most 3 remain charged.
    assert [s.id for s in sessions.live()] == ["chat-2", "chat-3", "chat-4"]
    assert sessions.statistics().dropped_total == 2


def test_the_idle_bound_counts_replay_bytes_and_spares_busy_sessions() -> None:
    """Issue 23, R8 B, R11: a session's replay buffer counts towards the bound; a quiet
    session used again, running, subscribed or held is never dropped by it."""
    holder = _Holder(held={"chat-held"})
    sessions: SessionRegistry[_Run] = SessionRegistry(
        clock=lambda: 0.0, idle_s=IDLE_S, idle_bytes=10 * SESSION_BYTES, holders=[holder]
    )
    for session_id in ("chat-held", "chat-reused", "chat-watched", "chat-running"):
        sessions.run_ended(sessions.session(session_id))
    sessions.session("chat-reused")  # used again: out of the account
    watched = sessions.session("chat-watched")
    sessions.session("chat-running").runs["f" * 32] = _Run()
    loud = sessions.session("chat-loud")
    while loud.hub.statistics().replay_bytes <= 10 * SESSION_BYTES:
        loud.hub.emit("e" * 32, ev.Text, text="x" * 1024)
    with watched.hub.subscribe():
        sessions.run_ended(loud)
    assert sorted(s.id for s in sessions.live()) == [
        "chat-held",
        "chat-reused",
        "chat-running",
        "chat-watched",
    ]


def test_idle_zero_drops_nothing_past_the_bound() -> None:
    """``session_idle_s = 0`` keeps every session, whatever they hold."""
    sessions: SessionRegistry[_Run] = SessionRegistry(clock=lambda: 0.0, idle_s=0.0, idle_bytes=0)
    for index in range(3):
        sessions.run_ended(sessions.session(f"chat-{index}"))
    assert len(sessions) == 3


async def test_the_sweep_loop_runs_on_trio_time_until_cancelled(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The sweep is a supervised loop: it drops sessions as Trio time passes, and its
    handle's cancel (cause ``shutdown``) ends it."""
    sessions = _registry()
    sessions.session("chat-a")
    async with trio.open_nursery() as nursery:
        handle = TaskHandle(name="sweep")
        await Supervisor(nursery).start(sessions.run_sweeps, handle=handle)
        await trio.sleep(IDLE_S)
        assert len(sessions) == 1
        await trio.sleep(IDLE_S)
        assert len(sessions) == 0
        assert handle.cancel(Cause.SHUTDOWN)
    assert handle.cause is Cause.SHUTDOWN
    assert handle.finished.is_set()


# -- through the engine -------------------------------------------------------------------


class _Model:
    """``hang …`` never answers (a run to pause); anything else answers ``done``."""

    name = "split"

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        *,
        on_text: TextSink | None = None,
        on_retry: RetrySink | None = None,
    ) -> ModelReply:
        await trio.lowlevel.checkpoint()
        if messages[-1].content.startswith("hang"):
            await trio.sleep_forever()
        return ModelReply(text="done")


@pytest.fixture
def idle_config(tmp_path: Path) -> Config:
    return Config(home=str(tmp_path / "home"), server=ServerConfig(session_idle_s=IDLE_S))


async def _paused_then_finished(engine: Engine, session_id: str) -> tuple[str, str]:
    """Task A paused (interrupted, resumable), then task B finished: B is the latest."""
    paused = await engine.start_task(session_id, "hang on")
    await trio.testing.wait_all_tasks_blocked()
    engine.cancel(paused.task_hash, Cause.PAUSED)
    assert (await paused.wait_done()).status == "paused"
    finished = await engine.start_task(session_id, "hello")
    assert (await finished.wait_done()).status == "finished"
    return paused.task_hash, finished.task_hash


async def _idle_until_dropped(engine: Engine, session_id: str) -> None:
    for _ in range(10):
        await trio.sleep(IDLE_S / 2)
        if engine.sessions.get(session_id) is None:
            return
    raise AssertionError(f"session {session_id} was not dropped")


async def test_a_dropped_session_is_rebuilt_losing_nothing_promised(
    idle_config: Config,
    autojump_clock: trio.testing.MockClock,
    wall_clock: Callable[[], float],
) -> None:
    """R36, R45, R76: once idle the session and its replay buffer go; rebuilt on next
    use it still lists its pending task and history, is covered by the home's rules,
    and moves a resume of a task that is not its latest to a new hash (R36), exactly
    as the session it replaces would have."""
    async with open_engine(idle_config, model=_Model(), clock=wall_clock) as engine:
        session_id = "chat-owner"
        paused, finished = await _paused_then_finished(engine, session_id)
        rule = await engine.rules.add(command_rule("touch x", "/srv/work", at=wall_clock()))
        assert engine.statistics()["sessions"] == 1
        await _idle_until_dropped(engine, session_id)
        statistics = engine.statistics()
        assert (statistics["sessions"], statistics["sessions_dropped"]) == (0, 1)
        assert await engine.allowed(session_id) == [rule]
        assert [t.task_hash for t in await engine.pending_tasks(session_id)] == [paused]
        assert {h.task_hash for h in await engine.history(session_id)} == {finished}
        assert engine.sessions.get(session_id) is None  # queries make no session
        resumed = await engine.resume(session_id, paused)
        assert resumed.task_hash != paused  # R36: not the latest task, no jobs
        assert resumed.resumed_from == paused
        assert (await resumed.wait_done()).status == "finished"
        subject = CommandSubject(
            command="touch x", argv=("touch", "x"), cwd="/srv/work", restricted=False
        )
        assert await engine.rules.covering(subject) == rule
        first = engine.session(session_id).hub.events_of(resumed.task_hash)[0]
        assert isinstance(first, ev.TaskStarted)
        assert first.seq == 1  # numbered afresh, as after a restart


async def test_the_latest_task_survives_a_restart(
    config: Config, autojump_clock: trio.testing.MockClock, wall_clock: Callable[[], float]
) -> None:
    """R36: a new engine on the same store knows the session's latest task too, so a
    resume of an older task moves to a new hash after a restart as well."""
    async with open_engine(config, model=_Model(), clock=wall_clock) as engine:
        paused, _ = await _paused_then_finished(engine, "chat-restart")
    async with open_engine(config, model=_Model(), clock=wall_clock) as engine:
        resumed = await engine.resume("chat-restart", paused)
        assert (resumed.task_hash != paused, resumed.resumed_from) == (True, paused)
        assert (await resumed.wait_done()).status == "finished"


async def test_subscribers_and_open_asks_keep_a_session_in_the_engine(
    idle_config: Config,
    autojump_clock: trio.testing.MockClock,
    wall_clock: Callable[[], float],
) -> None:
    """R8 B, R11: a subscribed session and a session with an open (parked) ask stay in
    memory however long they idle; the others go."""
    async with open_engine(idle_config, model=_Model(), clock=wall_clock) as engine:
        engine.session("chat-idle")
        watched = engine.session("chat-watched")
        engine.registry.offer_parked(
            AskRequest(
                kind="ask_user",
                session_id="chat-asked",
                task_hash="a" * 32,
                questions=[Question(text="Which?")],
            )
        )
        engine.session("chat-asked")
        with watched.hub.subscribe():
            await _idle_until_dropped(engine, "chat-idle")
            await trio.sleep(10 * IDLE_S)
            assert engine.sessions.get("chat-watched") is watched
            assert engine.sessions.get("chat-asked") is not None


async def test_finished_tasks_in_many_sessions_leave_at_most_the_idle_bound(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, wall_clock: Callable[[], float]
) -> None:
    """Issue 23: one finished task in each of 20 sessions, with room for about 5 idle
    sessions: the engine keeps only the newest in memory, though no ``idle_s`` has
    passed."""
    config = Config(
        home=str(tmp_path / "home"),
        server=ServerConfig(session_idle_s=600.0, idle_sessions_bytes=5 * SESSION_BYTES),
    )
    async with open_engine(config, model=_Model(), clock=wall_clock) as engine:
        for index in range(20):
            run = await engine.start_task(f"chat-many-{index}", "hello")
            assert (await run.wait_done()).status == "finished"
        live = [s.id for s in engine.sessions.live()]
        charges = [s.hub.statistics().replay_bytes + SESSION_BYTES for s in engine.sessions.live()]
        # Each holds its few events (the done event with its usage) and the session's
        # own SESSION_BYTES: the newest that fit within the bound remain, no others.
        assert 1 <= len(live) < 5
        assert sum(charges) <= config.server.idle_sessions_bytes
        assert live == [f"chat-many-{index}" for index in range(20 - len(live), 20)]
        assert engine.statistics()["sessions_dropped"] == 20 - len(live)
