"""What a stop ended: the receipt of a cancel or pause (issue 34 item 4, R44, R48).

A person who presses Stop wants to know what stopped with the task, not to guess from
a status bar: its background legs and their process groups, its in-process
sub-agents, its MCP calls, the asks it had open, and whether anything was still alive
afterwards. The daemon says so once the task and the legs it stopped have ended, in
the ``done`` frame (``stopped``), in the HTTP cancel and pause replies
(`agentrio.protocol.http.CancelResult.stopped`) and, through them, in the REPL's end
line (`agentrio.protocol.wording.stop_receipt_line`).

Both fields are new and optional: an older client never sees them (left out while
None) and an older daemon never sends them.
"""

from __future__ import annotations

import attrs

__all__ = ["StopReceipt", "StoppedLeg"]

_OMIT = {"omit_if_default": True}


@attrs.frozen(kw_only=True)
class StoppedLeg:
    """One background leg of the stopped task (R20-R25): ``kind`` ``cmd`` or ``sub``,
    its command or objective, how it ended (``canceled``; ``finished``/``failed`` when
    it ended on its own meanwhile; ``running`` for a leg the stop leaves running, see
    `StopReceipt.left_running`), and the process groups a command leg ran in."""

    leg_id: str
    kind: str
    label: str
    status: str
    process_groups: list[int] = attrs.field(factory=list, metadata=_OMIT)


@attrs.frozen(kw_only=True)
class StopReceipt:
    """What one cancel or pause ended (see the module docstring).

    ``cause`` is the stop's (``user_canceled``, ``paused``, …). ``legs``: the background
    legs this stop ended (cancel and pause stop them, R44); ``left_running``: legs it
    did not stop by design (a kept stop other than a pause, a closed window: they report
    to the kept task or the window that reopens). ``calls``: the tool calls that were in
    flight, by tool name; ``subagents``: the in-process sub-agents ended with them (R80),
    by label; ``mcp_calls``: the MCP tools among them. ``process_groups``: every process
    group the stop ended, a leg's and a call's (R48). ``asks_withdrawn``: the ids of the
    asks it withdrew. ``still_alive``: the process groups with a member still running
    afterwards -- empty is the promise of R48; anything else is a bug to report."""

    cause: str
    legs: list[StoppedLeg] = attrs.field(factory=list, metadata=_OMIT)
    left_running: list[StoppedLeg] = attrs.field(factory=list, metadata=_OMIT)
    calls: list[str] = attrs.field(factory=list, metadata=_OMIT)
    subagents: list[str] = attrs.field(factory=list, metadata=_OMIT)
    mcp_calls: list[str] = attrs.field(factory=list, metadata=_OMIT)
    process_groups: list[int] = attrs.field(factory=list, metadata=_OMIT)
    asks_withdrawn: list[str] = attrs.field(factory=list, metadata=_OMIT)
    still_alive: list[int] = attrs.field(factory=list, metadata=_OMIT)
