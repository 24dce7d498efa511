"""Three real daemons on one Redis serve the same sessions (issue 21, phase 2): an ask
of a task on one daemon reaches a listener connected to another and is answered
there exactly once; cancel, pause and steer sent to a third reach the task; a
subscriber on any daemon streams the session's events, replay included; a listener's
death, or its daemon's, fails closed; the death of the task's daemon withdraws its
asks (R1-R8, R35, R40, R41, R79, R83).

Each daemon has its own home and token (`tests.e2e.test_redis_store._redis_home`);
they share the Redis of the test (`tests.conftest.redis_url`) and its prefix.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import coredis
import httpx
import trio

import agentrio
from agentrio.engine.server.peers import BusKey
from agentrio.handles import Listener, Subscription
from agentrio.protocol.cluster import AnswerAsk, encode_peer_message
from agentrio.protocol.events import Done, SteerInjected, TaskStarted
from agentrio.protocol.frames import Ask, Reply, Withdrawn
from agentrio.testing import DaemonProcess
from tests.e2e.test_redis_store import PREFIX, _client, _history, _redis_home
from tests.redis_server import RedisServer

DEADLINE_S = 30
TOKEN = "cluster-token-" + "7" * 32


@contextmanager
def _daemons(
    tmp_path: Path, redis_url: str, names: str, config: str = ""
) -> Iterator[list[DaemonProcess]]:
    homes = [_redis_home(tmp_path / name, redis_url) for name in names]
    for home in homes:  # one cluster, one token: it keys the bus's signatures
        token = home / "token"
        token.write_text(TOKEN, encoding="utf-8")
        token.chmod(0o600)
    if config:
        for home in homes:
            with (home / "config.toml").open("a", encoding="utf-8") as file:
                file.write(config)
    daemons: list[DaemonProcess] = []
    try:
        for home in homes:
            daemons.append(DaemonProcess(home))
        yield daemons
    finally:
        for daemon in daemons:
            if daemon.process.poll() is None:
                assert daemon.stop() == 0


async def _cluster(daemon: DaemonProcess) -> dict[str, Any]:
    async with _client(daemon) as http:
        cluster: dict[str, Any] = (await http.get("/v1/health")).json()["statistics"]["cluster"]
    return cluster


async def _wait_cluster(daemon: DaemonProcess, *, peers: int, proxies: int) -> None:
    """Until ``daemon`` hears ``peers`` peers and holds ``proxies`` proxies of their
    listeners (heartbeats come every second)."""
    while True:
        cluster = await _cluster(daemon)
        if len(cluster["peers"]) == peers and cluster["proxies"] == proxies:
            return
        await trio.sleep(0.1)


async def _send(daemon: DaemonProcess, session: str, text: str, **extra: Any) -> httpx.Response:
    async with _client(daemon) as http:
        return await http.post("/v1/send", json={"input": text, "session_id": session, **extra})


async def _next_ask(listener: Listener) -> Ask:
    while True:
        notice = await listener.receive()
        if isinstance(notice, Ask):
            return notice


async def _wait_status(daemon: DaemonProcess, session: str, task_hash: str) -> str:
    while (status := (await _history(daemon, session)).get(task_hash)) is None:
        await trio.sleep(0.05)
    return status


def _connect(daemon: DaemonProcess) -> Any:
    return agentrio.connect(daemon.info.ws_url, daemon.info.token)


async def test_an_ask_on_one_daemon_is_answered_through_a_listener_on_another(
    tmp_path: Path, redis_url: str
) -> None:
    """R1, R2, R4, R8, R83: a ``chat-`` task on daemon A asks to confirm a command; a
    script listening on daemon B is shown it (the command whole) and approves it: the
    command runs once, on A. A second one is denied there: its file is never made. A
    second reply to an answered ask is refused (gone), from B or from C."""
    approved, denied = tmp_path / "approved", tmp_path / "denied"
    with _daemons(tmp_path, redis_url, "abc") as (a, b, c):
        async with _connect(b) as script:
            listener = await script.listen("chat-")
            with trio.fail_after(DEADLINE_S):
                await _wait_cluster(a, peers=2, proxies=1)
                sent = await _send(a, "chat-routed", f"run: touch {approved}")
                assert sent.status_code == 202, sent.text
                ask = await _next_ask(listener)
                assert (ask.kind, ask.tool_name, ask.session_id) == (
                    "tool_confirm",
                    "run_command",
                    "chat-routed",
                )
                assert ask.tool_args["command"] == f"touch {approved}"
                assert not approved.exists()
                await script.reply(ask.id, approve=True)
                task_hash = sent.json()["task_hash"]
                assert await _wait_status(c, "chat-routed", task_hash) == "finished"
            assert approved.exists()
            try:
                await script.reply(ask.id, approve=True)
            except agentrio.ClientError as exc:
                assert exc.code == "gone"
            else:
                raise AssertionError("a second reply was accepted")

            with trio.fail_after(DEADLINE_S):
                sent = await _send(a, "chat-routed", f"run: touch {denied}")
                ask = await _next_ask(listener)
                await script.reply(ask.id, approve=False, reason="not now")
                assert await _wait_status(b, "chat-routed", sent.json()["task_hash"]) == "finished"
            assert not denied.exists()
            async with _client(c) as http:
                again = await http.post(
                    f"/v1/session/chat-routed/confirm/{ask.id}", json={"approve": True}
                )
            assert again.status_code == 410, again.text
        assert not denied.exists()


async def test_a_subscriber_on_one_daemon_answers_a_confirm_of_a_task_on_another(
    tmp_path: Path, redis_url: str
) -> None:
    """R8 B, R83: a subscriber of a session on daemon B counts as its listener for a
    task on daemon A; the ``confirm`` event reaches it through B, with the task's
    other events, and its ``POST …/confirm`` on B approves the command once."""
    made = tmp_path / "made"
    with _daemons(tmp_path, redis_url, "ab") as (a, b):
        async with _connect(b) as script:
            subscription = await script.subscribe("chat-sub")
            with trio.fail_after(DEADLINE_S):
                await _wait_cluster(a, peers=1, proxies=1)
                sent = await _send(a, "chat-sub", f"run: touch {made}")
                task_hash = sent.json()["task_hash"]
                confirm = await _event(subscription, task_hash, "confirm")
                assert not made.exists()
                async with _client(b) as http:
                    answered = await http.post(
                        f"/v1/session/chat-sub/confirm/{confirm.confirm_hash}",
                        json={"approve": True},
                    )
                assert answered.status_code == 200, answered.text
                await _event(subscription, task_hash, "done")
                assert await _wait_status(a, "chat-sub", task_hash) == "finished"
        assert made.exists()


async def _event(subscription: Subscription, task_hash: str, kind: str) -> Any:
    while True:
        frame = await subscription.receive()
        if frame.task_hash == task_hash and type(frame.event).KIND == kind:
            return frame.event


async def test_events_stream_from_the_daemon_that_runs_the_task_with_replay(
    tmp_path: Path, redis_url: str
) -> None:
    """R35, R83, SPEC §8: a subscriber on daemon B sees, live, every event of a task
    that runs on daemon A, in order (task_started … done), with B's own increasing
    ``seq``; a steer sent to C reaches the task on A (200 steered); a subscriber that
    comes to C after the task ended gets its events replayed."""
    with _daemons(tmp_path, redis_url, "abc") as (a, b, c):
        async with _connect(b) as script:
            subscription = await script.subscribe("chat-events")
            with trio.fail_after(DEADLINE_S):
                await _wait_cluster(a, peers=2, proxies=1)
                await _wait_cluster(c, peers=2, proxies=1)
                sent = await _send(a, "chat-events", "run: sleep 2", allow_all=True)
                task_hash = sent.json()["task_hash"]
                started = await _event(subscription, task_hash, "task_started")
                assert isinstance(started, TaskStarted)
                steered = await _send(c, "chat-events", "and then?", pending_task=task_hash)
                assert (steered.status_code, steered.json()) == (
                    200,
                    {"session_id": "chat-events", "steer": True},
                )
                kinds: list[str] = []
                seqs: list[int] = [started.seq]
                while True:
                    frame = await subscription.receive()
                    if frame.task_hash != task_hash:
                        continue
                    kinds.append(type(frame.event).KIND)
                    seqs.append(frame.event.seq)
                    if isinstance(frame.event, Done):
                        break
        assert SteerInjected.KIND in kinds, kinds
        assert kinds[-1] == "done"
        assert await _wait_status(c, "chat-events", task_hash) == "finished"
        assert seqs == sorted(set(seqs)), seqs
        async with _connect(c) as late:
            replayed = await late.subscribe("chat-events")
            with trio.fail_after(DEADLINE_S):
                first = await _event(replayed, task_hash, "task_started")
                assert first.input == started.input == "run: sleep 2"
                await _event(replayed, task_hash, "done")


async def test_cancel_and_pause_through_any_daemon_reach_the_task(
    tmp_path: Path, redis_url: str
) -> None:
    """R40, R41, R52, R83: ``POST …/pause`` sent to daemon B pauses a task running on
    A (``{"cancelled": true}``; it is kept, resumable); ``POST …/cancel`` sent to C
    cancels another (``[Canceled]`` in history, not resumable); a cancel of a task
    running nowhere is the stale answer, as on one daemon."""
    with _daemons(tmp_path, redis_url, "abc") as (a, b, c):
        with trio.fail_after(DEADLINE_S):
            for daemon in (a, b, c):
                await _wait_cluster(daemon, peers=2, proxies=0)
            paused_task = (await _send(a, "chat-ctl", "run: sleep 30", allow_all=True)).json()
            canceled_task = (await _send(a, "chat-ctl", "run: sleep 30", allow_all=True)).json()
            await trio.sleep(0.5)  # both run their command
            async with _client(b) as http:
                paused = await http.post(f"/v1/session/chat-ctl/pause/{paused_task['task_hash']}")
            assert (paused.status_code, paused.json()) == (200, {"cancelled": True, "stale": False})
            async with _client(c) as http:
                canceled = await http.post(
                    f"/v1/session/chat-ctl/cancel/{canceled_task['task_hash']}"
                )
                stale = await http.post(f"/v1/session/chat-ctl/cancel/{'f' * 32}")
            assert (canceled.status_code, canceled.json()) == (
                200,
                {"cancelled": True, "stale": False},
            )
            assert stale.json() == {"cancelled": False, "stale": True}
            status = await _wait_status(b, "chat-ctl", canceled_task["task_hash"])
            assert status == "canceled"
            async with _client(c) as http:
                while True:
                    listed = (await http.get("/v1/session/chat-ctl/task")).json()["tasks"]
                    if listed:
                        break
                    await trio.sleep(0.05)
            assert [task["task_hash"] for task in listed] == [paused_task["task_hash"]]


async def test_a_listener_gone_fails_closed_and_a_dead_producer_withdraws(
    tmp_path: Path, redis_url: str
) -> None:
    """R3, R6, R79, R83: with no listener grace, a confirmation shown through B whose
    script disconnects is denied on A (the file is never made); one shown through B
    whose daemon is killed (-9) is denied once B's heartbeats stop. The other way
    round, a task whose daemon A is killed has its shown ask withdrawn on B."""
    first, second, third = (tmp_path / name for name in ("first", "second", "third"))
    config = "[server]\nlistener_grace_s = 0\n"
    with _daemons(tmp_path, redis_url, "ab", config) as (a, b):
        with trio.fail_after(DEADLINE_S):
            async with _connect(b) as script:
                listener = await script.listen("chat-")
                await _wait_cluster(a, peers=1, proxies=1)
                sent = await _send(a, "chat-gone", f"run: touch {first}")
                await _next_ask(listener)
            assert await _wait_status(a, "chat-gone", sent.json()["task_hash"]) == "finished"
        assert not first.exists()

        with trio.fail_after(DEADLINE_S):
            async with _connect(b) as script:
                listener = await script.listen("chat-")
                await _wait_cluster(a, peers=1, proxies=1)
                sent = await _send(a, "chat-gone", f"run: touch {second}")
                await _next_ask(listener)
                b.kill()
                assert await _wait_status(a, "chat-gone", sent.json()["task_hash"]) == "finished"
        assert not second.exists()

    with _daemons(tmp_path / "again", redis_url, "ab", config) as (a, b):
        async with _connect(b) as script:
            listener = await script.listen("chat-")
            with trio.fail_after(DEADLINE_S):
                await _wait_cluster(a, peers=1, proxies=1)
                await _send(a, "chat-dead", f"run: touch {third}")
                ask = await _next_ask(listener)
                a.kill()
                while True:
                    notice = await listener.receive()
                    if isinstance(notice, Withdrawn) and notice.id == ask.id:
                        break
            assert notice.reason == "task canceled"
            try:
                await script.reply(ask.id, approve=True)
            except agentrio.ClientError as exc:
                assert exc.code == "gone"
            else:
                raise AssertionError("a reply to a withdrawn ask was accepted")
    assert not third.exists()


async def test_a_listen_acknowledged_on_one_daemon_takes_the_asks_of_every_daemon(
    tmp_path: Path, redis_url: str
) -> None:
    """Issue 33 item 3, R2, R4, R83: once ``listen`` is acknowledged on B, a task that
    asks on A at once is shown to it (it used to be denied "no listener" until B's next
    heartbeat); each round is a new listener, so none rides on a heartbeat already
    sent. And a listener that goes away is gone on A at once, not at the next beat
    (the heartbeats are a second apart; five rounds each well under one)."""
    made = [tmp_path / f"made-{n}" for n in range(5)]
    with _daemons(tmp_path, redis_url, "ab") as (a, b):
        with trio.fail_after(DEADLINE_S):
            await _wait_cluster(a, peers=1, proxies=0)
            await _wait_cluster(b, peers=1, proxies=0)
        for target in made:
            async with _connect(b) as script:
                listener = await script.listen("chat-")
                sent = await _send(a, "chat-at-once", f"run: touch {target}")
                assert sent.status_code == 202, sent.text
                with trio.fail_after(5):
                    ask = await _next_ask(listener)
                assert ask.tool_args["command"] == f"touch {target}"
                await script.reply(ask.id, approve=True)
                with trio.fail_after(DEADLINE_S):
                    task_hash = sent.json()["task_hash"]
                    assert await _wait_status(a, "chat-at-once", task_hash) == "finished"
            with trio.fail_after(0.4):
                await _wait_cluster(a, peers=1, proxies=0)
    assert all(target.exists() for target in made)


async def test_the_daemons_find_each_other_again_after_redis_restarts(
    tmp_path: Path, redis_server: RedisServer, redis_url: str
) -> None:
    """R6, R83, issue 21 ("recovers when Redis returns"): while Redis is away the
    daemons stop hearing each other (an ask shown across them would fail closed); once
    it is back they do again, and an ask of a task on A is answered through B."""
    made = tmp_path / "made"
    with _daemons(tmp_path, redis_url, "ab") as (a, b):
        with trio.fail_after(DEADLINE_S):
            await _wait_cluster(a, peers=1, proxies=0)
            redis_server.stop()
            try:
                while (await _cluster(a))["peers"]:
                    await trio.sleep(0.2)
            finally:
                redis_server.start()
        with trio.fail_after(2 * DEADLINE_S):  # the store and the bus reconnect first
            async with _connect(b) as script:
                listener = await script.listen("chat-")
                await _wait_cluster(a, peers=1, proxies=1)
                sent = await _send(a, "chat-back", f"run: touch {made}")
                assert sent.status_code == 202, sent.text
                ask = await _next_ask(listener)
                await script.reply(ask.id, approve=True)
                assert await _wait_status(a, "chat-back", sent.json()["task_hash"]) == "finished"
    assert made.exists()


async def test_a_parked_question_is_answered_through_another_daemon_and_resumes(
    tmp_path: Path, redis_url: str
) -> None:
    """R11, R37, R83: a ``chat-`` task on A parks on ``ask_user``; its question is
    offered to a listener on B, whose answer resumes the task (on A) exactly once: it
    finishes into history, and the task is no longer resumable anywhere."""
    with _daemons(tmp_path, redis_url, "ab") as (a, b):
        async with _connect(b) as script:
            listener = await script.listen("chat-")
            with trio.fail_after(DEADLINE_S):
                await _wait_cluster(a, peers=1, proxies=1)
                sent = await _send(a, "chat-parked", "ask: Which branch? | main, release")
                parked = sent.json()["task_hash"]
                ask = await _next_ask(listener)
                assert (ask.kind, ask.task_hash) == ("ask_user", parked)
                assert (ask.questions[0].text, ask.questions[0].options) == (
                    "Which branch?",
                    ["main", "release"],
                )
                await script.reply(ask.id, answers=["release"])
                while True:
                    finished = [
                        task_hash
                        for task_hash, status in (await _history(b, "chat-parked")).items()
                        if status == "finished"
                    ]
                    if finished:
                        break
                    await trio.sleep(0.05)
        async with _client(b) as http:
            listed = (await http.get("/v1/session/chat-parked/task")).json()["tasks"]
            record = (await http.get(f"/v1/session/chat-parked/task/{finished[0]}/history")).json()
        assert listed == []
        assert "release" in record["content"]


async def test_garbage_and_forgeries_on_the_bus_are_ignored(tmp_path: Path, redis_url: str) -> None:
    """R71 and the gate between daemons: messages on the bus that are not signed with
    the cluster's token -- garbage, an unknown type, and a well-formed approval of the
    very ask a person is being shown, unsigned or signed with another token -- are
    logged and ignored: the command is not run. The person's own approval then runs
    it once."""
    made = tmp_path / "made"
    with _daemons(tmp_path, redis_url, "ab") as (a, b):
        async with _connect(b) as script:
            listener = await script.listen("chat-")
            with trio.fail_after(DEADLINE_S):
                await _wait_cluster(a, peers=1, proxies=1)
                sent = await _send(a, "chat-noise", f"run: touch {made}")
                ask = await _next_ask(listener)
                approval = encode_peer_message(
                    AnswerAsk(
                        sender=(await _cluster(b))["daemon"],
                        request_id="r",
                        reply=Reply(id=ask.id, approve=True),
                        sessions=["chat-noise"],
                    )
                )
                async with coredis.Redis.from_url(redis_url, decode_responses=True) as redis:
                    for text in (
                        "not json",
                        '{"type": "launch", "sender": "x"}',
                        approval,
                        BusKey("another cluster's token").sign(approval, f"{PREFIX}bus"),
                        BusKey(TOKEN).sign('{"type": "launch", "sender": "x"}', f"{PREFIX}bus"),
                    ):
                        assert await redis.publish(f"{PREFIX}bus", text) == 2
                await trio.sleep(1.0)
                assert not made.exists()
                assert (await _history(a, "chat-noise")).get(sent.json()["task_hash"]) is None
                await script.reply(ask.id, approve=True)
                assert await _wait_status(a, "chat-noise", sent.json()["task_hash"]) == "finished"
        assert made.exists()
        assert (await _cluster(a))["bus_rejected_total"] == 5
        log = (a.home / "stdout.log").read_text(encoding="utf-8")
        assert "ignored a message on the daemons' bus: bad signature" in log


async def test_events_copied_into_another_sessions_stream_are_ignored(
    tmp_path: Path, redis_url: str
) -> None:
    """Issue 29 finding 10: every relayed event is signed for its session's stream.
    Whoever can write to Redis copies the entries of ``chat-secret``'s stream into
    ``chat-other``'s: a subscriber of ``chat-other`` on another daemon never sees
    them (the genuine event after them arrives; the copies are counted as rejected
    and logged)."""
    with _daemons(tmp_path, redis_url, "ab") as (a, b):
        with trio.fail_after(DEADLINE_S):
            await _wait_cluster(a, peers=1, proxies=0)
            secret = await _send(a, "chat-secret", "the secret plan")
            assert await _wait_status(a, "chat-secret", secret.json()["task_hash"]) == "finished"
            async with coredis.Redis.from_url(redis_url, decode_responses=True) as redis:
                entries = await redis.xrange(f"{PREFIX}ev:chat-secret")
                assert entries
                async with _connect(b) as script:
                    subscription = await script.subscribe("chat-other")
                    for entry in entries:
                        await redis.xadd(f"{PREFIX}ev:chat-other", dict(entry.field_values))
                    genuine = await _send(a, "chat-other", "hello there")
                    frame = await subscription.receive()
        assert frame.task_hash == genuine.json()["task_hash"]
        assert isinstance(frame.event, TaskStarted)
        assert frame.event.input == "hello there"
        assert (await _cluster(b))["bus_rejected_total"] >= len(entries)
        log = (b.home / "stdout.log").read_text(encoding="utf-8")
        assert "ignored a relayed event of chat-other: bad signature" in log


async def test_a_replayed_heartbeat_does_not_keep_a_dead_daemon_alive(
    tmp_path: Path, redis_url: str
) -> None:
    """Issue 29 finding 10: B's heartbeats are recorded off the bus, B is killed (-9),
    and the recording is published again and again: A still forgets B once B's own
    heartbeats stop (the replays are refused: their numbers were used), and B's
    listener stops counting."""
    with _daemons(tmp_path, redis_url, "ab") as (a, b):
        async with _connect(b) as script:
            await script.listen("chat-")
            with trio.fail_after(DEADLINE_S):
                await _wait_cluster(a, peers=1, proxies=1)
                b_id = (await _cluster(b))["daemon"]
                recorded: list[str] = []
                async with coredis.Redis.from_url(redis_url, decode_responses=True) as redis:
                    async with redis.pubsub(channels=[f"{PREFIX}bus"]) as pubsub:
                        while len(recorded) < 3:
                            message = await pubsub.get_message(ignore_subscribe_messages=True)
                            if message is None or message.get("type") != "message":
                                continue
                            text = str(message["data"])
                            if f'"sender":"{b_id}"' in text and '"heartbeat"' in text:
                                recorded.append(text)
                    b.kill()
                    rejected = (await _cluster(a))["bus_rejected_total"]
                    while (await _cluster(a))["peers"]:
                        for text in recorded:
                            await redis.publish(f"{PREFIX}bus", text)
                        await trio.sleep(0.2)
        cluster = await _cluster(a)
        assert cluster["peers"] == []
        assert cluster["proxies"] == 0
        assert cluster["bus_rejected_total"] > rejected
