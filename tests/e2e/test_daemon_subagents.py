"""In-process sub-agents through the real daemon (R80, with R3, R5, R40, R41).

The builtin model's ``subs:`` verb starts one sub-agent per objective; each reads its
objective as a verb. Through the plugin's daemon and client fixtures
(`agentrio.testing`): a sub-agent's confirmation reaches the window that started the
parent, labelled with the sub-agent; approving it runs the command; both results come
back as one tool result. A cancel of the parent ends every sub-agent and withdraws
their open confirmations, and the command never runs.
"""

from __future__ import annotations

import os
from pathlib import Path

import trio

from agentrio import Client
from agentrio.protocol.events import Canceled, ToolCall, ToolResult
from agentrio.protocol.frames import Ask, Withdrawn


async def _next_ask(run: object) -> Ask:
    while True:
        notice = await run.asks().receive()  # type: ignore[attr-defined]
        if isinstance(notice, Ask):
            return notice


async def test_subagent_confirmation_is_labelled_and_results_return_together(
    agentrio_client: Client, tmp_path: Path
) -> None:
    """R80, R5: ``subs: run: touch X ;; run: echo hi``: the touch confirmation comes to
    the starting connection with the parent's task hash and the sub-agent's label;
    approving it creates X; one ``subagents`` tool result holds both sub-agents."""
    target = tmp_path / "made-by-a-subagent"
    with trio.fail_after(30):
        run = await agentrio_client.run(
            "cli-subs-e2e", f"subs: run: touch {target} ;; run: echo hi", window_hash="w1"
        )
        labels: list[str] = []
        while True:  # echo asks too when the sandbox is not available
            ask = await _next_ask(run)
            assert ask.task_hash == run.task_hash
            labels.append(ask.subagent)
            await agentrio_client.reply(ask.id, approve=True)
            if ask.tool_args == {
                "command": f"touch {target}",
                "cwd": os.path.realpath(os.getcwd()),
            }:
                break
        done = await run.wait_done()
    assert labels[-1] == f"sub-agent 1/2: run: touch {target}"
    assert all(label.startswith("sub-agent ") for label in labels)
    assert done.status == "finished"
    assert target.exists()
    calls = [e for e in run.events_so_far if isinstance(e, ToolCall)]
    assert [c.tool_name for c in calls] == ["subagents"]
    [result] = [e for e in run.events_so_far if isinstance(e, ToolResult)]
    assert f"## sub-agent 1/2: run: touch {target}" in result.output
    assert "## sub-agent 2/2: run: echo hi" in result.output
    assert "hi" in result.output.split("## sub-agent 2/2")[1]


async def test_cancel_of_the_parent_withdraws_subagent_confirmations(
    agentrio_client: Client, tmp_path: Path
) -> None:
    """R80, R40, R3: with both sub-agents waiting on confirmations, a user cancel of
    the parent withdraws both asks, ends the task ``canceled`` (not kept), and neither
    command ran."""
    first, second = tmp_path / "one", tmp_path / "two"
    with trio.fail_after(30):
        run = await agentrio_client.run(
            "cli-subs-e2e-cancel", f"subs: run: touch {first} ;; run: touch {second}"
        )
        asks = [await _next_ask(run), await _next_ask(run)]
        assert sorted(a.subagent[:13] for a in asks) == ["sub-agent 1/2", "sub-agent 2/2"]
        await run.cancel()
        withdrawn: set[str] = set()
        while len(withdrawn) < 2:
            notice = await run.asks().receive()
            if isinstance(notice, Withdrawn):
                withdrawn.add(notice.id)
        done = await run.wait_done()
    assert withdrawn == {a.id for a in asks}
    assert done.status == "canceled"
    [canceled] = [e for e in run.events_so_far if isinstance(e, Canceled)]
    assert (canceled.cause, canceled.kept) == ("user_canceled", False)
    assert not first.exists()
    assert not second.exists()
