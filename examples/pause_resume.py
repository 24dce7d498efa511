"""Run a task, pause it, list what is pending, resume it.

    python examples/pause_resume.py [--command "sleep 2"]

Pausing (R41) tears the run down but keeps the task resumable: it shows up in the
session's pending list, and a ``pending`` frame (`Client.resume`, R42) continues it —
here the built-in model re-runs the command the pause interrupted. The script
confirms the command itself (it listens on its own session, so the confirmations come
to it) and exits 0 only when the run was paused, listed, resumed and finished with the
command run, and nothing is left pending.

The daemon is found through the home (``--home``, else ``$AGENTRIO_HOME``, else
``~/.config/agentrio``), or given with ``--url`` and ``--token``.
"""

from __future__ import annotations

import argparse
import secrets
import sys
from collections.abc import Sequence

import trio

from agentrio import ClientError, Decision, Rule, connect
from agentrio.protocol.events import ToolCall, ToolResult
from agentrio.protocol.frames import Ask

DEADLINE_S = 30.0


def approve_the_command(command: str) -> Rule:
    """A rule approving only the command this script started."""

    def rule(ask: Ask) -> Decision:
        if ask.tool_name == "run_command" and ask.tool_args.get("command") == command:
            return Decision.allow()
        return Decision.deny("pause_resume.py confirms only its own command")

    return rule


async def main(args: argparse.Namespace) -> int:
    session = args.session or f"script-pause-{secrets.token_hex(4)}"
    rule = approve_the_command(args.command)
    async with connect(args.url, args.token, home=args.home) as client:
        # Confirmations of a task that is not a REPL's go to listeners (R8): listen on
        # exactly this session, so no other front-end's asks come here.
        await client.listen(session)
        with trio.fail_after(DEADLINE_S):
            run = await client.run(session, f"run: {args.command}", on_ask=rule)
            print(f"started   {run.task_hash} in {session}: run: {args.command}")
            async for event in run.events():
                if isinstance(event, ToolCall):
                    break
            await run.pause()
            paused = await run.wait_done()
            print(f"paused    {paused.task_hash}: done status {paused.status}")

            pending = await client.pending(session)
            for task in pending:
                print(f"pending   {task.task_hash}: {task.objective}")

            resumed = await client.resume(session, run.task_hash, on_ask=rule)
            print(f"resumed   {run.task_hash} as {resumed.task_hash}")
            finished = await resumed.wait_done()
            results = [e for e in resumed.events_so_far if isinstance(e, ToolResult)]
            for result in results:
                print(f"result    ok={result.ok}: {result.output.strip()}")
            print(f"finished  {finished.task_hash}: done status {finished.status}")
            print(f"reply     {resumed.final_text}")
            left = await client.pending(session)
    expected = (
        paused.status == "paused"
        and [t.task_hash for t in pending] == [run.task_hash]
        and finished.status == "finished"
        and [r.ok for r in results] == [True]
        and left == []
    )
    if expected:
        print("OK: paused, listed as pending, resumed, finished; nothing left pending")
        return 0
    print("FAILED: the outcome was not the expected one")
    return 1


def parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--home", help="agentrio home (default: $AGENTRIO_HOME)")
    parser.add_argument("--url", help="daemon address, e.g. http://127.0.0.1:17990")
    parser.add_argument("--token", help="bearer token (default: <home>/token)")
    parser.add_argument("--session", help="session id (default: a new script-pause-… id)")
    parser.add_argument("--command", default="sleep 2", help="the command the task runs")
    return parser.parse_args(argv)


if __name__ == "__main__":
    try:
        sys.exit(trio.run(main, parse(sys.argv[1:])))
    except ClientError as exc:
        print(f"pause_resume: {exc}", file=sys.stderr)
        sys.exit(2)
