"""Daemon lifecycle pieces: single instance, daemon.json, background clearing, CLI (R27)."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from agentrio.engine.cli import build_parser, main
from agentrio.engine.server.lifecycle import (
    AlreadyRunning,
    clear_background,
    instance_lock,
    read_daemon_json,
    remove_daemon_json,
    write_daemon_json,
)


def test_second_instance_names_the_holder(tmp_path: Path) -> None:
    """§7: one daemon per home; the second is told the pid and address of the first."""
    write_daemon_json(tmp_path, {"pid": 4242, "host": "127.0.0.1", "port": 5555})
    with instance_lock(tmp_path):
        with pytest.raises(AlreadyRunning) as info, instance_lock(tmp_path):
            raise AssertionError("unreachable")
    assert str(info.value) == (
        f"an agentrio daemon is already running for {tmp_path} (pid 4242, http://127.0.0.1:5555)"
    )
    with instance_lock(tmp_path):  # released on exit
        pass


def test_daemon_json_is_atomic_and_only_removed_by_its_owner(tmp_path: Path) -> None:
    """§7: daemon.json is written whole (0600) and removed only by the pid it names."""
    info = {"pid": 1, "host": "127.0.0.1", "port": 2, "started_at": 3.0, "version": "v"}
    write_daemon_json(tmp_path, info)
    assert json.loads((tmp_path / "daemon.json").read_text()) == info
    assert stat.S_IMODE((tmp_path / "daemon.json").stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["daemon.json"]
    remove_daemon_json(tmp_path, 2)
    assert read_daemon_json(tmp_path) == info
    remove_daemon_json(tmp_path, 1)
    assert read_daemon_json(tmp_path) is None


def test_background_folders_are_cleared(tmp_path: Path) -> None:
    """R27: every sessions/*/background/ folder is removed at start; reports stay."""
    for session in ("cli-a", "chat-b"):
        folder = tmp_path / "sessions" / session / "background"
        folder.mkdir(parents=True)
        (folder / "job_1a2b3c4d.json").write_text("{}")
    (tmp_path / "sessions" / "cli-a" / "reports").mkdir()
    assert clear_background(tmp_path) == 2
    assert sorted(p.name for p in (tmp_path / "sessions").glob("*/*")) == ["reports"]
    assert clear_background(tmp_path / "missing") == 0


def test_cli_help_and_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    """§7: ``agentrio daemon --help`` explains the options; a bad port is a usage error."""
    with pytest.raises(SystemExit) as info:
        main(["daemon", "--help"])
    assert info.value.code == 0
    text = capsys.readouterr().out
    for needle in ("--port N", "--host H", "--home DIR", "0 picks a free one", "daemon.json"):
        assert needle in text
    with pytest.raises(SystemExit) as info:
        main(["daemon", "--port", "70000"])
    assert info.value.code == 2
    assert "port must be 0-65535" in capsys.readouterr().err
    assert build_parser().parse_args(["daemon", "--port", "0"]).port == 0


def test_cli_reports_a_bad_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """§7: an invalid config.toml stops the daemon with exit 2 and one clear line."""
    (tmp_path / "config.toml").write_text('[server]\nport = "x"\n')
    assert main(["daemon", "--home", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("agentrio daemon: ")
    assert "server.port" in err
