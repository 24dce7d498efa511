"""A ``chat-`` front-end that answers confirmations by rule.

A chat front-end (a web page, a bot) starts tasks with ``POST /v1/send`` in ``chat-``
sessions; when a task wants to run a command, someone has to confirm it (R8). This
script is that someone: it listens on a session prefix (R2), approves ``run_command``
calls whose command fully matches an allowlist regex **and** that run in an allowed
directory (``--cwd``, default: this script's working directory; compared as the real
path the confirmation shows), and denies everything else with a reason the model gets
to read. An argv command is judged as ``shlex.join`` of it, so ``["touch", "a b"]``
never passes for ``touch a b`` (`agentrio.approvals`).

    python examples/chat_frontend.py                  # self-check, then exit
    python examples/chat_frontend.py --serve          # answer chat- asks until Ctrl+C

The self-check sends two tasks of its own over HTTP — one command the allowlist takes,
one it does not — answers their confirmations, and exits 0 only when the allowed
command ran and the other was skipped with the rule's reason. It listens only on its
own sessions' prefix, so it never answers for another front-end. ``--serve`` listens
on ``--prefix`` (default ``chat-``).

The daemon is found through the home (``--home``, else ``$AGENTRIO_HOME``, else
``~/.config/agentrio``), or given with ``--url`` and ``--token``.
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import trio

from agentrio import Client, ClientError, Decision, Listener, Subscription, connect
from agentrio.approvals import RuleOfCommands, confirmed_command
from agentrio.protocol.events import Canceled, Done, Failed, ToolResult, ToolSkipped
from agentrio.protocol.faithful import line_pieces
from agentrio.protocol.frames import Ask
from agentrio.protocol.http import SendStarted

DEFAULT_ALLOW = r"(touch|mkdir -p) [\w./-]+"
DENY_REASON = "not on this front-end's allowlist"
DEADLINE_S = 30.0


def one_line(text: str) -> str:
    """``text`` on one line, newlines and control characters escaped as a confirmation
    shows them (`agentrio.protocol.faithful`): a command cannot rewrite this log."""
    return "".join(piece.text for piece in line_pieces(text, escape_newlines=True))


def decide(ask: Ask, allow: RuleOfCommands) -> Decision:
    """The rule: only allowlisted commands in allowed directories run; questions are
    declined too (a real chat front-end would show them to its user)."""
    if ask.kind == "tool_confirm" and ask.tool_name == "run_command":
        if allow.allows(ask):
            return Decision.allow()
        return Decision.deny(f"{DENY_REASON} ({allow.pattern.pattern})")
    return Decision.deny("this front-end answers only command confirmations")


async def answer(client: Client, listener: Listener, allow: RuleOfCommands) -> None:
    """Answer every ask the listener gets, printing each decision."""
    async for notice in listener:
        if not isinstance(notice, Ask):
            continue
        decision = decide(notice, allow)
        found = confirmed_command(notice)
        what = f"{one_line(found[0])}  (in {one_line(found[1])})" if found else notice.kind
        verdict = "approved" if decision.approve else "denied"
        print(f"{verdict:9}{notice.session_id}  {what}", flush=True)
        try:
            await client.decide(notice.id, decision)
        except ClientError as exc:
            if exc.code != "gone":
                raise
            print(f"         (withdrawn before the answer got there: {exc.message})")


async def until_end(subscription: Subscription, task_hash: str) -> list[object]:
    """The events of ``task_hash`` up to its last one (done, failed or canceled)."""
    seen: list[object] = []
    async for frame in subscription:
        if frame.task_hash != task_hash:
            continue
        seen.append(frame.event)
        if isinstance(frame.event, Done | Failed | Canceled):
            break
    return seen


async def self_check(client: Client, allow: RuleOfCommands, workdir: Path) -> bool:
    tag = f"chat-demo-{secrets.token_hex(3)}-"
    allowed_file = workdir / "allowed.txt"
    kept_file = workdir / "keep.txt"
    await trio.Path(kept_file).write_text("this file must survive\n")
    ok_session, no_session = tag + "allowed", tag + "denied"
    listener = await client.listen(tag)
    ok_events = await client.subscribe(ok_session)
    no_events = await client.subscribe(no_session)
    with trio.fail_after(DEADLINE_S):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(answer, client, listener, allow)
            ok = await client.send(f"run: touch {allowed_file}", session_id=ok_session)
            no = await client.send(f"run: rm -f {kept_file}", session_id=no_session)
            assert isinstance(ok, SendStarted)
            assert isinstance(no, SendStarted)
            ok_seen = await until_end(ok_events, ok.task_hash)
            no_seen = await until_end(no_events, no.task_hash)
            nursery.cancel_scope.cancel()
    ran = [e.ok for e in ok_seen if isinstance(e, ToolResult)]
    skipped = [e.reason for e in no_seen if isinstance(e, ToolSkipped)]
    print(
        f"check    allowed task: tool results {ran}; {allowed_file} exists: {allowed_file.exists()}"
    )
    print(f"check    denied task: skipped {skipped}; {kept_file} still there: {kept_file.exists()}")
    return (
        ran == [True]
        and allowed_file.exists()
        and len(skipped) == 1
        and skipped[0].startswith(f"denied by the user: {DENY_REASON}")
        and kept_file.exists()
    )


async def main(args: argparse.Namespace) -> int:
    allow = RuleOfCommands.of(args.allow, args.cwd or [os.getcwd()])
    async with connect(args.url, args.token, home=args.home) as client:
        where = ", ".join(sorted(allow.directories))
        print(f"connected to {client.base_url}; allowlist: {allow.pattern.pattern} in {where}")
        if args.serve:
            listener = await client.listen(args.prefix)
            print(f"answering asks of sessions {args.prefix}* (Ctrl+C stops)")
            await answer(client, listener, allow)
            return 0
        if args.workdir:
            passed = await self_check(client, allow, Path(args.workdir))
        else:
            workdir = Path(await trio.to_thread.run_sync(tempfile.mkdtemp))
            try:
                passed = await self_check(client, allow, workdir)
            finally:
                await trio.to_thread.run_sync(shutil.rmtree, workdir)
        if passed:
            print("OK: the allowed command ran, the other was denied with the rule's reason")
            return 0
        print("FAILED: the outcome was not the expected one")
        return 1


def parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--home", help="agentrio home (default: $AGENTRIO_HOME)")
    parser.add_argument("--url", help="daemon address, e.g. http://127.0.0.1:17990")
    parser.add_argument("--token", help="bearer token (default: <home>/token)")
    parser.add_argument("--allow", default=DEFAULT_ALLOW, help="allowlist regex (full match)")
    parser.add_argument(
        "--cwd",
        action="append",
        help="a directory allowed commands may run in (repeatable; default: this one)",
    )
    parser.add_argument("--prefix", default="chat-", help="session prefix to serve")
    parser.add_argument("--serve", action="store_true", help="answer asks until Ctrl+C")
    parser.add_argument("--workdir", help="where the self-check makes its files")
    return parser.parse_args(argv)


if __name__ == "__main__":
    try:
        sys.exit(trio.run(main, parse(sys.argv[1:])))
    except ClientError as exc:
        print(f"chat_frontend: {exc}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        sys.exit(0)
