"""Hidden places judged by real paths, and found (issue 29 findings 1 and 2)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from agentrio.engine.config import Config, ToolsConfig
from agentrio.engine.processes.hidden import HiddenPlaces, ScanTooLarge, discover_homes, named_place
from agentrio.engine.processes.sandbox import Sandbox, SandboxError
from agentrio.engine.tools.policy import classify


def _home(path: Path) -> Path:
    path.mkdir(parents=True)
    (path / "token").write_text("t0ken\n")
    (path / "daemon.lock").write_text("1\n")
    return path


def test_paths_are_judged_by_their_real_path(tmp_path: Path) -> None:
    """Finding 1: ``..`` after a symlink, magic links, a symlinked cwd, an option's
    glued value: each names the home; unrelated paths do not."""
    home = _home(tmp_path / "home")
    deep = tmp_path / "x" / "y"
    deep.mkdir(parents=True)
    (tmp_path / "hop").symlink_to(deep)
    (tmp_path / "to-home").symlink_to(home)
    places = [str(home)]
    assert named_place(["../../home/token"], str(tmp_path / "hop"), places) == str(home)
    assert named_place([f"/proc/self/root{home}/token"], "/", places) == str(home)
    assert named_place([f"/dev/fd/../root{home}"], "/", places) == str(home)
    assert named_place([], str(tmp_path / "to-home"), places) == str(home)
    assert named_place(["token"], str(tmp_path / "x"), places) == ""
    config = ToolsConfig()
    for command in (f"grep -f{home}/token x", "cat ../to-home/token", "cat -n../home/token"):
        verdict = classify(command, config, cwd=str(tmp_path / "x"), hidden=places)
        assert verdict.needs_confirm, command
    assert not classify("cat y/z", config, cwd=str(tmp_path / "x"), hidden=places).needs_confirm


def test_homes_are_found_within_the_documented_depth(tmp_path: Path) -> None:
    """Finding 2: a token next to daemon.lock (or agentrio.db) marks a home; the scan
    goes as deep as asked, follows no symlink, and a complete scan refuses a tree
    larger than its budget."""
    near = _home(tmp_path / "a" / "near")
    far = _home(tmp_path / "a" / "b" / "c" / "far")
    (tmp_path / "token").write_text("not a home: no daemon.lock\n")
    (tmp_path / "link").symlink_to(far.parent)
    assert discover_homes([(str(tmp_path), 2)]) == [str(near)]
    assert sorted(discover_homes([(str(tmp_path), 4)])) == sorted([str(near), str(far)])
    with pytest.raises(ScanTooLarge):
        discover_homes([(str(tmp_path), 4)], budget=3, complete=True)


def test_a_hard_link_in_the_home_is_reported(tmp_path: Path) -> None:
    """Finding 1 (hard links): a second name of a file in the home is `Hidden.linked`."""
    home = _home(tmp_path / "home")
    places = HiddenPlaces(Config(home=str(home)))
    assert places.snapshot().linked == ""
    os.link(home / "token", tmp_path / "innocent")
    assert f"{home}/token" in places.snapshot().linked


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap missing")
async def test_the_sandbox_refuses_a_working_directory_in_a_hidden_place(tmp_path: Path) -> None:
    """Finding 1, the sandbox's own check (behind the policy): a cwd that resolves into
    the home does not run; a cwd symlinked to the home's parent shows the home empty."""
    home = _home(tmp_path / "home")
    (tmp_path / "to-home").symlink_to(home)
    (tmp_path / "to-parent").symlink_to(tmp_path)
    sandbox = await Sandbox.probe(Config(home=str(home)))
    with pytest.raises(SandboxError, match="hidden place"):
        await sandbox.run(["cat", "token"], cwd=str(tmp_path / "to-home"), timeout_s=10)
    result = await sandbox.run(["ls", "-a", "home"], cwd=str(tmp_path / "to-parent"), timeout_s=10)
    assert result.exit_code == 0
    assert "token" not in result.output


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap missing")
async def test_the_bound_directorys_descriptor_does_not_reach_the_command(tmp_path: Path) -> None:
    """Finding 1: the descriptor a ``/tmp`` working directory is bound from would walk
    the daemon's mounts, where nothing is hidden; neither the command nor the
    sandbox's first process holds it."""
    home = _home(tmp_path / "home")
    work = tmp_path / "work"
    work.mkdir()
    sandbox = await Sandbox.probe(Config(home=str(home)))
    result = await sandbox.run(
        ["ls", "-l", "/proc/self/fd/", "/proc/1/fd/"], cwd=str(work), timeout_s=10
    )
    assert result.exit_code == 0, result.output
    assert str(work) not in result.output
    assert str(tmp_path) not in result.output
