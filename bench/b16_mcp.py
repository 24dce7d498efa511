"""B16: an MCP tool call through agentrio beside a direct SDK call to the same server.

Issue 32 section 3. Both sides call ``echo`` of ``@modelcontextprotocol/server-everything``
(from node_modules), each on its own process of it, in alternating batches in one run:

* **agentrio**: the call as a task's turn makes it -- announced (the ``tool_call``
  event), ``Toolbox.execute`` with the run's `ToolContext` (the tool offered, the
  home's rules looked up for a covering ``mcp_tool`` rule -- one is kept, so nobody is
  asked --, the request over agentrio's own stdio transport with a progress callback,
  the result turned into text and typed details), then recorded (the ``tool_result``
  event, the completed call, the action record) and settled -- before the request and
  after its result the task's row is journaled with the calls in flight (issue 34
  item 5: two store writes a call, each committed before it goes on);
* **direct**: ``mcp.ClientSession.call_tool`` over the SDK's ``stdio_client``.

Target: agentrio's median ≤ 1.3× the direct one. Timed alone too: the rule lookup (the
in-memory rules and the store's change check, as every call that would otherwise ask
makes it), the announcing and recording of a call, and agentrio's own MCP session
called bare (the transport and the server, without agentrio's tool around it).
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import trio

from agentrio.engine import Config, open_engine
from agentrio.engine.config import McpServerConfig
from agentrio.engine.models import ToolCallRequest
from agentrio.engine.rules import McpToolSubject, RuleBook, mcp_tool_rule
from bench.common import BenchArgs, BenchResult, Stats, main, profiling

__all__ = ["run"]

ROOT = Path(__file__).resolve().parents[1]
SERVER = ROOT / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
TARGET_RATIO = 1.3
TOOL = "mcp__every__echo"


async def _measure(
    home: Path, rounds: int, batch: int, profile: Path | None
) -> dict[str, list[int]]:
    from mcp import ClientSession, StdioServerParameters, stdio_client

    samples: dict[str, list[int]] = {
        "agentrio": [],
        "direct": [],
        "rule": [],
        "bookkeeping": [],
        "session": [],
        "journal": [],
    }
    server = McpServerConfig(command="node", args=[str(SERVER)])
    config = Config(home=str(home), mcp={"every": server})
    params = StdioServerParameters(command="node", args=[str(SERVER)])
    async with (
        open_engine(config) as engine,
        stdio_client(params) as (read, write),
        ClientSession(read, write) as direct,
    ):
        assert engine.mcp is not None
        await direct.initialize()
        with trio.fail_after(60):
            await engine.mcp.wait_state("every", "ready")
        await RuleBook(engine.store).add(
            mcp_tool_rule(McpToolSubject(tool=TOOL, cwd="mcp:every"), at=time.time())
        )
        task = await engine.start_task("chat-bench-mcp", "hello")
        await task.wait_done()
        ctx = task.tool_context()

        async def through_agentrio(index: int) -> None:
            call = ToolCallRequest(id=f"c{index}", name=TOOL, args={"message": f"m{index}"})
            task.calling(call)
            outcome = await engine.toolbox.execute(ctx, call)
            assert outcome.ok, outcome
            assert f"m{index}" in task.result(call, outcome)
            await ctx.calls.settled(call)  # as the agent loop does once it is recorded

        first = ToolCallRequest(id="c", name=TOOL, args={"message": "m"})
        done = await engine.toolbox.execute(ctx, first)  # an outcome to record again

        async def bookkeeping(index: int) -> None:
            call = ToolCallRequest(id=f"b{index}", name=TOOL, args={"message": f"m{index}"})
            task.calling(call)
            task.result(call, done)
            await trio.lowlevel.checkpoint()

        async def bare_session(index: int) -> None:
            result = await session.call_tool("echo", {"message": f"m{index}"})
            assert f"m{index}" in result.content[0].text

        async def straight(index: int) -> None:
            result = await direct.call_tool("echo", {"message": f"m{index}"})
            assert f"m{index}" in result.content[0].text

        subject = McpToolSubject(tool=TOOL, cwd="mcp:every")

        async def rule_lookup(index: int) -> None:
            assert await RuleBook(engine.store).covering(subject) is not None

        session = engine.mcp.states["every"].session
        assert session is not None
        kinds = (
            ("agentrio", through_agentrio),
            ("direct", straight),
            ("rule", rule_lookup),
            ("bookkeeping", bookkeeping),
            ("session", bare_session),
        )

        async def one_batch(n: int, keep: bool) -> None:
            for key, call in kinds:
                for index in range(n):
                    t0 = time.perf_counter_ns()
                    await call(index)
                    if keep:
                        samples[key].append(time.perf_counter_ns() - t0)

        await one_batch(50, keep=False)  # warm-up
        journal = ctx.calls.journal
        assert journal is not None

        async def journal_write(index: int) -> None:
            await journal()

        kinds = (*kinds, ("journal", journal_write))
        with profiling(profile):
            for _ in range(rounds):
                # The task's record holds one round's calls, as a task of that many
                # calls would: each call's journal writes the task's row with them.
                task.completed.clear()
                task.record.clear()
                await one_batch(batch, keep=True)
    return samples


def run(args: BenchArgs) -> BenchResult:
    rounds, batch = (10, 10) if args.quick else (120, 10)
    result = BenchResult("B16", "MCP tool call: through agentrio vs the SDK directly")
    if not SERVER.exists():
        result.notes.append("skipped: node_modules has no server-everything (run npm ci)")
        return result
    with tempfile.TemporaryDirectory(prefix="agentrio-b16-") as tmp:
        samples = trio.run(_measure, Path(tmp), rounds, batch, args.profile)
    ours, direct = Stats.of_ns(samples["agentrio"]), Stats.of_ns(samples["direct"])
    ratio = ours.p50 / direct.p50
    result.add(
        "MCP call through agentrio p50",
        f"{ours.p50:.3f} ms",
        f"direct SDK {direct.p50:.3f} ms",
        f"{ratio:.2f}×",
        f"≤ {TARGET_RATIO}×",
        ratio <= TARGET_RATIO,
    )
    result.add(
        "MCP call through agentrio p99",
        f"{ours.p99:.3f} ms",
        f"direct SDK {direct.p99:.3f} ms",
        f"{ours.p99 / direct.p99:.2f}×",
    )
    rule = Stats.of_ns(samples["rule"])
    result.add("of which the rule lookup alone p50", f"{rule.p50:.3f} ms")
    books = Stats.of_ns(samples["bookkeeping"])
    result.add("of which announcing and recording the call p50", f"{books.p50:.3f} ms")
    written = Stats.of_ns(samples["journal"])
    result.add(
        "of which one journal write of the task's row (two a call) p50", f"{written.p50:.3f} ms"
    )
    bare = Stats.of_ns(samples["session"])
    result.add(
        "agentrio's MCP session alone p50",
        f"{bare.p50:.3f} ms",
        f"direct SDK {direct.p50:.3f} ms",
        f"{bare.p50 / direct.p50:.2f}×",
    )
    result.notes.append(
        f"{ours.n} calls of each kind in alternating batches of {batch}; echo of "
        f"server-everything, one node process per side; Python {sys.version.split()[0]}"
    )
    return result


if __name__ == "__main__":
    main(run)
