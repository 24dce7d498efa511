"""B1: the ask round trip over WebSocket against a raw trio-websocket echo.

Both run in one ``trio.run`` on loopback, client and server in the same process, so the
two numbers share every cost but the one measured:

* **ask**: a producer calls ``registry.ask(tool_confirm)`` on an in-process engine
  served by the real server stack (hypercorn + starlette ``/v1/ws``). A script
  connection that said ``listen {prefix}`` gets the ``ask`` frame, answers with a
  ``reply``; the sample is the producer's wait, from registering the ask to running
  again with the reply (ask frame out → reply in → producer resumed).
* **echo**: a trio-websocket server that sends every message back; the sample is one
  client send → receive of a message the size of the ask frame.
* **ASGI echo** (informative, no target): the same echo served the way ``/v1/ws`` is,
  a starlette WebSocket route under hypercorn, so the table shows how much of the
  ask's cost is the server stack itself rather than the engine.

Batches alternate (echo, ASGI echo, ask, echo, …) so drift hits all alike.
"""

from __future__ import annotations

import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

import hypercorn.trio
import trio
import trio_websocket
from hypercorn.config import Config as HypercornConfig
from starlette.applications import Starlette
from starlette.routing import WebSocketRoute
from starlette.websockets import WebSocket

from agentrio.engine import AskRequest, Config, open_engine
from agentrio.engine.ids import new_task_hash
from agentrio.engine.server import open_server
from agentrio.protocol.codec import dumps
from agentrio.protocol.frames import Ask, Listen, Reply
from agentrio.transport import open_frame_connection
from bench.common import BenchArgs, BenchResult, Stats, main, profiling

__all__ = ["run"]

TOKEN = "bench-token"
PREFIX = "chat-b1"
TARGET_RATIO = 1.5


def _request() -> AskRequest:
    return AskRequest(
        kind="tool_confirm",
        session_id=f"{PREFIX}-s",
        task_hash=new_task_hash(),
        tool_name="run_command",
        tool_args={"command": "touch /tmp/agentrio-bench-b1"},
    )


async def _echo_handler(request: trio_websocket.WebSocketRequest) -> None:
    ws = await request.accept()
    while True:
        try:
            message = await ws.get_message()
        except trio_websocket.ConnectionClosed:
            return
        await ws.send_message(message)


async def _asgi_echo(websocket: WebSocket) -> None:
    await websocket.accept()
    while True:
        message = await websocket.receive()
        if message["type"] == "websocket.disconnect":
            return
        await websocket.send_text(message["text"])


async def _bare_asgi_echo(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """The echo as hypercorn calls an app, without starlette's request/route layers."""
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    await receive()  # websocket.connect
    await send({"type": "websocket.accept"})
    while True:
        message = await receive()
        if message["type"] == "websocket.disconnect":
            return
        await send({"type": "websocket.send", "text": message["text"]})


def _asgi_config() -> HypercornConfig:
    """Hypercorn as the daemon runs it (loopback, no access log)."""
    config = HypercornConfig()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = None
    config.errorlog = None
    return config


async def _measure(
    home: Path, rounds: int, batch: int, profile: Path | None
) -> dict[str, list[int]]:
    samples: dict[str, list[int]] = {"echo": [], "asgi": [], "bare": [], "ask": []}
    payload = dumps(
        Ask(
            id="ask_0123456789abcdef",
            kind="tool_confirm",
            session_id=f"{PREFIX}-s",
            task_hash=new_task_hash(),
            tool_name="run_command",
            tool_args={"command": "touch /tmp/agentrio-bench-b1"},
        )
    )
    async with open_engine(Config(home=str(home))) as engine, trio.open_nursery() as nursery:
        echo_server = await nursery.start(
            partial(trio_websocket.serve_websocket, _echo_handler, "127.0.0.1", 0, None)
        )
        echo_url = f"ws://127.0.0.1:{echo_server.port}/"
        asgi_app = Starlette(routes=[WebSocketRoute("/echo", _asgi_echo)])
        asgi_binds: list[str] = await nursery.start(
            partial(hypercorn.trio.serve, asgi_app, _asgi_config(), mode="asgi")  # type: ignore[arg-type]
        )
        asgi_url = asgi_binds[0].replace("http://", "ws://") + "/echo"
        bare_binds: list[str] = await nursery.start(
            partial(hypercorn.trio.serve, _bare_asgi_echo, _asgi_config(), mode="asgi")  # type: ignore[arg-type]
        )
        bare_url = bare_binds[0].replace("http://", "ws://") + "/echo"
        async with (
            open_server(engine, token=TOKEN) as server,
            open_frame_connection(server.ws_url, TOKEN) as conn,
            trio_websocket.open_websocket_url(echo_url) as echo,
            trio_websocket.open_websocket_url(asgi_url) as asgi,
            trio_websocket.open_websocket_url(bare_url) as bare,
        ):
            listeners = engine.registry.statistics().listeners
            await conn.send(Listen(prefix=PREFIX))
            while engine.registry.statistics().listeners == listeners:
                await trio.sleep(0.001)

            async def answer() -> None:
                while True:
                    frame = await conn.receive()
                    if isinstance(frame, Ask):
                        await conn.send(Reply(id=frame.id, approve=True))

            nursery.start_soon(answer)

            async def echo_batch(n: int, keep: bool, ws: Any = echo, key: str = "echo") -> None:
                for _ in range(n):
                    t0 = time.perf_counter_ns()
                    await ws.send_message(payload)
                    await ws.get_message()
                    if keep:
                        samples[key].append(time.perf_counter_ns() - t0)

            async def ask_batch(n: int, keep: bool) -> None:
                for _ in range(n):
                    request = _request()
                    t0 = time.perf_counter_ns()
                    reply = await engine.registry.ask(request)
                    elapsed = time.perf_counter_ns() - t0
                    assert reply.approve is True
                    if keep:
                        samples["ask"].append(elapsed)

            await echo_batch(200, keep=False)  # warm-up
            await echo_batch(200, keep=False, ws=asgi, key="asgi")
            await echo_batch(200, keep=False, ws=bare, key="bare")
            await ask_batch(200, keep=False)
            with profiling(profile):
                for _ in range(rounds):
                    await echo_batch(batch, keep=True)
                    await echo_batch(batch, keep=True, ws=asgi, key="asgi")
                    await echo_batch(batch, keep=True, ws=bare, key="bare")
                    await ask_batch(batch, keep=True)
            nursery.cancel_scope.cancel()
    return samples


def run(args: BenchArgs) -> BenchResult:
    rounds, batch = (2, 100) if args.quick else (6, 500)
    with tempfile.TemporaryDirectory(prefix="agentrio-b1-") as tmp:
        samples = trio.run(_measure, Path(tmp), rounds, batch, args.profile)
    echo, ask = Stats.of_ns(samples["echo"]), Stats.of_ns(samples["ask"])
    asgi, bare = Stats.of_ns(samples["asgi"]), Stats.of_ns(samples["bare"])
    ratio50, ratio99 = ask.p50 / echo.p50, ask.p99 / echo.p99
    result = BenchResult("B1", "Ask round trip over WebSocket vs trio-websocket echo")
    result.add(
        "ask round trip p50",
        f"{ask.p50:.3f} ms",
        f"echo {echo.p50:.3f} ms",
        f"{ratio50:.2f}×",
        f"≤ {TARGET_RATIO}×",
        ratio50 <= TARGET_RATIO,
    )
    result.add(
        "ask round trip p99",
        f"{ask.p99:.3f} ms",
        f"echo {echo.p99:.3f} ms",
        f"{ratio99:.2f}×",
        f"≤ {TARGET_RATIO}×",
        ratio99 <= TARGET_RATIO,
    )
    for label, stats in (
        ("ASGI echo (hypercorn+starlette)", asgi),
        ("bare ASGI echo (hypercorn)", bare),
    ):
        for name in ("p50", "p99"):
            value, base = getattr(stats, name), getattr(echo, name)
            result.add(
                f"{label} {name}",
                f"{value:.3f} ms",
                f"echo {base:.3f} ms",
                f"{value / base:.2f}×",
            )
    result.notes.append(
        f"{ask.n} asks, {echo.n} echoes, {asgi.n} ASGI echoes and {bare.n} bare ASGI echoes "
        f"in alternating batches of "
        f"{batch}; in-process engine served by hypercorn/starlette, script client "
        "listening on a chat- prefix; the ASGI echo rows have no target: they show the "
        "server stack's own share"
    )
    return result


if __name__ == "__main__":
    main(run)
