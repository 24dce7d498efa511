"""The REPL does not restart a daemon stopped on purpose (SPEC §11, R53, issue 19).

`run_client` over fake connections (tests/repl/test_client.py) with a virtual clock:
after the daemon it used goes away, a stop note (``agentrio stop``, SIGTERM, SIGINT:
``<home>/daemon.stopped``) keeps it from ever starting one and makes it say why; a
crash (no note) still starts one after the grace; a daemon started by hand is picked up.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import trio
import trio.testing

from agentrio import Client, open_client
from agentrio.protocol.errors import FrameDecodeError
from agentrio.protocol.frames import ServerFrame
from agentrio.repl.client import RESTART_GRACE_S, run_client, stopped_text
from agentrio.repl.daemon import DaemonStartError, Endpoint, StopNote
from agentrio.repl.messages import Connected, Incoming, Outgoing, Status
from agentrio.repl.messages import Disconnected as Lost
from agentrio.transport import HttpApi
from tests.repl.test_client import FakeConnection

NOTE = StopNote(pid=4321, at=0.0, reason="agentrio stop")


class FakeHome:
    """A daemon that answers or not, and the stop note of the home."""

    def __init__(self) -> None:
        self.up = True
        self.note: StopNote | None = None
        self.starts: list[bool] = []
        self.conns: list[FakeConnection] = []

    async def locate(self, http: HttpApi, may_start: bool) -> Endpoint:
        self.starts.append(may_start)
        if not self.up and not may_start:
            raise DaemonStartError("no daemon answers")
        self.up = True  # answering, or started by us
        return Endpoint(host="127.0.0.1", port=1, token="t")

    async def stopped(self) -> StopNote | None:
        return self.note

    def connect(
        self,
        endpoint: Endpoint,
        http: HttpApi,
        *,
        on_frame: Callable[[ServerFrame], None],
        on_unreadable: Callable[[FrameDecodeError], None],
    ) -> AbstractAsyncContextManager[Client]:
        conn = FakeConnection()
        self.conns.append(conn)
        return open_client(conn, http, base_url=endpoint.http_base, token="t", on_frame=on_frame)

    async def go_down(self, *, note: StopNote | None) -> None:
        """The daemon exits (leaving ``note``, or nothing when it crashed)."""
        self.up = False
        self.note = note
        await self.conns[-1].inbox_send.send(None)


async def run(home: FakeHome, got: list[Incoming], nursery: trio.Nursery) -> None:
    _, out_recv = trio.open_memory_channel[Outgoing](10)
    nursery.start_soon(
        lambda: run_client(
            home=Path("/nonexistent"),
            outgoing=out_recv,
            deliver=got.append,
            locate=home.locate,
            connect=home.connect,
            stopped=home.stopped,
        )
    )
    await trio.testing.wait_all_tasks_blocked()


async def test_a_daemon_stopped_on_purpose_is_not_restarted(autojump_clock: Any) -> None:
    """§11, R53: after ``agentrio stop`` the REPL says the daemon was stopped and how to
    start it, never starts one itself however long it waits, and reconnects once a
    daemon answers again (started by hand)."""
    home = FakeHome()
    got: list[Incoming] = []
    async with trio.open_nursery() as nursery:
        await run(home, got, nursery)
        await home.go_down(note=NOTE)
        await trio.sleep(RESTART_GRACE_S * 20)
        assert home.starts[0] is True  # the first connection may start one
        assert set(home.starts[1:]) == {False}
        assert got[1:] == [
            Lost(reason="daemon shutting down"),
            Status(text=stopped_text(NOTE), error=True),
        ]
        assert "agentrio start" in stopped_text(NOTE)
        home.up, home.note = True, None  # `agentrio start` in another terminal
        await trio.sleep(3)
        assert got[-1] == Connected(url="http://127.0.0.1:1", daemon_version="9.9", reconnect=True)
        nursery.cancel_scope.cancel()


async def test_a_crashed_daemon_is_still_restarted(autojump_clock: Any) -> None:
    """§11: a daemon that went away without a stop note (a crash, ``kill -9``) is
    started again once the restart grace is over, as before."""
    home = FakeHome()
    got: list[Incoming] = []
    async with trio.open_nursery() as nursery:
        await run(home, got, nursery)
        await home.go_down(note=None)
        await trio.sleep(RESTART_GRACE_S + 5)
        assert home.starts[-1] is True
        assert got[-1] == Connected(url="http://127.0.0.1:1", daemon_version="9.9", reconnect=True)
        nursery.cancel_scope.cancel()
