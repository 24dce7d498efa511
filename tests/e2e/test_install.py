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
import textwrap
import zipfile
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
    venv, and the ``pytest11`` entry point names ``agentrio.testing``."""
    source = _copy_sources(tmp_path / "src")
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
        "import importlib.metadata as m, agentrio.engine, agentrio;"
        "print(agentrio.engine.__file__); print(agentrio.__file__);"
        "print([e.value for e in m.entry_points(group='pytest11') if e.name == 'agentrio'])",
        cwd=tmp_path,
    )
    assert probe.returncode == 0, probe.stderr
    where, client_where, plugin = probe.stdout.splitlines()
    assert Path(where).is_relative_to(venv)
    assert Path(client_where).is_relative_to(venv)
    assert plugin == "['agentrio.testing']"
    assert importlib.metadata.version("agentrio") in _run(
        bin_dir / "python", "-c", "import importlib.metadata as m; print(m.version('agentrio'))",
        cwd=tmp_path,
    ).stdout  # fmt: skip


def test_the_wheel_has_one_top_level_package(tmp_path: Path) -> None:
    """Issue 30: installed, the code answers to ``agentrio.*`` only. The wheel's only
    top-level package is ``agentrio`` (the daemon, protocol and REPL inside it, with the
    page's static files), and its metadata names ``agentrio`` as the only top level."""
    source = _copy_sources(tmp_path / "src")
    built = _run(
        sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
        "-w", tmp_path / "dist", source, cwd=tmp_path, timeout=PIP_TIMEOUT_S,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = (tmp_path / "dist").glob("agentrio-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        tops = {name.split("/")[0] for name in names if ".dist-info/" not in name}
        (top_level,) = [n for n in names if n.endswith(".dist-info/top_level.txt")] or [None]
        listed = archive.read(top_level).decode().split() if top_level else ["agentrio"]
    assert tops == {"agentrio"}
    assert listed == ["agentrio"]
    for expected in (
        "agentrio/engine/core.py",
        "agentrio/protocol/frames.py",
        "agentrio/repl/cli.py",
        "agentrio/testing.py",
        "agentrio/engine/server/static/app.js",
    ):
        assert expected in names


#: A project of a user's own, with packages named like agentrio's folders.
_OWN_PROJECT = {
    "engine/__init__.py": "ENGINE = 'own'\n",
    "engine/testing.py": "WHO = 'own'\n",
    "protocol/__init__.py": "PROTOCOL = 'own'\n",
    "repl/__init__.py": "REPL = 'own'\n",
    "pyproject.toml": "[tool.pytest.ini_options]\ntrio_mode = true\n",
    "tests/test_own.py": textwrap.dedent(
        """\
        import engine
        import engine.testing
        import protocol
        import repl

        from agentrio import Client


        def test_own_packages_are_the_projects():
            assert (engine.ENGINE, engine.testing.WHO) == ("own", "own")
            assert (protocol.PROTOCOL, repl.REPL) == ("own", "own")


        async def test_the_plugin_hands_a_client(agentrio_client: Client):
            run = await agentrio_client.run("chat-own", "run: echo from-agentrio")
            done = await run.wait_done()
            assert done.status == "finished"
        """
    ),
}


def test_a_project_with_its_own_engine_package_keeps_its_tests_green(tmp_path: Path) -> None:
    """Issue 30: installing agentrio into a project's venv, next to the project's own
    ``engine``, ``protocol`` and ``repl`` packages, breaks nothing: the project's
    pytest loads agentrio's plugin and imports the project's own packages."""
    source = _copy_sources(tmp_path / "src")
    project = tmp_path / "project"
    for name, text in _OWN_PROJECT.items():
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_text(text)
    venv = tmp_path / "venv"
    made = _run(sys.executable, "-m", "venv", venv, cwd=tmp_path, timeout=120)
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"
    installed = _run(
        python, "-m", "pip", "install", "-q", "--no-compile", f"{source}[testing]",
        cwd=tmp_path, timeout=PIP_TIMEOUT_S,
    )  # fmt: skip
    assert installed.returncode == 0, installed.stderr[-2000:]
    tested = _run(
        python, "-m", "pytest", "-q", "-p", "no:cacheprovider", cwd=project, timeout=240,
    )  # fmt: skip
    assert tested.returncode == 0, tested.stdout[-3000:] + tested.stderr[-2000:]
    assert "2 passed" in tested.stdout


def _copy_sources(source: Path) -> Path:
    """The files a source distribution of agentrio needs, copied (its links kept)."""
    source.mkdir(parents=True)
    for name in SOURCES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(
                path, source / name, symlinks=True, ignore=shutil.ignore_patterns("__pycache__")
            )
        else:
            shutil.copy(path, source / name)
    return source
