"""Issue 30: the pytest plugin tells a user who forgot pytest-trio's trio mode what to
set, instead of pytest's "requested an async fixture … no plugin or hook that handled
it". A user's project in a temporary folder, its own pytest in a subprocess (the plugin
is loaded from the installed entry point)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from agentrio.testing import TRIO_MODE_HINT

SUITE = """
import pytest


async def test_async_with_our_fixture(agentrio_engine):
    assert agentrio_engine is not None


def test_sync_plain(agentrio_home):
    assert agentrio_home.name == "agentrio-home"


@pytest.mark.trio
async def test_marked(agentrio_engine):
    assert agentrio_engine is not None
"""

#: A sync test using the async fixture: an error in trio mode too (pytest-trio says
#: Trio fixtures need Trio tests), so only the run without trio mode has it.
SYNC_WITH_ASYNC = """

def test_sync_with_our_async_fixture(agentrio_engine):
    pass
"""


def _pytest(project: Path, ini: str, suite: str = SUITE) -> subprocess.CompletedProcess[str]:
    (project / "pytest.ini").write_text(ini)
    (project / "test_user.py").write_text(suite)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "default"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_without_trio_mode_the_tests_needing_trio_fail_saying_what_to_set(tmp_path: Path) -> None:
    """Issue 30: without ``trio_mode``, the async test and the sync test using the async
    fixture fail with the plugin's one message naming ``trio_mode = true``; the plain
    sync test and the ``@pytest.mark.trio`` one pass."""
    done = _pytest(tmp_path, "[pytest]\n", SUITE + SYNC_WITH_ASYNC)
    out = done.stdout
    assert done.returncode == 1, out
    assert "2 passed, 2 errors" in out, out
    assert (
        "agentrio: test_async_with_our_fixture uses the async fixture agentrio_engine "
        f"and needs pytest-trio's trio mode: {TRIO_MODE_HINT}"
    ) in out
    assert "agentrio: test_sync_with_our_async_fixture uses the async fixture" in out
    assert "no plugin or hook that handled it" not in out


def test_with_trio_mode_the_same_suite_passes(tmp_path: Path) -> None:
    """Issue 30: with ``trio_mode = true`` nothing is said and the whole suite passes."""
    done = _pytest(tmp_path, "[pytest]\ntrio_mode = true\n")
    assert done.returncode == 0, done.stdout
    assert "3 passed" in done.stdout
    assert "agentrio:" not in done.stdout
