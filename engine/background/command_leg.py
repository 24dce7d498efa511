"""The runner of a command leg (``background_command``, R23, R28, R29, R48).

One command, run as its confirmation decided (`agentrio.engine.tools.run_command.CommandPlan`:
sandboxed when nobody was asked, R75), in its own process group with no timeout: it
runs until it ends or its leg is cancelled, and then its whole group is ended (R48).
Its output goes, as it comes, to the leg's log file (R23) and to a keyword `Watcher`
(R28) whose reports -- checked by the decision model when there is one (R29) -- reach
``on_report`` while the command keeps running. The log file is removed when the leg
ends, however it ends.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import trio

from agentrio.engine.background.jobs import Leg, LegState
from agentrio.engine.background.logs import LogWriter, open_log
from agentrio.engine.nursery_tasks import cancel_scope
from agentrio.engine.processes.sandbox import SandboxError
from agentrio.engine.processes.tracking import logging_groups
from agentrio.engine.snapshot import RESULT_LIMIT
from agentrio.engine.tools.base import Services
from agentrio.engine.tools.run_command import format_command_result, run_plan, start_failure
from agentrio.engine.watch import Checker, Watcher, WatchReport
from agentrio.protocol.causes import Cause

__all__ = ["run_command_leg"]


async def run_command_leg(
    services: Services,
    leg: Leg,
    *,
    log_path: Path,
    check: Checker | None,
    on_report: Callable[[WatchReport], Awaitable[None]],
) -> tuple[LegState, str]:
    """Run ``leg``'s command to its end; returns its state and its result (``exit N``
    and the kept output, `format_command_result`). A cancel of the caller's scope ends
    the command's group and propagates."""
    background = services.config.background
    watcher = Watcher(
        background.keywords,
        on_report,
        settle_s=background.settle_s,
        max_settle_s=background.max_settle_s,
        report_interval_s=background.report_interval_s,
        check=check,
    )
    assert leg.plan is not None
    try:
        async with trio.wrap_file(await trio.to_thread.run_sync(open_log, log_path)) as log_file:
            log = LogWriter(log_file.wrapped, max_bytes=background.max_log_bytes)

            async def on_output(chunk: bytes) -> None:
                await log.append(chunk)
                watcher.feed(chunk)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(watcher.run)
                nursery.start_soon(log.run)
                try:
                    with logging_groups(leg.groups):
                        result = await run_plan(
                            services,
                            leg.plan,
                            cwd=leg.cwd,
                            timeout_s=None,
                            on_output=on_output,
                            keep_bytes=RESULT_LIMIT,
                        )
                except SandboxError as exc:
                    return "failed", f"not run: {exc}"
                except OSError as exc:  # the approved program is not there
                    return "failed", start_failure(leg.plan, exc, leg.cwd)
                finally:
                    # The watcher may be waiting on a decision check: stop it now.
                    watcher.close()
                    cancel_scope(nursery.cancel_scope, Cause.SUPERSEDED)
    finally:
        with trio.CancelScope(shield=True):
            await trio.Path(log_path).unlink(missing_ok=True)
    state: LegState = "finished" if result.exit_code == 0 else "failed"
    return state, format_command_result(result)
