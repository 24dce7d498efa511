"""agentrio's pytest plugin: fixtures for your own pytest-trio suites.

Installed with agentrio (entry point ``pytest11``: ``agentrio = "agentrio.testing"``), so
its fixtures are available in every pytest run once agentrio is installed. See
docs/testing.md for a tour. The fixtures:

- ``agentrio_engine`` — an in-process `Engine` (temporary home, SQLite store) whose
  model replays ``agentrio_turns`` (override that fixture; ``None``, the default,
  means the built-in offline model). ``agentrio_model`` is that model, so a test can
  read `ScriptedModel.calls`. ``agentrio_make_engine(turns=…)`` opens more engines.
- ``agentrio_daemon`` — a real daemon: ``python -m agentrio.engine daemon --port 0`` in a
  subprocess with ``AGENTRIO_HOME`` set to a temporary home (``agentrio_daemon_home``;
  extra environment from ``agentrio_daemon_env``). Teardown sends SIGTERM and asserts
  the daemon exited 0 and removed ``daemon.json`` (R53, §7).
- ``agentrio_client`` — an `agentrio.Client` connected to ``agentrio_daemon``.

And helpers to answer asks by rule: `answer_asks` (a client `Listener`, a `RunHandle`
or `Client.asks`), `approve_next`, `answer_engine_asks` (an in-process engine), and
`allow_commands` (a rule approving ``run_command`` calls whose command matches, in the
directory given: the working directory by default).

Async fixtures work in ``trio_mode`` and in tests marked ``@pytest.mark.trio``; a test
that needs them without either fails at once saying what to set (`pytest_runtest_setup`).
`ModelReply`, `ToolCallRequest`, `ScriptedTurn` and `ScriptedModel` are re-exported
here so a suite can write turns with one import.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import IO, Final, TypeAlias

import attrs
import pytest

from agentrio import (
    AskNotice,
    Client,
    ClientError,
    Decision,
    Listener,
    Rule,
    RunHandle,
    connect,
)
from agentrio.approvals import RuleOfCommands
from agentrio.engine.assembly import open_engine
from agentrio.engine.config import Config, load_config
from agentrio.engine.core import Engine
from agentrio.engine.errors import AlreadyResolved
from agentrio.engine.models.base import Model, ModelReply, ToolCallRequest
from agentrio.engine.models.builtin import BuiltinModel
from agentrio.engine.models.scripted import ScriptedModel, ScriptedTurn, Turn
from agentrio.engine.pending import Offered
from agentrio.engine.server.ws import ask_frame
from agentrio.engine.tools.sudo import PasswordVerifier
from agentrio.handles import Controls
from agentrio.protocol.asks import answer_of
from agentrio.protocol.frames import Ask

__all__ = [
    "START_DEADLINE_S",
    "STOP_DEADLINE_S",
    "TRIO_MODE_HINT",
    "AskSource",
    "DaemonProcess",
    "Engine",
    "EngineFactory",
    "ModelReply",
    "RunningDaemon",
    "ScriptedModel",
    "ScriptedTurn",
    "ToolCallRequest",
    "Turn",
    "agentrio_client",
    "agentrio_config",
    "agentrio_daemon",
    "agentrio_daemon_env",
    "agentrio_daemon_home",
    "agentrio_engine",
    "agentrio_home",
    "agentrio_make_engine",
    "agentrio_model",
    "agentrio_turns",
    "allow_commands",
    "answer_asks",
    "answer_engine_asks",
    "approve_next",
    "ask_frame",
]

#: Seconds a daemon may take to write daemon.json.
START_DEADLINE_S: Final = 15.0
#: R53: a stopped daemon exits within 5 s.
STOP_DEADLINE_S: Final = 5.0

#: What `answer_asks` reads: a client listener, a run's asks, or `Client.asks`.
AskSource: TypeAlias = Listener | RunHandle | AsyncIterator[AskNotice]
#: ``agentrio_make_engine``: ``(turns=…, *, model=…, config=…, verifier=…)``.
EngineFactory: TypeAlias = Callable[..., AbstractAsyncContextManager[Engine]]


# ---------------------------------------------------------------------- daemon


@attrs.frozen(kw_only=True)
class RunningDaemon:
    """How to reach a daemon started by `DaemonProcess`."""

    base_url: str
    ws_url: str
    token: str
    home: Path
    pid: int

    @property
    def env(self) -> dict[str, str]:
        """The environment of a process that should find this daemon by its home."""
        return {**os.environ, "AGENTRIO_HOME": str(self.home)}

    def connect(self) -> AbstractAsyncContextManager[Client]:
        """An `agentrio.connect` to this daemon."""
        return connect(self.ws_url, self.token)


class DaemonProcess:
    """``python -m agentrio.engine daemon --port 0 --home HOME`` as a subprocess.

    The constructor returns once the daemon wrote ``daemon.json`` (polled: a subprocess
    start cannot be awaited) and raises `AssertionError` when it exits or takes longer
    than `START_DEADLINE_S`. Blocking: call it from a sync fixture or a worker thread.
    Output goes to ``<home>/stdout.log``. ``cwd`` is the daemon's working directory
    (default: this process's); unless ``args`` hold a ``--cwd``, it is also where the
    daemon's sessions that name no directory work (R86; `allow_commands` expects them
    there).
    """

    def __init__(
        self,
        home: Path,
        env: dict[str, str] | None = None,
        *,
        args: Sequence[str] = (),
        cwd: Path | None = None,
    ) -> None:
        self.home = home
        home.mkdir(parents=True, exist_ok=True)
        environment = {**os.environ, "AGENTRIO_HOME": str(home), **(env or {})}
        self.log: IO[bytes] | None = (home / "stdout.log").open("ab")
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "agentrio.engine",
                "daemon",
                "--port",
                "0",
                "--home",
                str(home),
                *([] if "--cwd" in args else ["--cwd", str(cwd or os.getcwd())]),
                *args,
            ],
            env=environment,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        try:
            self.info = self._wait_for_daemon_json()
        except BaseException:
            self.close()
            raise

    @property
    def pid(self) -> int:
        return self.process.pid

    def _wait_for_daemon_json(self) -> RunningDaemon:
        deadline = time.monotonic() + START_DEADLINE_S
        path = self.home / "daemon.json"
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(
                    f"daemon exited with {self.process.returncode}; see {self.home}/stdout.log"
                )
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                data = None
            if isinstance(data, dict) and data.get("pid") == self.process.pid:
                token = (self.home / "token").read_text(encoding="utf-8").strip()
                host, port = data["host"], data["port"]
                return RunningDaemon(
                    base_url=f"http://{host}:{port}",
                    ws_url=f"ws://{host}:{port}/v1/ws",
                    token=token,
                    home=self.home,
                    pid=self.process.pid,
                )
            time.sleep(0.05)
        raise AssertionError("daemon did not write daemon.json in time")

    def stop(self) -> int:
        """SIGTERM; returns the exit code (the daemon must be gone within 5 s, R53)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=STOP_DEADLINE_S)
        finally:
            self.close()

    def kill(self) -> None:
        """``kill -9``: no cleanup of any kind runs."""
        self.process.kill()
        self.process.wait(timeout=STOP_DEADLINE_S)
        self.close()

    def close(self) -> None:
        """Kill the process if it still runs; close the log. Idempotent."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        if self.log is not None:
            self.log.close()
            self.log = None


# ---------------------------------------------------------------------- trio mode

#: What a user who forgot pytest-trio's trio mode is told (issue 30).
TRIO_MODE_HINT: Final = (
    "set `trio_mode = true` under [tool.pytest.ini_options] in pyproject.toml "
    "(or [pytest] in pytest.ini), or mark the test @pytest.mark.trio (docs/testing.md)"
)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Fail a test that needs Trio and will not get it, with what to set: an async test
    using one of this plugin's fixtures, or any test using one of its async fixtures,
    when trio mode is off and the test has no ``trio`` mark (without this, pytest says
    only that no plugin handled the async fixture). Other async tests -- asyncio's,
    anyio's -- are left to their plugins."""
    if not isinstance(item, pytest.Function) or _trio_mode(item.config):
        return
    if item.get_closest_marker("trio") or item.get_closest_marker("anyio"):
        return
    ours = _our_fixtures(item)
    async_ours = [name for name, func in ours.items() if _is_async(func)]
    if not async_ours and not (ours and _is_async(item.obj)):
        return
    what = f"uses the async fixture {async_ours[0]}" if async_ours else "is async"
    need = (
        "pytest-trio, which is not installed: pip install 'agentrio[testing]', then "
        if not _has_trio_plugin(item.config)
        else "pytest-trio's trio mode: "
    )
    pytest.fail(f"agentrio: {item.name} {what} and needs {need}{TRIO_MODE_HINT}", pytrace=False)


def _trio_mode(config: pytest.Config) -> bool:
    try:
        return bool(config.getini("trio_mode"))
    except ValueError:  # pytest-trio is not installed: no such option
        return False


def _has_trio_plugin(config: pytest.Config) -> bool:
    return config.pluginmanager.has_plugin("trio")


def _our_fixtures(item: pytest.Function) -> dict[str, Callable[..., object]]:
    """The fixtures of this plugin ``item`` uses (directly or through others), by name,
    unless a suite overrides them."""
    info = getattr(item, "_fixtureinfo", None)
    defs = getattr(info, "name2fixturedefs", {}) if info is not None else {}
    found: dict[str, Callable[..., object]] = {}
    for name, chain in defs.items():
        func = chain[-1].func if chain else None
        if func is not None and getattr(func, "__module__", None) == __name__:
            found[name] = func
    return found


def _is_async(func: object) -> bool:
    import inspect

    return inspect.iscoroutinefunction(func) or inspect.isasyncgenfunction(func)


@pytest.fixture
def agentrio_daemon_home(tmp_path: Path) -> Path:
    """The home of ``agentrio_daemon``. Override it (or write ``config.toml`` into it
    from a fixture the daemon depends on) to configure the daemon."""
    return tmp_path / "agentrio-daemon-home"


@pytest.fixture
def agentrio_daemon_env() -> dict[str, str]:
    """Extra environment variables for ``agentrio_daemon``."""
    return {}


@pytest.fixture
def agentrio_daemon(
    agentrio_daemon_home: Path, agentrio_daemon_env: dict[str, str]
) -> Iterator[RunningDaemon]:
    """A running daemon (`RunningDaemon`: base_url, ws_url, token, home, pid). On
    teardown it is stopped with SIGTERM and must exit 0 and remove daemon.json."""
    process = DaemonProcess(agentrio_daemon_home, agentrio_daemon_env)
    try:
        yield process.info
    finally:
        code = process.stop()
    assert code == 0, f"the daemon exited with {code}; see {agentrio_daemon_home}/stdout.log"
    assert not (agentrio_daemon_home / "daemon.json").exists()


@pytest.fixture
async def agentrio_client(agentrio_daemon: RunningDaemon) -> AsyncIterator[Client]:
    """A `Client` connected to ``agentrio_daemon``; closed after the test."""
    async with agentrio_daemon.connect() as client:
        yield client


# ---------------------------------------------------------------------- engine


@pytest.fixture
def agentrio_home(tmp_path: Path) -> Path:
    """The home of the in-process engine (not the daemon's)."""
    return tmp_path / "agentrio-home"


@pytest.fixture
def agentrio_config(agentrio_home: Path) -> Config:
    """The engine's configuration: ``<agentrio_home>/config.toml`` if a fixture wrote
    one, else the defaults; with no ``[agent] cwd`` there, sessions that name no
    directory work in this process's working directory (R86, as `allow_commands`
    expects)."""
    config = load_config(agentrio_home)
    if config.agent.cwd:
        return config
    return attrs.evolve(config, agent=attrs.evolve(config.agent, cwd=os.getcwd()))


@pytest.fixture
def agentrio_turns() -> list[Turn] | None:
    """The turns the engine's model replays (see `agentrio.engine.models.scripted`). Override
    in your module; ``None`` means the built-in offline model."""
    return None


@pytest.fixture
def agentrio_model(agentrio_turns: list[Turn] | None) -> Model:
    """A `ScriptedModel` of ``agentrio_turns``, or the built-in model for ``None``."""
    if agentrio_turns is None:
        return BuiltinModel()
    return ScriptedModel(agentrio_turns)


@pytest.fixture
async def agentrio_engine(agentrio_config: Config, agentrio_model: Model) -> AsyncIterator[Engine]:
    """An in-process engine; every run is cancelled (``shutdown``) after the test."""
    async with open_engine(agentrio_config, model=agentrio_model) as engine:
        yield engine


@pytest.fixture
def agentrio_make_engine(agentrio_config: Config) -> EngineFactory:
    """``async with agentrio_make_engine(turns=[…]) as engine:`` — more engines, each
    with its own model. ``config`` defaults to ``agentrio_config`` (engines on one home
    share its store, as two daemon processes would); ``verifier`` checks system
    passwords (R7) without sudo."""

    @asynccontextmanager
    async def make(
        turns: Sequence[Turn] | None = None,
        *,
        model: Model | None = None,
        config: Config | None = None,
        verifier: PasswordVerifier | None = None,
    ) -> AsyncIterator[Engine]:
        if model is None:
            model = BuiltinModel() if turns is None else ScriptedModel(turns)
        async with open_engine(config or agentrio_config, model=model, verifier=verifier) as engine:
            yield engine

    return make


# ---------------------------------------------------------------------- asks


def allow_commands(
    pattern: str | re.Pattern[str],
    *,
    cwd: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | None = None,
    reason: str = "",
) -> Rule:
    """A rule: approve a ``run_command`` whose command (an argv as ``shlex.join`` of it)
    fully matches ``pattern`` and whose working directory is ``cwd`` (one directory or
    several; default: this process's working directory, where a daemon started by the
    test runs commands that name none) -- compared as real paths, as the confirmation
    shows them (`agentrio.approvals`). Every other confirmation is denied with
    ``reason`` (default: names the pattern). Questions and secrets are denied: answer
    those yourself."""
    if cwd is None:
        places: list[str | os.PathLike[str]] = [os.getcwd()]
    elif isinstance(cwd, (str, os.PathLike)):
        places = [cwd]
    else:
        places = list(cwd)
    judge = RuleOfCommands.of(pattern, places)
    where = ", ".join(sorted(judge.directories))
    why = reason or f"not allowed: only commands matching {judge.pattern.pattern!r} in {where} run"

    def rule(ask: Ask) -> Decision:
        return Decision.allow() if judge.allows(ask) else Decision.deny(why)

    return rule


async def _decide(rule: Rule, ask: Ask) -> Decision:
    result = rule(ask)
    if not isinstance(result, (Decision, bool)):
        result = await result
    if isinstance(result, Decision):
        return result
    return Decision.allow() if result else Decision.deny("denied by rule")


def _client_of(source: AskSource, client: Client | None) -> Controls:
    if client is not None:
        return client
    if isinstance(source, (Listener, RunHandle)):
        return source.client
    raise TypeError("pass client= for an ask source that is not a Listener or a RunHandle")


async def answer_asks(
    source: AskSource,
    rule: Rule,
    *,
    limit: int | None = None,
    client: Client | None = None,
) -> list[tuple[Ask, Decision]]:
    """Answer every ask ``source`` yields with ``rule`` until ``limit`` asks were
    answered or the source ends (its run finished, its connection closed); returns
    what was decided. Withdrawn and verify notices are skipped; an ask withdrawn before
    its answer got there counts as answered. Run it in a nursery to answer in the
    background: ``nursery.start_soon(answer_asks, listener, rule)``."""
    the_client = _client_of(source, client)
    asks = source.asks() if isinstance(source, RunHandle) else source
    decided: list[tuple[Ask, Decision]] = []
    if limit is not None and limit <= 0:
        return decided
    async for notice in asks:
        if not isinstance(notice, Ask):
            continue
        decision = await _decide(rule, notice)
        try:
            await the_client.decide(notice.id, decision)
        except ClientError as exc:
            if exc.code != "gone":
                raise
        decided.append((notice, decision))
        if limit is not None and len(decided) >= limit:
            break
    return decided


async def approve_next(source: AskSource, *, client: Client | None = None) -> Ask:
    """Wait for the next ask of ``source``, approve it and return it. Raises
    `AssertionError` when the source ends first."""
    answered = await answer_asks(source, lambda ask: True, limit=1, client=client)
    assert answered, "the ask source ended before an ask arrived"
    return answered[0][0]


async def answer_engine_asks(
    engine: Engine, rule: Rule, *, prefix: str = "", limit: int | None = None
) -> list[tuple[Ask, Decision]]:
    """`answer_asks` for an in-process engine: a registry listener on ``prefix``
    (R2) answers asks with ``rule`` until ``limit`` were answered (run it in a
    nursery and cancel it otherwise). The listener is closed on exit, which fails its
    unanswered claims (R6: never an approval)."""
    decided: list[tuple[Ask, Decision]] = []
    if limit is not None and limit <= 0:
        return decided
    with engine.registry.listen(prefix) as listener:
        while limit is None or len(decided) < limit:
            notice = await listener.next_notice()
            if not isinstance(notice, Offered) or notice.entry.resolved:
                continue
            ask = ask_frame(notice.entry)
            decision = await _decide(rule, ask)
            reply = answer_of(decision)
            try:
                await engine.answer(notice.entry.id, reply, by=listener)
            except AlreadyResolved:
                pass  # withdrawn while the rule decided (R3): nothing to answer
            decided.append((ask, decision))
    return decided
