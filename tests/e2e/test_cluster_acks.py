"""Acknowledgements across daemons (issue 34 item 1 with issue 21): an ask of a task on
daemon A shown by a front-end connected to daemon B and acknowledged there is
acknowledged on A, by that front-end of B (R97, R83). Two real daemons on the real
redis-server of the test, as tests/e2e/test_cluster.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio

from agentrio.protocol.asks import AskInfo
from agentrio.testing import DaemonProcess
from tests.e2e.test_cluster import (
    DEADLINE_S,
    _cluster,
    _connect,
    _daemons,
    _event,
    _next_ask,
    _send,
    _wait_cluster,
    _wait_status,
)
from tests.e2e.test_redis_store import _client


async def _asks_until(daemon: DaemonProcess, session: str, wanted: Any) -> AskInfo:
    """Poll ``GET …/asks`` on ``daemon`` until its one ask satisfies ``wanted``."""
    async with _connect(daemon) as client:
        while True:
            asks = await client.open_asks(session)
            if len(asks) == 1 and wanted(asks[0]):
                return asks[0]
            await trio.sleep(0.05)


async def test_an_ask_acknowledged_through_another_daemon_is_acknowledged_where_it_asks(
    tmp_path: Path, redis_url: str
) -> None:
    """R97, R83: a script listening on daemon B is shown a confirmation of a task on
    daemon A; A lists it shown on B's front-end (``client``, ``daemon`` B), not
    acknowledged; the script's ``ack`` on B makes it acknowledged on A, named so. Then
    a subscriber on B (the page's way) acknowledges another ask over HTTP on B: A says
    ``web`` of B. Neither acknowledgement runs anything; the approvals do."""
    first, second = tmp_path / "first", tmp_path / "second"
    with _daemons(tmp_path, redis_url, "ab") as (a, b):
        b_id = (await _cluster(b))["daemon"]
        async with _connect(b) as script:
            listener = await script.listen("chat-")
            with trio.fail_after(DEADLINE_S):
                await _wait_cluster(a, peers=1, proxies=1)
                sent = await _send(a, "chat-acked", f"run: touch {first}")
                assert sent.status_code == 202, sent.text
                ask = await _next_ask(listener)
                shown = await _asks_until(a, "chat-acked", lambda info: info.state == "shown")
                assert (shown.id, shown.frontend, shown.daemon) == (ask.id, "client", b_id)
                assert not shown.acknowledged
                await script.acknowledge(ask.id)
                acked = await _asks_until(a, "chat-acked", lambda info: info.acknowledged)
                assert (acked.id, acked.frontend, acked.daemon) == (ask.id, "client", b_id)
                assert not first.exists()
                await script.reply(ask.id, approve=True)
                assert await _wait_status(a, "chat-acked", sent.json()["task_hash"]) == "finished"
        assert first.exists()

        async with _connect(b) as page:
            subscription = await page.subscribe("chat-paged")
            with trio.fail_after(DEADLINE_S):
                await _wait_cluster(a, peers=1, proxies=1)
                sent = await _send(a, "chat-paged", f"run: touch {second}")
                task_hash = sent.json()["task_hash"]
                confirm = await _event(subscription, task_hash, "confirm")
                waiting = await _asks_until(a, "chat-paged", lambda info: True)
                assert (waiting.state, waiting.acknowledged) == ("waiting", False)
                async with _client(b) as http:
                    path = f"/v1/session/chat-paged/ack/{confirm.confirm_hash}"
                    acked_by_page = await http.post(path, json={"frontend": "web"})
                assert acked_by_page.status_code == 200, acked_by_page.text
                acked = await _asks_until(a, "chat-paged", lambda info: info.acknowledged)
                assert (acked.state, acked.frontend, acked.daemon) == ("shown", "web", b_id)
                assert not second.exists()
                async with _client(b) as http:
                    path = f"/v1/session/chat-paged/confirm/{confirm.confirm_hash}"
                    assert (await http.post(path, json={"approve": True})).status_code == 200
                assert await _wait_status(a, "chat-paged", task_hash) == "finished"
        assert second.exists()
