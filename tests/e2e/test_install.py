"""``pip install .`` into a new, empty virtual environment gives a working
``agentrio`` command and the pytest plugin (README, §7, §11).

The install resolves the declared dependencies through pip's configured index (its
cache makes repeated runs quick); the source is copied first so the build leaves
nothing in the checkout."""

from __future__ import annotations

import importlib.metadata
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: What a source distribution of agentrio needs to build.
SOURCES = ("pyproject.toml", "README.md", "engine", "protocol", "repl", "agentrio")
PIP_TIMEOUT_S = 240


def _run(*argv: str | Path, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in argv],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_pip_install_gives_agentrio_and_the_plugin(tmp_path: Path) -> None:
    """§7, §11: after ``pip install .`` in a fresh venv (no system site packages),
    ``agentrio --help`` and ``agentrio daemon --help`` work, the packages come from the
    venv, and the ``pytest11`` entry point names ``engine.testing``."""
    source = tmp_path / "src"
    source.mkdir()
    for name in SOURCES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(path, source / name)
    venv = tmp_path / "venv"
    # No pip inside the new venv: this interpreter's pip installs into it (--python),
    # which saves bootstrapping one; --no-compile skips writing .pyc files.
    made = _run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    bin_dir = venv / "bin"
    installed = _run(
        sys.executable, "-m", "pip", "--python", bin_dir / "python", "install", "-q",
        "--no-compile", source, cwd=tmp_path, timeout=PIP_TIMEOUT_S,
    )  # fmt: skip
    assert installed.returncode == 0, installed.stderr[-2000:]

    top = _run(bin_dir / "agentrio", "--help", cwd=tmp_path)
    assert top.returncode == 0, top.stderr
    assert top.stdout.startswith("usage: agentrio")
    assert "Open the agentrio REPL" in top.stdout

    daemon = _run(bin_dir / "agentrio", "daemon", "--help", cwd=tmp_path)
    assert daemon.returncode == 0, daemon.stderr
    assert daemon.stdout.startswith("usage: agentrio daemon")
    assert "--port N" in daemon.stdout

    probe = _run(
        bin_dir / "python",
        "-c",
        "import importlib.metadata as m, engine, agentrio;"
        "print(engine.__file__); print(agentrio.__file__);"
        "print([e.value for e in m.entry_points(group='pytest11') if e.name == 'agentrio'])",
        cwd=tmp_path,
    )
    assert probe.returncode == 0, probe.stderr
    where, client_where, plugin = probe.stdout.splitlines()
    assert Path(where).is_relative_to(venv)
    assert Path(client_where).is_relative_to(venv)
    assert plugin == "['engine.testing']"
    assert importlib.metadata.version("agentrio") in _run(
        bin_dir / "python", "-c", "import importlib.metadata as m; print(m.version('agentrio'))",
        cwd=tmp_path,
    ).stdout  # fmt: skip
