"""The project's own Python files, for the tests that read the source (layering,
architecture): what git tracks, plus new files not yet added, never what git ignores --
``build/`` and ``*.egg-info`` of a ``pip install .`` in the checkout, virtual
environments, caches (issue 30: the layering test failed on ``build/``).

Outside a git checkout (an unpacked source archive) the folders git would ignore are
skipped by name instead.
"""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path
from typing import Final

__all__ = ["ROOT", "python_files", "top_level_packages"]

ROOT: Final = Path(__file__).resolve().parents[1]

#: What the fallback skips: the build outputs and environments of .gitignore.
_IGNORED: Final = frozenset({"build", "dist", "__pycache__", ".venv", ".venv-bench"})


def _listed(root: Path) -> list[Path] | None:
    """Every ``*.py`` git tracks or would track under ``root`` (not ignored), or None
    when ``root`` is not in a git checkout."""
    try:
        done = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", "*.py"],
            cwd=root,
            capture_output=True,
            timeout=30,
            check=False,
        )
    except OSError:
        return None
    if done.returncode != 0:
        return None
    names = {name for name in done.stdout.decode().split("\0") if name}
    return sorted(root / name for name in names if (root / name).is_file())


@functools.cache
def _project_listed() -> list[Path] | None:
    """`_listed` of the project, read once per test process."""
    return _listed(ROOT)


def python_files(folder: str = "", *, root: Path = ROOT) -> list[Path]:
    """The project's ``*.py`` under ``root/folder`` (all of them for ``""``), sorted."""
    base = root / folder if folder else root
    listed = _project_listed() if root == ROOT else _listed(root)
    if listed is None:
        listed = [
            path
            for path in sorted(root.rglob("*.py"))
            if not any(
                part in _IGNORED or part.endswith(".egg-info") or part.startswith(".")
                for part in path.relative_to(root).parts[:-1]
            )
        ]
    return [path for path in listed if path.is_relative_to(base)]


def top_level_packages(*, root: Path = ROOT) -> list[str]:
    """The top-level folders holding project Python files, sorted."""
    return sorted(
        {
            path.relative_to(root).parts[0]
            for path in python_files(root=root)
            if len(path.relative_to(root).parts) > 1
        }
    )
