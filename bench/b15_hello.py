"""B15: a connection's hello round trip over the daemon's Unix socket beside TCP.

Issue 29 finding 3 moved local clients (the REPL, ``agentrio.connect()``, the chat
front-ends, ``agentrio status``) to ``<home>/daemon.sock``, and made a TCP ``hello`` a
mutual challenge (one more round trip and three HMACs) so the token never crosses
the wire. Each sample is one hello round trip on an open WebSocket: from sending
``hello`` to receiving ``welcome`` (over TCP with the challenge: ``hello`` →
``challenge`` → ``prove`` → ``welcome``). Three kinds, in alternating batches against
one in-process engine served by the real server stack:

* **unix**: over the Unix socket, ``hello`` with the token (what local clients do);
* **tcp challenge**: over TCP with the mutual challenge (``agentrio.connect(url, token)``);
* **tcp token** (the baseline: what every client did before): over TCP, ``hello``
  with the token itself.

Target: the Unix socket hello's median is no slower than the old TCP one (ratio ≤
1.1×, noise allowed on a busy machine); the challenge's cost, the p99s and a whole
local connection (connect, opening handshake, hello, welcome, close: what a REPL
reconnect or a short script pays) are shown with no target.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import trio

from agentrio.engine import Config, open_engine
from agentrio.engine.server import open_server
from agentrio.protocol.challenge import client_proof, daemon_proof, new_nonce, proof_ok
from agentrio.protocol.frames import PROTOCOL_VERSION, Challenge, Hello, Prove, Welcome
from agentrio.transport import FrameConnection, open_frame_connection, open_websocket
from bench.common import BenchArgs, BenchResult, Stats, main, profiling

__all__ = ["run"]

TOKEN = "bench-token-" + "b" * 32
TARGET_RATIO = 1.1
LOCAL_WS = "ws://localhost/v1/ws"


async def _hello(conn: FrameConnection) -> None:
    """``hello`` with the token, until ``welcome``."""
    await conn.send(Hello(token=TOKEN, client="bench", protocol=PROTOCOL_VERSION))
    assert isinstance(await conn.receive(), Welcome)


async def _challenge_hello(conn: FrameConnection) -> None:
    """The mutual challenge, as `agentrio.transport` does it, until ``welcome``."""
    nonce = new_nonce()
    await conn.send(Hello(nonce=nonce, client="bench", protocol=PROTOCOL_VERSION))
    challenge = await conn.receive()
    assert isinstance(challenge, Challenge)
    assert proof_ok(challenge.proof, daemon_proof(TOKEN, nonce, challenge.nonce))
    await conn.send(Prove(proof=client_proof(TOKEN, nonce, challenge.nonce)))
    assert isinstance(await conn.receive(), Welcome)


async def _measure(
    home: Path, rounds: int, batch: int, profile: Path | None
) -> dict[str, list[int]]:
    samples: dict[str, list[int]] = {key: [] for key in ("unix", "challenge", "token", "whole")}
    socket_path = str(home / "daemon.sock")
    async with (
        open_engine(Config(home=str(home))) as engine,
        open_server(engine, token=TOKEN, unix_socket=home / "daemon.sock") as server,
    ):
        Hello_ = Callable[[FrameConnection], Awaitable[None]]
        kinds: dict[str, tuple[str, str | None, Hello_]] = {
            "unix": (LOCAL_WS, socket_path, _hello),
            "challenge": (server.ws_url, None, _challenge_hello),
            "token": (server.ws_url, None, _hello),
        }

        async def one_batch(n: int, keep: bool) -> None:
            for key, (url, unix_socket, hello) in kinds.items():
                for _ in range(n):
                    async with open_websocket(url, unix_socket=unix_socket) as conn:
                        t0 = time.perf_counter_ns()
                        await hello(conn)
                        if keep:
                            samples[key].append(time.perf_counter_ns() - t0)
            for _ in range(n):
                t0 = time.perf_counter_ns()
                async with open_frame_connection(LOCAL_WS, TOKEN, unix_socket=socket_path):
                    pass
                if keep:
                    samples["whole"].append(time.perf_counter_ns() - t0)

        await one_batch(50, keep=False)  # warm-up
        with profiling(profile):
            for _ in range(rounds):
                await one_batch(batch, keep=True)
    return samples


def run(args: BenchArgs) -> BenchResult:
    rounds, batch = (2, 50) if args.quick else (6, 200)
    with tempfile.TemporaryDirectory(prefix="agentrio-b15-") as tmp:
        samples = trio.run(_measure, Path(tmp), rounds, batch, args.profile)
    unix, challenge = Stats.of_ns(samples["unix"]), Stats.of_ns(samples["challenge"])
    token, whole = Stats.of_ns(samples["token"]), Stats.of_ns(samples["whole"])
    result = BenchResult("B15", "Hello round trip: Unix socket vs TCP (challenge, token)")
    ratio = unix.p50 / token.p50
    result.add(
        "unix socket hello p50",
        f"{unix.p50:.3f} ms",
        f"tcp token {token.p50:.3f} ms",
        f"{ratio:.2f}×",
        f"≤ {TARGET_RATIO}×",
        ratio <= TARGET_RATIO,
    )
    rows = (("unix socket hello", unix, "p99"), ("tcp challenge hello", challenge, "p50"))
    for label, stats, name in (*rows, ("tcp challenge hello", challenge, "p99")):
        value, base = getattr(stats, name), getattr(token, name)
        result.add(
            f"{label} {name}", f"{value:.3f} ms", f"tcp token {base:.3f} ms", f"{value / base:.2f}×"
        )
    result.add("whole unix socket connection p50", f"{whole.p50:.3f} ms")
    result.notes.append(
        f"{unix.n} hellos of each kind and {whole.n} whole connections in alternating "
        f"batches of {batch}; in-process engine served by hypercorn/starlette on "
        "loopback TCP and a Unix socket"
    )
    return result


if __name__ == "__main__":
    main(run)
