"""The home's file modes on the real daemon (R73, issue 15 item 6): folders 0700, files
0600 — the token, the database and its side files, secrets, job files, leg logs,
sub-agent reports, ``daemon.json`` and ``daemon.log``.

The daemon is started under umask 0 (a file made with the default mode would be 0666)
on a home made earlier with loose modes, which it must tighten at start and say so
once. Then a secret, a background job with a leg still running, and a sub-agent leave
their files, and every path under the home is checked while they exist and after.
"""

from __future__ import annotations

import os
import sqlite3
import stat
from pathlib import Path
from typing import TypeVar

import trio

from agentrio import Client, Decision, Subscription
from agentrio.protocol import events as ev
from agentrio.testing import DaemonProcess

SESSION = "cli-e2e-modes"
SECRET = "value-of-the-secret"
TIGHTENED = "were open to group or world"
E = TypeVar("E", bound=ev.Event)


def offenders(home: Path) -> list[str]:
    """Every path under ``home`` (itself included) that is not a 0700 folder or a 0600
    file, as ``"<mode> <path>"``. Paths that vanish during the walk are skipped."""
    bad: list[str] = []

    def check(path: Path, want_dir: bool) -> None:
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return
        if stat.S_ISLNK(st.st_mode):
            bad.append(f"link {path.relative_to(home)}")
            return
        want = 0o700 if want_dir else 0o600
        if stat.S_IMODE(st.st_mode) != want:
            bad.append(f"{stat.S_IMODE(st.st_mode):04o} {path.relative_to(home)} (want {want:04o})")

    check(home, True)
    for top, dirs, files in os.walk(home):
        for name in dirs:
            check(Path(top) / name, True)
        for name in files:
            check(Path(top) / name, False)
    return bad


def assert_private(home: Path, when: str) -> list[str]:
    """Assert ``home`` is owner-only; return the relative paths of its files."""
    bad = offenders(home)
    assert not bad, f"{when}: paths under the home that are not 0700/0600:\n" + "\n".join(bad)
    return sorted(
        str((Path(top) / name).relative_to(home))
        for top, _, files in os.walk(home)
        for name in files
    )


def loose_home(home: Path) -> None:
    """A home as an older version (or another tool) left it: group/world readable."""
    reports = home / "sessions" / "cli-old" / "reports"
    reports.mkdir(parents=True)
    (reports / "sub_00000000.md").write_text("# an old report\n")
    for folder in (home, home / "sessions", home / "sessions" / "cli-old", reports):
        os.chmod(folder, 0o755)
    os.chmod(reports / "sub_00000000.md", 0o644)


def start_daemon(home: Path) -> DaemonProcess:
    """Blocking: `DaemonProcess` on ``home``, started under umask 0."""
    old = os.umask(0)
    try:
        return DaemonProcess(home)
    finally:
        os.umask(old)


async def run_flow(home: Path, go: Path) -> DaemonProcess:
    """Start a daemon on ``home`` under umask 0, run the flow, stop it (exit 0, R53)."""
    daemon = await trio.to_thread.run_sync(start_daemon, home)
    try:
        with trio.fail_after(60):
            async with daemon.info.connect() as client:
                await secret_job_and_subagent(client, home, go)
    except BaseException:
        await trio.to_thread.run_sync(daemon.kill)
        raise
    assert await trio.to_thread.run_sync(daemon.stop) == 0
    return daemon


async def next_event(events: Subscription, kind: type[E]) -> E:
    async for frame in events:
        if isinstance(frame.event, kind):
            return frame.event
    raise AssertionError(f"the subscription ended before a {kind.__name__}")


async def settled(events: Subscription) -> None:
    """Until the next job settles and its follow-up task (if any) is done, in any order."""
    job: ev.JobSettled | None = None
    done: set[str] = set()
    async for frame in events:
        if isinstance(frame.event, ev.JobSettled):
            job = frame.event
        elif isinstance(frame.event, ev.Done):
            done.add(frame.task_hash)
        if job is not None and (job.followup_task is None or job.followup_task in done):
            return


async def secret_job_and_subagent(client: Client, home: Path, go: Path) -> None:
    """The flow: store a secret, run a background job (checked while a leg runs), run a
    sub-agent; every file is checked while it exists."""
    events = await client.subscribe(SESSION)
    run = await client.run(SESSION, "secret: API_TOKEN", on_ask=lambda ask: Decision.answer(SECRET))
    assert (await run.wait_done()).status == "finished"

    waiter = f"sh -c 'while [ ! -e {go} ]; do sleep 0.02; done'"
    run = await client.run(SESSION, f"bg: {waiter} ;; echo done", allow_all=True)
    leg = await next_event(events, ev.LegStarted)
    background = home / "sessions" / SESSION / "background"
    job_file, log = background / f"{leg.job_id}.json", background / f"{leg.leg_id}.log"
    while not (job_file.exists() and log.exists()):  # written as the legs start
        await trio.sleep(0.01)
    assert (await run.wait_done()).status == "finished"
    files = assert_private(home, "while a leg runs")
    expected = {
        "token",
        "agentrio.db",
        "agentrio.db-wal",
        "agentrio.db-shm",
        "daemon.json",
        "daemon.log",
        "daemon.lock",
        str(job_file.relative_to(home)),
        str(log.relative_to(home)),
    }
    assert expected <= set(files), files
    go.touch()
    await settled(events)

    await client.run(SESSION, "sub: hello", allow_all=True)
    leg = await next_event(events, ev.LegStarted)
    await settled(events)
    report = home / "sessions" / SESSION / "reports" / f"{leg.leg_id}.md"
    files = assert_private(home, "after a sub-agent")
    assert str(report.relative_to(home)) in files, files


async def test_every_path_under_the_home_is_owner_only(tmp_path: Path) -> None:
    """R73, issue 15 item 6: started under umask 0 on a loose home, the daemon tightens
    it (one log line), and everything it then creates — token, database with WAL and
    shared-memory files, the stored secret, job file, leg log, sub-agent report,
    ``daemon.json``, ``daemon.log`` — is 0600 in folders 0700, during the flow, after
    it and after shutdown. A second start finds nothing to tighten and says nothing."""
    home = tmp_path / "home"
    loose_home(home)
    await run_flow(home, tmp_path / "go")
    files = assert_private(home, "after shutdown")
    assert "stdout.log" in files  # the test harness's, made 0666 before the daemon ran
    log = (home / "daemon.log").read_text(encoding="utf-8")
    [line] = [line for line in log.splitlines() if TIGHTENED in line]
    # the home, sessions/, cli-old/, reports/, the old report and stdout.log
    assert f"6 path(s) {TIGHTENED}" in line, line
    with sqlite3.connect(home / "agentrio.db") as db:
        stored = db.execute("SELECT value FROM secrets WHERE key = 'API_TOKEN'").fetchall()
    assert stored == [(SECRET,)]

    daemon = await trio.to_thread.run_sync(start_daemon, home)
    assert await trio.to_thread.run_sync(daemon.stop) == 0
    log = (home / "daemon.log").read_text(encoding="utf-8")
    assert log.count(TIGHTENED) == 1, "a second start found something to tighten"
    assert_private(home, "after a second start")
