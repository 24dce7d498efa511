"""The code in README.md and docs/testing.md works as printed: the pytest examples run
as a user's own suite (in a directory of their own, with only the installed plugin)
and the scripting example runs against a real daemon."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import trio

from agentrio.testing import RunningDaemon

ROOT = Path(__file__).resolve().parents[2]
BLOCK = re.compile(r"```python\n(?P<code>.*?)\n```", re.S)


def _blocks(name: str) -> list[str]:
    return [m["code"] for m in BLOCK.finditer((ROOT / name).read_text(encoding="utf-8"))]


async def test_pytest_examples_pass_as_a_users_suite(tmp_path: Path) -> None:
    """R61, R8, R41, R42: every pytest example of docs/testing.md and the README's
    passes, run by pytest in a directory outside this project."""
    tests = [code for code in _blocks("docs/testing.md") if "async def test_" in code]
    tests += [code for code in _blocks("README.md") if "async def test_" in code]
    assert len(tests) == 4
    suite = tmp_path / "suite"
    suite.mkdir()
    for index, code in enumerate(tests):
        (suite / f"test_snippet_{index}.py").write_text(code + "\n", encoding="utf-8")
    expected = sum(code.count("async def test_") for code in tests)
    with trio.fail_after(120):
        result = await trio.run_process(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
             "-o", "trio_mode=true", "-W", "error", str(suite)],
            cwd=tmp_path, capture_stdout=True, capture_stderr=True, check=False,
        )  # fmt: skip
    output = result.stdout.decode() + result.stderr.decode()
    assert result.returncode == 0, output
    assert f"{expected} passed" in output


async def test_readme_scripting_example_runs(
    agentrio_daemon: RunningDaemon, tmp_path: Path
) -> None:
    """§8: the README's scripting example runs against a daemon found through
    ``AGENTRIO_HOME`` and ends ``finished``, having run the confirmed command."""
    [code] = [c for c in _blocks("README.md") if "connect()" in c]
    target = tmp_path / "x"
    script = tmp_path / "readme_example.py"
    script.write_text(code.replace("/tmp/x", str(target)), encoding="utf-8")
    with trio.fail_after(30):
        result = await trio.run_process(
            [sys.executable, str(script)],
            env=agentrio_daemon.env, capture_stdout=True, capture_stderr=True, check=False,
        )  # fmt: skip
    output = result.stdout.decode()
    assert result.returncode == 0, result.stderr.decode()
    assert output.splitlines()[-1] == "finished"
    assert target.exists()
