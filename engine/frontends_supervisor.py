"""The chat front-ends the daemon starts: each enabled one (``[telegram] enabled``,
``[discord] enabled``) runs as a child process, supervised by the daemon's nursery (R82).

- **Started** with the daemon, once it serves (the child finds it through
  ``daemon.json``): ``python -m agentrio.frontends.<name> --home <home>``, in a
  session of its own, its output appended to ``<home>/<name>.log`` (0600). It
  inherits the daemon's environment, so ``$AGENTRIO_<NAME>_TOKEN`` reaches it, and
  the owner tag (`agentrio.engine.processes.orphans`): a child a killed daemon left is ended by
  the next one.
- **Restarted** when it exits, after an exponential backoff with jitter (reset once a
  run lasted `STABLE_S`). Exit code 2 is a setup error (no token, a bad ``[<name>]``
  table): no restart can fix it, so it is logged once and not restarted.
- **Stopped** on shutdown: SIGTERM to its process group, SIGKILL after `STOP_GRACE_S`.

- **Reported** (`FrontendStatus`, in ``/v1/health``'s ``frontends`` and ``agentrio
  status``): running, restarting or stopped, its restarts, and the last error line its
  log holds when it exits.

The engine never imports a front-end: it starts a module by name.
"""

from __future__ import annotations

import logging
import os
import random
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Final, Literal

import attrs
import trio

from agentrio.engine.config import Config
from agentrio.engine.store.files import open_private
from agentrio.protocol.http import FrontendInfo

__all__ = [
    "STOP_GRACE_S",
    "FrontendSpec",
    "FrontendStatus",
    "enabled_frontends",
    "statuses_of",
    "supervise_frontends",
]

log = logging.getLogger("agentrio.frontends")

#: Seconds a stopped front-end gets between SIGTERM and SIGKILL.
STOP_GRACE_S: Final = 3.0
#: A run at least this long resets the backoff.
STABLE_S: Final = 60.0
#: The exit code of a front-end that cannot start as configured.
SETUP_EXIT: Final = 2
#: How much of the end of a front-end's log is read for its last error.
LOG_TAIL_BYTES: Final = 8 * 1024
#: The longest last error kept (one line).
ERROR_CHARS: Final = 300


@attrs.frozen(kw_only=True)
class FrontendSpec:
    name: str
    argv: Sequence[str]
    log_path: Path
    backoff_base_s: float = 1.0
    backoff_cap_s: float = 60.0

    def delay(self, attempt: int) -> float:
        ceiling = min(self.backoff_cap_s, self.backoff_base_s * 2 ** min(attempt, 20))
        return random.uniform(ceiling / 2, ceiling)


def enabled_frontends(config: Config) -> list[FrontendSpec]:
    home = config.home_path
    enabled = {"telegram": config.telegram.enabled, "discord": config.discord.enabled}
    return [
        FrontendSpec(
            name=name,
            argv=[sys.executable, "-m", f"agentrio.frontends.{name}", "--home", str(home)],
            log_path=home / f"{name}.log",
        )
        for name, on in enabled.items()
        if on
    ]


@attrs.define
class FrontendStatus:
    """What the daemon knows of one front-end now (`FrontendInfo` on the wire)."""

    name: str
    state: Literal["starting", "running", "restarting", "stopped"] = "starting"
    pid: int | None = None
    restarts: int = 0
    last_error: str = ""

    def info(self) -> FrontendInfo:
        return FrontendInfo(
            name=self.name,
            state=self.state,
            pid=self.pid,
            restarts=self.restarts,
            last_error=self.last_error,
        )


def statuses_of(specs: Sequence[FrontendSpec]) -> list[FrontendStatus]:
    return [FrontendStatus(spec.name) for spec in specs]


async def supervise_frontends(
    specs: Sequence[FrontendSpec], statuses: Sequence[FrontendStatus] | None = None
) -> None:
    """Run and restart every front-end of ``specs`` until cancelled, keeping
    ``statuses`` (one per spec, in order) up to date."""
    kept = list(statuses) if statuses is not None else statuses_of(specs)
    async with trio.open_nursery() as nursery:
        for spec, status in zip(specs, kept, strict=True):
            nursery.start_soon(supervise, spec, status)


def last_error(path: Path, code: int | str) -> str:
    """The last error line of the log at ``path`` (a ``WARNING``/``ERROR`` line, or the
    one-line ``agentrio <name>: …`` of a setup error), else ``exited with <code>``."""
    try:
        with path.open("rb") as log_file:
            log_file.seek(0, os.SEEK_END)
            log_file.seek(max(0, log_file.tell() - LOG_TAIL_BYTES))
            tail = log_file.read().decode("utf-8", errors="replace")
    except OSError:
        tail = ""
    for line in reversed(tail.splitlines()):
        line = line.strip()
        if " ERROR " in line or " WARNING " in line or line.startswith("agentrio "):
            return line[:ERROR_CHARS]
    return f"exited with {code}"


async def supervise(spec: FrontendSpec, status: FrontendStatus | None = None) -> None:
    status = status if status is not None else FrontendStatus(spec.name)
    attempt = 0
    while True:
        started = trio.current_time()
        status.state = "starting"
        try:
            code: int | str = await run_once(spec, status)
        except OSError as exc:  # the log unwritable, the interpreter gone: try later
            code = f"a start failure ({exc})"
        status.pid = None
        status.restarts += 1
        status.last_error = await trio.to_thread.run_sync(last_error, spec.log_path, code)
        if code == SETUP_EXIT:
            status.state = "stopped"
            log.error(
                "the %s front-end cannot start as configured (exit %d): see %s; "
                "not restarted until the daemon restarts",
                spec.name,
                code,
                spec.log_path,
            )
            return
        if trio.current_time() - started >= STABLE_S:
            attempt = 0
        delay = spec.delay(attempt)
        attempt += 1
        status.state = "restarting"
        log.warning("the %s front-end exited with %s; restarting in %.1f s", spec.name, code, delay)
        await trio.sleep(delay)


async def run_once(spec: FrontendSpec, status: FrontendStatus | None = None) -> int:
    """Run the front-end once; its exit code. Cancelled: its group is stopped."""
    fd = open_private(spec.log_path, os.O_WRONLY | os.O_APPEND)
    try:
        process = await trio.lowlevel.open_process(
            list(spec.argv),
            stdin=subprocess.DEVNULL,
            stdout=fd,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    finally:
        os.close(fd)
    log.info("started the %s front-end (pid %d, log %s)", spec.name, process.pid, spec.log_path)
    if status is not None:
        status.state, status.pid = "running", process.pid
    try:
        return await process.wait()
    finally:
        with trio.CancelScope(shield=True):
            await _stop(process, spec.name)


async def _stop(process: trio.Process, name: str) -> None:
    if process.returncode is not None:
        return
    _signal_group(process.pid, signal.SIGTERM)
    with trio.move_on_after(STOP_GRACE_S):
        await process.wait()
        log.info("stopped the %s front-end", name)
        return
    log.warning("the %s front-end did not stop in %.0f s: killed", name, STOP_GRACE_S)
    _signal_group(process.pid, signal.SIGKILL)
    await process.wait()


def _signal_group(pgid: int, signum: signal.Signals) -> None:
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        pass
