"""The asyncio ⇄ Trio bridge and the ``agentrio`` entry point (SPEC §11)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import types
from collections.abc import Callable
from pathlib import Path

import pytest
import trio
import trio.lowlevel
from prompt_toolkit.application import create_app_session
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput

from agentrio.protocol.frames import Accepted, Run
from agentrio.repl import cli
from agentrio.repl.app import ReplApp
from agentrio.repl.bridge import FrameSink, run_with_trio
from agentrio.repl.messages import Connected, Incoming, Outgoing
from agentrio.repl.state import ReplState

ROOT = Path(__file__).resolve().parents[2]


def test_bridge_round_trip_and_shutdown(tmp_path: Path) -> None:
    """SPEC §11: frames cross from the prompt app to the Trio client and back; leaving
    the app cancels the Trio side, which closes its connection."""
    seen: list[Outgoing] = []
    closed: list[bool] = []

    async def client_main(
        *,
        home: Path,
        outgoing: trio.MemoryReceiveChannel[Outgoing],
        deliver: Callable[[Incoming], None],
    ) -> None:
        assert home == tmp_path
        deliver(Connected(url="http://fake", daemon_version="1.0"))
        try:
            async for item in outgoing:
                seen.append(item)
                if isinstance(item, Run):
                    deliver(
                        Accepted(
                            request_id=item.request_id,
                            session_id=item.session_id,
                            task_hash="a" * 32,
                        )
                    )
        finally:
            closed.append(True)

    async def main() -> None:
        with create_pipe_input() as pipe, create_app_session(input=pipe, output=DummyOutput()):
            sink = FrameSink()
            state = ReplState(session_id="cli-1", window_hash="w", send=sink)
            app = ReplApp(state)
            task = asyncio.ensure_future(
                run_with_trio(app, sink, home=tmp_path, client_main=client_main)
            )

            async def until(condition: Callable[[], bool]) -> None:
                for _ in range(400):
                    if condition():
                        return
                    await asyncio.sleep(0.005)
                raise AssertionError("timed out")

            await until(lambda: state.connection == "connected")
            pipe.send_text("hello\r")
            await until(lambda: any(run.task_hash for run in state.runs.values()))
            run = next(iter(state.runs.values()))
            assert run.task_hash == "a" * 32
            pipe.send_text("/quit\r")
            await asyncio.wait_for(task, 5)

    asyncio.run(main())
    assert [type(i).__name__ for i in seen] == ["OpenWindow", "ListLegs", "ListPending", "Run"]
    assert closed == [True]


def test_bridge_trio_crash_ends_the_app(tmp_path: Path) -> None:
    """SPEC §11: if the Trio side dies, the prompt ends too and the error surfaces."""

    async def client_main(
        *,
        home: Path,
        outgoing: trio.MemoryReceiveChannel[Outgoing],
        deliver: Callable[[Incoming], None],
    ) -> None:
        await trio.lowlevel.checkpoint()
        raise RuntimeError("client broke")

    async def main() -> None:
        with create_pipe_input() as pipe, create_app_session(input=pipe, output=DummyOutput()):
            sink = FrameSink()
            app = ReplApp(ReplState(session_id="cli-1", window_hash="w", send=sink))
            await asyncio.wait_for(
                run_with_trio(app, sink, home=tmp_path, client_main=client_main), 5
            )

    with pytest.raises(RuntimeError, match="client broke"):
        asyncio.run(main())


def test_cli_help(capsys: pytest.CaptureFixture[str]) -> None:
    """SPEC §11: agentrio --help describes the REPL and the daemon subcommand."""
    with pytest.raises(SystemExit) as info:
        cli.main(["--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: agentrio")
    assert "agentrio daemon" in out


def test_python_m_repl_help() -> None:
    """SPEC §11: python -m agentrio.repl --help works (the same entry point)."""
    done = subprocess.run(
        [sys.executable, "-m", "agentrio.repl", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0
    assert done.stdout.startswith("usage: agentrio")


def test_cli_daemon_hands_argv_to_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    """SPEC §7: agentrio daemon … is agentrio.engine.cli.main with the same arguments."""
    calls: list[list[str]] = []
    fake = types.ModuleType("agentrio.engine.cli")
    fake.main = lambda argv: calls.append(list(argv)) or 7  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "agentrio.engine.cli", fake)
    import agentrio.engine as engine

    monkeypatch.setattr(engine, "cli", fake, raising=False)
    assert cli.main(["daemon", "--port", "0"]) == 7
    assert calls == [["daemon", "--port", "0"]]


def test_cli_rejects_a_non_cli_session(capsys: pytest.CaptureFixture[str]) -> None:
    """SPEC §0, R5: the REPL only runs cli- sessions."""
    assert cli.main(["--session", "chat-x"]) == 2
    assert "--session must look like cli-" in capsys.readouterr().out


@pytest.mark.parametrize("name", ["telegram", "discord"])
def test_agentrio_runs_a_chat_front_end(
    name: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """R82: ``agentrio telegram`` / ``agentrio discord`` run a front-end by hand; with
    no token anywhere it says where one goes and exits 2 (a setup error) without
    connecting."""
    variable = f"AGENTRIO_{name.upper()}_TOKEN"
    monkeypatch.delenv(variable, raising=False)
    assert cli.main([name, "--home", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "no bot token" in err
    assert variable in err
