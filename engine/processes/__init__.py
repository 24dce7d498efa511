"""Process supervision: how the daemon runs, confines, ends and cleans up commands.

Every command agentrio runs -- a ``run_command`` call, a background command leg, a
sudo check, a sandbox probe -- goes through this package, and it is the only part of
the engine that starts or signals processes:

- `runner`: `run_in_group` runs a command as the leader of its own process group,
  streams its output, keeps a bounded copy of it (`output.ClampedOutput`), and ends the
  whole group on cancel or timeout (R48).
- `groups`: whether a group still runs, and the SIGTERM-grace-SIGKILL sequence.
- `reaper`: the daemon as the child subreaper of its commands' orphans.
- `orphans`: processes a ``kill -9``'d daemon left behind, found by an inherited tag
  and ended at the next start (R27).
- `sandbox`: the read-only bubblewrap sandbox unasked commands run in (R75).

Nothing here knows about tasks, tools or sessions: the tools decide *whether* a command
may run; this package only runs it.
"""

from __future__ import annotations

from agentrio.engine.processes.groups import group_alive as group_alive
from agentrio.engine.processes.orphans import find_orphans as find_orphans
from agentrio.engine.processes.orphans import kill_orphans as kill_orphans
from agentrio.engine.processes.orphans import mark_children as mark_children
from agentrio.engine.processes.output import ClampedOutput as ClampedOutput
from agentrio.engine.processes.reaper import adopting_orphans as adopting_orphans
from agentrio.engine.processes.runner import CommandResult as CommandResult
from agentrio.engine.processes.runner import run_in_group as run_in_group
from agentrio.engine.processes.sandbox import Sandbox as Sandbox
from agentrio.engine.processes.sandbox import SandboxError as SandboxError
from agentrio.engine.processes.sandbox import SandboxStatus as SandboxStatus

__all__ = [
    "ClampedOutput",
    "CommandResult",
    "Sandbox",
    "SandboxError",
    "SandboxStatus",
    "adopting_orphans",
    "find_orphans",
    "group_alive",
    "kill_orphans",
    "mark_children",
    "run_in_group",
]
