"""A stateful test of the pending registry against a plain model (SPEC R1-R6, R8 B, R11).

How it runs: one `trio.run` hosts a nursery for producer tasks; Hypothesis drives a
`RuleBasedStateMachine` in a worker thread (`trio.to_thread.run_sync`), and each rule
does its work back on the Trio thread through `trio.from_thread.run`, which runs it in
the waiting host task. Every rule ends with `trio.testing.wait_all_tasks_blocked()`, so
each step is observed with every producer and listener task at rest: the interleaving
is chosen by Hypothesis, never by timing. Producers are real tasks suspended in `ask`,
so a producer cancel is a real Trio cancellation.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, Literal

import attrs
import pytest
import trio
import trio.testing
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from agentrio.engine.errors import AlreadyResolved, AskFailed, Forbidden
from agentrio.engine.pending import (
    AskReply,
    AskRequest,
    Entry,
    Listener,
    Offered,
    PendingRegistry,
    RegistryStatistics,
    Withdrawn,
)

# Small domains on purpose: collisions (two listeners for one ask, a window shared or
# not) are where the interesting interleavings are.
SESSIONS = ("cli-a", "cli-b", "chat-a")
WINDOWS = ("w1", "w2")
PREFIXES = ("", "cli-", "chat-", "cli-a")
LISTENER = st.tuples(
    st.sampled_from(PREFIXES),
    st.none() | st.frozensets(st.sampled_from(WINDOWS), min_size=1, max_size=2),
    st.sampled_from([False, False, True]),  # passive (R8 B) one time in three
)
TASK = "0" * 32
INDEX = st.integers(min_value=0, max_value=40)

Outcome = Literal["reply", "failed", "cancelled", "unexpected"]
State = Literal["open", "answered", "failed", "withdrawn"]


class Producer:
    """A task suspended in `PendingRegistry.ask`; records how (and how often) it ended."""

    def __init__(self, registry: PendingRegistry, request: AskRequest) -> None:
        self.registry = registry
        self.request = request
        self.scope = trio.CancelScope()
        self.entry: Entry | None = None
        self.outcome: Outcome | None = None
        self.reply: AskReply | None = None
        self.error = ""
        self.ends = 0

    def _registered(self, entry: Entry) -> None:
        self.entry = entry

    async def run(self) -> None:
        with self.scope:
            try:
                self.reply = await self.registry.ask(self.request, on_registered=self._registered)
                self.outcome = "reply"
            except AskFailed as exc:
                self.outcome, self.error = "failed", str(exc)
            except Exception as exc:  # recorded, then reported by the invariants
                self.outcome, self.error = "unexpected", repr(exc)
        if self.scope.cancelled_caught:
            self.outcome = "cancelled"
        self.ends += 1


@attrs.define(eq=False)
class MListener:
    listener: Listener
    prefix: str
    windows: frozenset[str] | None
    passive: bool
    closed: bool = False
    notices: deque[Withdrawn] = attrs.field(factory=deque)

    def accepts(self, request: AskRequest) -> bool:
        if not request.session_id.startswith(self.prefix):
            return False
        if windowed(request):  # R78: only the window's owner, never a passive one
            return not self.passive and request.window_hash in (self.windows or ())
        return self.windows is None or request.window_hash in self.windows


def windowed(request: AskRequest) -> bool:
    """R78: a cli- ask that carries the hash of the window that started its task."""
    return bool(request.window_hash) and request.session_id.startswith("cli-")


@attrs.define(eq=False)
class MEntry:
    entry: Entry
    producer: Producer | None
    state: State = "open"
    claimer: MListener | None = None
    reply: AskReply | None = None
    error: str = ""
    answered_by: MListener | None = None

    @property
    def request(self) -> AskRequest:
        return self.entry.request


class RegistryMachine(RuleBasedStateMachine):
    """The model: entries in creation order, listeners with their expected notices."""

    NURSERY: trio.Nursery

    def __init__(self) -> None:
        super().__init__()
        self.registry = PendingRegistry()
        self.entries: list[MEntry] = []
        self.listeners: list[MListener] = []
        self.replies = 0

    # -- plumbing -------------------------------------------------------------------

    def _run(self, fn: Callable[..., Awaitable[Any]], *args: Any) -> Any:
        async def step() -> Any:
            result = await fn(*args)
            await trio.testing.wait_all_tasks_blocked()
            return result

        return trio.from_thread.run(step)

    def _open(self) -> list[MEntry]:
        return [m for m in self.entries if m.state == "open"]

    def _live_listeners(self) -> list[MListener]:
        return [ml for ml in self.listeners if not ml.closed]

    def _new_reply(self, approve: bool) -> AskReply:
        self.replies += 1
        return AskReply(approve=approve, reason=f"reply {self.replies}")

    def _finish(self, m: MEntry, state: State, reason: str, skip: MListener | None) -> None:
        """The model of the registry taking an entry out, telling its claimer."""
        m.state = state
        if m.claimer is not None and m.claimer is not skip and not m.claimer.closed:
            m.claimer.notices.append(Withdrawn(m.entry.id, reason))

    def _expected_pick(self, ml: MListener) -> MEntry | None:
        if ml.passive:
            return None
        for m in self._open():
            if m.claimer is None and ml.accepts(m.request):
                return m
        return None

    # -- producers and parked entries (R1, R11) --------------------------------------

    @rule(session=st.sampled_from(SESSIONS), window=st.sampled_from(WINDOWS))
    def ask(self, session: str, window: str) -> None:
        """R1: a producer task asks and stays suspended."""
        request = AskRequest(
            kind="tool_confirm", session_id=session, task_hash=TASK, window_hash=window
        )
        producer = Producer(self.registry, request)

        async def start() -> None:
            self.NURSERY.start_soon(producer.run)

        self._run(start)
        assert producer.entry is not None
        assert producer.outcome is None
        self.entries.append(MEntry(producer.entry, producer))

    @rule(session=st.sampled_from(SESSIONS), window=st.sampled_from(WINDOWS))
    def park(self, session: str, window: str) -> None:
        """R11: a question with no live producer."""
        request = AskRequest(
            kind="ask_user", session_id=session, task_hash=TASK, window_hash=window
        )

        async def offer() -> Entry:
            return self.registry.offer_parked(request)

        entry = self._run(offer)
        assert entry.parked is True
        self.entries.append(MEntry(entry, None))

    @precondition(lambda self: any(m.producer for m in self._open()))
    @rule(i=INDEX)
    def cancel_producer(self, i: int) -> None:
        """R3: the entry disappears the instant its producer is cancelled."""
        live = [m for m in self._open() if m.producer is not None]
        m = live[i % len(live)]
        assert m.producer is not None
        producer = m.producer

        async def cancel() -> None:
            producer.scope.cancel()
            # Same instant, before the producer runs again.
            assert self.registry.get(m.entry.id) is None

        self._run(cancel)
        self._finish(m, "withdrawn", "task canceled", skip=None)

    # -- listeners (R2, R4, R5, R6, R8 B) ---------------------------------------------

    @initialize(specs=st.lists(LISTENER, max_size=3))
    def start_listeners(self, specs: list[tuple[str, frozenset[str] | None, bool]]) -> None:
        """R2: some examples start with listeners already connected."""
        for spec in specs:
            self.listen(spec)

    @rule(spec=LISTENER)
    def listen(self, spec: tuple[str, frozenset[str] | None, bool]) -> None:
        """R2/R5/R8 B: a listener with a prefix, maybe owning windows (with the REPL's
        match), maybe passive. R78: a window has one open owner; a second is refused."""
        prefix, windows, passive = spec
        match = None if windows is None else (lambda req: req.window_hash in windows)
        owned = {w for ml in self._live_listeners() for w in (ml.windows or ())}
        if windows and owned & windows:
            with pytest.raises(Forbidden):
                self.registry.listen(prefix, match, passive=passive, windows=windows)
            return
        listener = self.registry.listen(prefix, match, passive=passive, windows=windows or ())
        self.listeners.append(MListener(listener, prefix, windows, passive))

    def _choose_listener(self, i: int, ready: bool) -> MListener:
        """Any listener, or with ``ready`` preferably one with something to take: left to
        chance, claims (and so R3/R6 paths) would be rare."""
        pool = [ml for ml in self._live_listeners() if ml.notices or self._expected_pick(ml)]
        if not ready or not pool:
            pool = self.listeners
        return pool[i % len(pool)]

    @precondition(lambda self: self.listeners)
    @rule(i=INDEX, ready=st.booleans())
    def pick(self, i: int, ready: bool) -> None:
        """R2: pick_next claims the oldest entry the listener may take."""
        ml = self._choose_listener(i, ready)

        async def pick() -> Entry | type[trio.ClosedResourceError] | None:
            try:
                return self.registry.pick_next(ml.listener)
            except trio.ClosedResourceError:
                return trio.ClosedResourceError

        got = self._run(pick)
        if ml.closed:
            assert got is trio.ClosedResourceError
            return
        expected = self._expected_pick(ml)
        if expected is None:
            assert got is None
        else:
            assert got is expected.entry
            expected.claimer = ml

    @precondition(lambda self: self.listeners)
    @rule(i=INDEX, ready=st.booleans())
    def next_notice(self, i: int, ready: bool) -> None:
        """R2/R3: next_notice gives Withdrawn notices first, then offers, else waits."""
        ml = self._choose_listener(i, ready)
        got: list[object] = []

        async def take() -> None:
            async def collect() -> None:
                try:
                    got.append(await ml.listener.next_notice())
                except trio.ClosedResourceError:
                    got.append(trio.ClosedResourceError)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(collect)
                await trio.testing.wait_all_tasks_blocked()
                nursery.cancel_scope.cancel()

        self._run(take)
        if ml.closed:
            assert got == [trio.ClosedResourceError]
        elif ml.notices:
            assert got == [ml.notices.popleft()]
        else:
            expected = self._expected_pick(ml)
            if expected is None:
                assert got == []
            else:
                assert got == [Offered(expected.entry)]
                expected.claimer = ml

    @precondition(lambda self: self._live_listeners())
    @rule(i=INDEX, busy=st.booleans())
    def close(self, i: int, busy: bool) -> None:
        """R6: closing fails claimed live asks and orphaned ones; parked ones go back.
        A second close changes nothing. ``busy`` prefers a listener holding claims."""
        live = self._live_listeners()
        claimers = [ml for ml in live if any(m.claimer is ml for m in self._open())]
        pool = claimers if busy and claimers else live
        ml = pool[i % len(pool)]
        self._run(self._close, ml.listener)
        ml.closed = True
        ml.notices.clear()
        for m in self._open():
            if m.claimer is ml:
                if m.producer is None:
                    m.claimer = None
                else:
                    m.error = "client disconnected"
                    self._finish(m, "failed", m.error, skip=ml)
        for m in self._open():
            if m.producer is None or m.claimer is not None or not ml.accepts(m.request):
                continue
            if not any(other.accepts(m.request) for other in self._live_listeners()):
                m.error = "client disconnected"
                self._finish(m, "failed", m.error, skip=ml)

    @staticmethod
    async def _close(listener: Listener) -> None:
        listener.close()
        listener.close("again")

    # -- replies (R1, R5, R6) --------------------------------------------------------

    @precondition(lambda self: any(m.claimer for m in self._open()))
    @rule(i=INDEX, approve=st.booleans())
    def reply_by_claimer(self, i: int, approve: bool) -> None:
        """R1: the listener that was shown the ask answers it."""
        claimed = [m for m in self._open() if m.claimer is not None]
        m = claimed[i % len(claimed)]
        assert m.claimer is not None
        reply = self._new_reply(approve)
        by = m.claimer

        async def answer() -> Entry:
            return self.registry.resolve(m.entry.id, reply, by=by.listener)

        assert self._run(answer) is m.entry
        m.reply, m.answered_by = reply, by
        self._finish(m, "answered", "answered elsewhere", skip=by)

    @precondition(lambda self: self._open())
    @rule(i=INDEX, how=st.sampled_from(["http", "fail", "remove"]), approve=st.booleans())
    def settle_elsewhere(self, i: int, how: str, approve: bool) -> None:
        """R1/R8 B: an authenticated HTTP caller (by=None) may answer any open ask.
        R6: `fail` ends it with an error. R11: `remove` drops a parked entry and refuses
        one with a live producer. In each case the claimer, if any, is told."""
        open_ = self._open()
        m = open_[i % len(open_)]
        reply = self._new_reply(approve)

        async def settle() -> Entry | bool | None:
            if how == "http":
                try:
                    return self.registry.resolve(m.entry.id, reply)
                except Forbidden:  # R78: only its window answers a windowed ask
                    return False
            if how == "fail":
                self.registry.fail(m.entry.id, "boom")
                return None
            try:
                self.registry.remove(m.entry.id, "resumed elsewhere")
            except ValueError:
                return False
            return True

        got = self._run(settle)
        if how == "http" and windowed(m.request):
            assert got is False
        elif how == "http":
            assert got is m.entry
            m.reply = reply
            self._finish(m, "answered", "answered elsewhere", skip=None)
        elif how == "fail":
            m.error = "boom"
            self._finish(m, "failed", "boom", skip=None)
        else:
            assert got is (m.producer is None)
            if got:
                self._finish(m, "withdrawn", "resumed elsewhere", skip=None)

    @precondition(lambda self: self._open() and self.listeners)
    @rule(i=INDEX, j=INDEX)
    def reply_by_other(self, i: int, j: int) -> None:
        """R5: a listener that was not shown the ask is refused; the ask stays open."""
        open_ = self._open()
        m = open_[i % len(open_)]
        others = [ml for ml in self.listeners if ml is not m.claimer]
        if not others:
            return
        ml = others[j % len(others)]

        async def answer() -> type[Exception] | None:
            try:
                self.registry.resolve(m.entry.id, AskReply(approve=True), by=ml.listener)
            except Forbidden:
                return Forbidden
            return None

        assert self._run(answer) is Forbidden

    @precondition(lambda self: len(self._open()) < len(self.entries))
    @rule(i=INDEX, j=INDEX)
    def reply_to_gone(self, i: int, j: int) -> None:
        """R1: a reply to an ask that is answered, failed or withdrawn is refused."""
        gone = [m for m in self.entries if m.state != "open"]
        m = gone[i % len(gone)]
        by = self.listeners[j % len(self.listeners)].listener if self.listeners else None

        async def answer() -> list[str]:
            refused = []
            for who in (by, None):
                try:
                    self.registry.resolve(m.entry.id, AskReply(approve=True), by=who)
                except AlreadyResolved as exc:
                    refused.append(str(exc))
            return refused

        assert self._run(answer) == [f"ask {m.entry.id} is already resolved or gone"] * 2

    # -- invariants -----------------------------------------------------------------

    @invariant()
    def registry_matches_model(self) -> None:
        """R1-R3: open entries, in age order, with their claimers; nothing left behind."""
        open_ = self._open()
        assert [e.id for e in self.registry.entries()] == [m.entry.id for m in open_]
        for m in self.entries:
            if m.state == "open":
                assert self.registry.get(m.entry.id) is m.entry
                assert m.entry.resolved is False
                claimer = None if m.claimer is None else m.claimer.listener
                assert m.entry.claimed_by is claimer
            else:
                assert self.registry.get(m.entry.id) is None
                assert m.entry.resolved is True
        for ml in self.listeners:
            expected = {m.entry.id for m in open_ if m.claimer is ml}
            assert ml.listener.claimed == expected
            assert ml.listener.closed is ml.closed

    @invariant()
    def producers_end_exactly_as_modelled(self) -> None:
        """R1/R3/R6: one end per producer; a reply only when answered; a close or fail
        ends in AskFailed, never in an approval."""
        for m in self.entries:
            producer = m.producer
            if producer is None:
                if m.state == "answered":
                    assert m.entry.reply is m.reply
                continue
            if m.state == "open":
                assert (producer.outcome, producer.ends) == (None, 0)
                continue
            assert producer.ends == 1
            if m.state == "answered":
                assert producer.outcome == "reply"
                assert producer.reply is m.reply
            elif m.state == "failed":
                assert (producer.outcome, producer.error) == ("failed", m.error)
                assert producer.reply is None
            else:
                assert producer.outcome == "cancelled"
                assert producer.reply is None

    @invariant()
    def answered_only_by_a_matching_listener(self) -> None:
        """R2/R5: a listener answer comes only from one whose prefix and match accept."""
        for m in self.entries:
            if m.answered_by is not None:
                assert m.answered_by.accepts(m.request)
                assert not m.answered_by.passive

    @invariant()
    def has_listener_matches_model(self) -> None:
        """R4/R8 B: has_listener follows live listeners' prefixes and matches only."""
        live = self._live_listeners()
        for m in self._open():
            request = m.request
            expected = any(ml.accepts(request) for ml in live)
            assert self.registry.has_listener("", request) is expected
            assert self.registry.has_listener(request.origin, request) is expected
            assert self.registry.has_listener("dc-", request) is False

    @invariant()
    def statistics_match_model(self) -> None:
        """R1-R6: statistics agree with the model."""
        open_ = self._open()
        assert self.registry.statistics() == RegistryStatistics(
            entries=len(open_),
            claimed=sum(m.claimer is not None for m in open_),
            parked=sum(m.producer is None for m in open_),
            listeners=len(self._live_listeners()),
            asked_total=len(self.entries),
            answered_total=sum(m.state == "answered" for m in self.entries),
            withdrawn_total=sum(m.state == "withdrawn" for m in self.entries),
            failed_total=sum(m.state == "failed" for m in self.entries),
        )

    def teardown(self) -> None:
        """End this example's producer tasks so the next example starts clean."""

        async def stop() -> None:
            for m in self.entries:
                if m.producer is not None:
                    m.producer.scope.cancel()
            for ml in self.listeners:
                ml.listener.close()

        self._run(stop)
        assert all(m.producer is None or m.producer.ends == 1 for m in self.entries)
        parked = [m.entry for m in self._open() if m.producer is None]
        assert self.registry.entries() == parked


def test_registry_state_machine() -> None:
    """R1-R6, R8 B, R11: random interleavings of asks, parks, listeners, picks, producer
    cancels, closes and replies (by the claimer, by another listener, over HTTP) keep the
    registry equal to the model after every step."""

    async def main() -> None:
        async with trio.open_nursery() as nursery:

            class Bound(RegistryMachine):
                NURSERY = nursery

            await trio.to_thread.run_sync(
                lambda: run_state_machine_as_test(
                    Bound,
                    settings=settings(
                        max_examples=150,
                        stateful_step_count=30,
                        deadline=None,
                        suppress_health_check=[HealthCheck.too_slow],
                    ),
                )
            )

    trio.run(main)
