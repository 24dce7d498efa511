"""Issue 30 "Extras for what not everyone needs": the front-ends' libraries, the Redis
store's client and the watcher's fast path are extras, and a configuration that turns
one on without it installed stops the daemon (or the hand-run front-end) with one line
naming the extra, exit 2, before anything starts.

The missing library is simulated the way Python itself reads it: ``sys.modules[name] =
None`` makes `importlib.util.find_spec` return None and an import raise
`ModuleNotFoundError`, in a real subprocess of the real command line.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

CONFIGS = {
    "telegram": "[telegram]\nenabled = true\nallowed_users = [1]\n",
    "discord": "[discord]\nenabled = true\nallowed_users = [1]\n",
    "redis": '[store]\nbackend = "redis"\nurl = "redis://127.0.0.1:1"\n',
}
MODULES = {"telegram": "telegram", "discord": "discord", "redis": "coredis"}


def _run_without(module: str, argv: list[str], home: Path) -> subprocess.CompletedProcess[str]:
    code = (
        f"import sys; sys.modules[{module!r}] = None\n"
        "from agentrio.repl.cli import main\n"
        f"sys.exit(main({argv!r}))\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={"AGENTRIO_HOME": str(home), "PATH": "/usr/bin:/bin", "HOME": str(home)},
    )


@pytest.mark.parametrize("extra", sorted(CONFIGS))
def test_the_daemon_names_the_missing_extra_in_one_line(tmp_path: Path, extra: str) -> None:
    """Issue 30: ``[telegram] enabled``, ``[discord] enabled`` or ``backend = "redis"``
    without the extra: one line naming ``agentrio[<extra>]``, exit 2, and the daemon
    never served (no daemon.json, no front-end log)."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(CONFIGS[extra])
    done = _run_without(MODULES[extra], ["daemon", "--port", "0", "--home", str(home)], home)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert f"pip install 'agentrio[{extra}]'" in lines[0]
    key = {"telegram": "telegram.enabled", "discord": "discord.enabled", "redis": "store.backend"}
    assert lines[0].startswith(f"agentrio daemon: {home / 'config.toml'}:2: {key[extra]}: ")
    assert not (home / "daemon.json").exists()
    assert not (home / f"{extra}.log").exists()


@pytest.mark.parametrize("name", ["telegram", "discord"])
def test_a_front_end_run_by_hand_names_its_missing_extra(tmp_path: Path, name: str) -> None:
    """Issue 30: ``agentrio telegram`` / ``agentrio discord`` without its library: one
    line naming the extra, exit 2, no traceback."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(CONFIGS[name])
    (home / f"{name}.token").write_text("123:abc\n")
    (home / f"{name}.token").chmod(0o600)
    done = _run_without(MODULES[name], [name, "--home", str(home)], home)
    assert done.returncode == 2, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last == (
        f"agentrio {name}: {name} is not installed: pip install 'agentrio[{name}]'"
        " (or `make run` in a checkout)"
    )
    assert "Traceback" not in done.stderr


def test_the_optional_libraries_are_extras_and_the_test_extra_has_them_all() -> None:
    """Issue 30: no front-end library, Redis client or Hyperscan among the core
    dependencies; each is its extra; ``[testing]`` brings pytest and pytest-trio; and
    ``[test]`` (what `make run` and `make test` install) pulls every one of them."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = " ".join(project["dependencies"])
    for library in ("python-telegram-bot", "discord.py", "coredis", "hyperscan", "pytest"):
        assert library not in core
    extras = project["optional-dependencies"]
    assert extras["telegram"][0].startswith("python-telegram-bot")
    assert extras["discord"][0].startswith("discord.py")
    assert extras["redis"][0].startswith("coredis")
    assert extras["fast"][0].startswith("hyperscan")
    assert "platform_machine == 'x86_64'" in extras["fast"][0]
    assert [r.split(">")[0] for r in extras["testing"]] == ["pytest", "pytest-trio"]
    assert extras["test"][0] == "agentrio[telegram,discord,redis,fast,testing]"
    makefile = (ROOT / "Makefile").read_text()
    assert "-e '.[test]'" in makefile
