"""B13: the daemon's own cost per model turn, against a direct official-SDK call to the
same aimock server in the same run (issue 31).

One aimock (tests/aimock.py: ``@copilotkit/aimock``, installed by ``npm ci``) answers a
streamed Chat Completions reply of a few hundred characters. Batches alternate so drift
hits all alike:

* **direct**: ``openai.AsyncOpenAI.chat.completions.create(stream=True)`` read to its
  end, in this process: the floor any client of that server pays.
* **model layer**: agentrio's ``OpenAIModel.complete`` with an ``on_text`` sink, in
  this process: what agentrio adds to the SDK call (request building, retries, delta
  assembly, usage). Target: ≤ 1.2× direct at p50.
* **daemon turn** (informative): a real daemon (subprocess) configured with that
  model; a WebSocket client sends ``run`` and waits for ``done``: the whole task around
  the call (the task row, its events, history).
* **text to the WebSocket client**: between the daemon and aimock sits a loopback TCP
  tap in this process, which stamps each chunk of the reply as aimock sends it; the
  client stamps each ``text`` event as it arrives. The lag is arrival minus the stamp
  of the chunk carrying that text, on one clock. aimock streams the reply slowly
  (``streamingProfile``) so each chunk travels alone. Target: p50 ≤ 2 ms.

Run: ``.venv/bin/python -m bench.b13_model_turn`` (``--quick`` for a smoke run).
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any

import trio

from agentrio.engine.config import ModelConfig
from agentrio.engine.models import Message, Model, close_model, make_model
from agentrio.protocol.events import Text
from agentrio.protocol.frames import DoneFrame, EventFrame, Run
from agentrio.transport import open_frame_connection
from bench.common import BenchArgs, BenchResult, DaemonProcess, Stats, main, profiling
from tests.aimock import start_aimock, write_fixture

__all__ = ["run"]

TARGET_RATIO = 1.2
TARGET_TEXT_MS = 2.0
REPLY = " ".join(f"word{i:03d}" for i in range(48))  # ~380 characters, ~19 chunks
#: Every 20-character chunk of it is unique, so the tap finds each chunk's own stamp.
SLOW = " ".join(f"s{n:03d}" for n in range(100))


def _fixtures() -> list[dict[str, Any]]:
    return [
        {"match": {"userMessage": "bench turn"}, "response": {"content": REPLY}},
        {
            "match": {"userMessage": "bench slow"},
            "response": {"content": SLOW},
            # aimock sends 20 characters a chunk; tps spaces them out so each chunk
            # crosses the tap alone.
            "streamingProfile": {"ttft": 5, "tps": 60},
        },
    ]


class Tap:
    """A loopback TCP relay to ``target`` that stamps every piece aimock sends."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = 0
        #: (perf_counter_ns, bytes) of every piece sent from aimock towards the daemon.
        self.pieces: list[tuple[int, bytes]] = []

    async def serve(self, *, task_status: trio.TaskStatus[None]) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.port = listeners[0].socket.getsockname()[1]
        task_status.started()
        await trio.serve_listeners(self._relay, listeners)

    async def _relay(self, client: trio.SocketStream) -> None:
        upstream = await trio.open_tcp_stream("127.0.0.1", self.target_port)
        async with client, upstream, trio.open_nursery() as nursery:

            async def pump(src: trio.SocketStream, dst: trio.SocketStream, stamp: bool) -> None:
                async for data in src:
                    if stamp:
                        self.pieces.append((time.perf_counter_ns(), data))
                    await dst.send_all(data)
                nursery.cancel_scope.cancel()

            nursery.start_soon(pump, client, upstream, False)
            nursery.start_soon(pump, upstream, client, True)

    def stamp_of(self, text: str, after_ns: int) -> int | None:
        """When the piece carrying ``text`` (as a JSON string value) was forwarded."""
        needle = json.dumps(text)[1:-1].encode()
        for stamp, data in self.pieces:
            if stamp >= after_ns and needle in data:
                return stamp
        return None


async def _direct(client: Any) -> int:
    start = time.perf_counter_ns()
    stream = await client.chat.completions.create(
        model="gpt-4o",
        messages=[{"role": "user", "content": "bench turn"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    text = []
    async for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            text.append(chunk.choices[0].delta.content)
    assert "".join(text) == REPLY
    return time.perf_counter_ns() - start


async def _layer(model: Model) -> int:
    pieces: list[str] = []

    async def on_text(text: str) -> None:
        pieces.append(text)

    start = time.perf_counter_ns()
    reply = await model.complete([Message(role="user", content="bench turn")], [], on_text=on_text)
    elapsed = time.perf_counter_ns() - start
    assert reply.text == REPLY
    return elapsed


async def _daemon_turn(conn: Any, n: int) -> int:
    start = time.perf_counter_ns()
    await conn.send(Run(request_id=f"t{n}", session_id=f"cli-b13-{n}", input="bench turn"))
    while True:
        frame = await conn.receive()
        if isinstance(frame, DoneFrame):
            assert frame.status == "finished", frame
            return time.perf_counter_ns() - start


async def _text_lags(conn: Any, tap: Tap, n: int) -> list[int]:
    sent = time.perf_counter_ns()
    await conn.send(Run(request_id=f"s{n}", session_id=f"cli-b13s-{n}", input="bench slow"))
    arrivals: list[tuple[int, str]] = []
    while True:
        frame = await conn.receive()
        now = time.perf_counter_ns()
        if isinstance(frame, EventFrame) and isinstance(frame.event, Text):
            arrivals.append((now, frame.event.text))
        if isinstance(frame, DoneFrame):
            break
    lags = []
    for arrived, text in arrivals:
        stamp = tap.stamp_of(text, sent)
        if stamp is not None:
            lags.append(arrived - stamp)
    return lags


async def _measure(args: BenchArgs) -> dict[str, list[int]]:
    from openai import AsyncOpenAI

    batches, per_batch = (3, 10) if args.quick else (10, 30)
    samples: dict[str, list[int]] = {"direct": [], "layer": [], "daemon": [], "text": []}
    with tempfile.TemporaryDirectory(prefix="agentrio-b13-") as tmp:
        async with trio.open_nursery() as nursery:
            aimock = await start_aimock(nursery, write_fixture(Path(tmp), _fixtures()))
            port = int(aimock.url.rsplit(":", 1)[1])
            tap = Tap(port)
            await nursery.start(tap.serve)
            config = (
                '[model]\nprovider = "openai"\nname = "gpt-4o"\n'
                f'base_url = "http://127.0.0.1:{tap.port}/v1"\n'
            )
            daemon = DaemonProcess(Path(tmp) / "home", config=config)
            await trio.to_thread.run_sync(daemon.wait_ready)
            client = AsyncOpenAI(base_url=f"{aimock.url}/v1", api_key="bench", max_retries=0)
            model = await make_model(
                ModelConfig(provider="openai", name="gpt-4o", base_url=f"{aimock.url}/v1")
            )
            try:
                async with open_frame_connection(daemon.ws_url, daemon.token) as conn:
                    # Warm every path (imports, pools) before measuring.
                    await _direct(client)
                    await _layer(model)
                    await _daemon_turn(conn, -1)
                    kinds: list[tuple[str, Callable[[int], Awaitable[int]]]] = [
                        ("direct", lambda n: _direct(client)),
                        ("layer", lambda n: _layer(model)),
                        ("daemon", partial(_daemon_turn, conn)),
                    ]
                    counter = 0
                    for _ in range(batches):
                        for name, measure in kinds:
                            for _ in range(per_batch):
                                counter += 1
                                samples[name].append(await measure(counter))
                    for n in range(3 if args.quick else 10):
                        samples["text"] += await _text_lags(conn, tap, n)
            finally:
                await close_model(model)
                await client.close()
                daemon.process.terminate()
                await trio.to_thread.run_sync(daemon.process.wait)
                daemon.log.close()
            nursery.cancel_scope.cancel()
    return samples


def run(args: BenchArgs) -> BenchResult:
    with profiling(args.profile):
        samples = trio.run(_measure, args)
    direct, layer = Stats.of_ns(samples["direct"]), Stats.of_ns(samples["layer"])
    daemon, text = Stats.of_ns(samples["daemon"]), Stats.of_ns(samples["text"])
    ratio = layer.p50 / direct.p50
    result = BenchResult("B13", "A model turn: agentrio vs a direct openai SDK call to aimock")
    result.add(
        "model call (OpenAIModel.complete, streamed)",
        layer.short(),
        baseline=f"direct SDK {direct.short()}",
        ratio=f"{ratio:.2f}×",
        target=f"≤ {TARGET_RATIO}×",
        met=ratio <= TARGET_RATIO,
    )
    result.add(
        "text event at the WebSocket client after aimock sent it",
        text.short(),
        target=f"p50 ≤ {TARGET_TEXT_MS:g} ms",
        met=text.p50 <= TARGET_TEXT_MS,
    )
    result.add(
        "whole task over WebSocket (run → done, one model turn)",
        daemon.short(),
        baseline=f"direct SDK {direct.short()}",
        ratio=f"{daemon.p50 / direct.p50:.2f}×",
    )
    result.notes.append(
        f"reply of {len(REPLY)} characters in ~{len(REPLY) // 20 + 1} chunks; the text lag "
        f"over {text.n} chunks streamed apart, through a loopback tap"
    )
    return result


if __name__ == "__main__":
    main(run)
