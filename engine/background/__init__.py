"""Background legs and jobs: start, limit, watch, report, settle (R20-R30, R44, R48).

A **leg** is one background command (``cmd_…``) or sub-agent (``sub_…``); the legs one
task starts in one turn form a **job** (``job_…``). Legs outlive the task that started
them (R25); their reports go where that task is now, and a job whose task has ended
runs once more as a follow-up task with every report (R26).

The package, one idea a module:

- `jobs`: `Leg` and `Job`, the job file (R21) and where a session's files live;
- `manager`: `BackgroundManager`, every job and leg of an engine and each leg's life
  (limiter R22, cancel and pause R44, shutdown R48);
- `command_leg`: running a command leg -- its log file (`logs`, R23), its keyword
  watcher and decision check (`agentrio.engine.watch`, R28, R29);
- `subagent_leg`: running a sub-agent leg as a child task, and its report file (R30);
- `routing`: where a report goes, and when a job settles (R26);
- `starter`: `TaskStarter`, all the background needs of the engine.

The messages themselves (report headers, the follow-up input) are `agentrio.engine.messages`.
"""

from __future__ import annotations

from agentrio.engine.background.jobs import LEG_REPORTS_LIMIT as LEG_REPORTS_LIMIT
from agentrio.engine.background.jobs import Job as Job
from agentrio.engine.background.jobs import Leg as Leg
from agentrio.engine.background.logs import LOG_BUFFER_BYTES as LOG_BUFFER_BYTES
from agentrio.engine.background.logs import LogWriter as LogWriter
from agentrio.engine.background.manager import BackgroundManager as BackgroundManager
from agentrio.engine.background.manager import BackgroundStatistics as BackgroundStatistics
from agentrio.engine.background.starter import TaskStarter as TaskStarter

__all__ = [
    "LEG_REPORTS_LIMIT",
    "LOG_BUFFER_BYTES",
    "BackgroundManager",
    "BackgroundStatistics",
    "Job",
    "Leg",
    "LogWriter",
    "TaskStarter",
]
