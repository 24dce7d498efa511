"""`simple_argv`: the words a command means without a shell, checked against ``sh`` (R74).

Hypothesis writes strings from an alphabet rich in shell syntax. For every string the
parser accepts, ``/bin/sh`` must build the same argv, and the sandboxed run must execute
exactly that argv.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentrio.engine.config import Config
from agentrio.engine.processes.sandbox import Sandbox
from agentrio.engine.tools.simple_command import MAX_BYTES, simple_argv

_ALPHABET = st.sampled_from(
    [*"ab09_-./,:@%+=~^ \t'\"$`\\;&|<>(){}[]*?#!\n\r", "\u202e", "\u00a0", "é", "\x1b"]
)
_TAILS = st.text(_ALPHABET, max_size=24)


def _sh_argv(command: str) -> list[str]:
    """The argv /bin/sh builds for ``command``'s words after ``printf``."""
    done = subprocess.run(
        ["/bin/sh", "-c", "set -- " + command + "\nfor a; do printf '%s\\0' \"$a\"; done"],
        capture_output=True,
        check=True,
        env={"PATH": os.defpath, "HOME": "/nonexistent"},
    )
    return done.stdout.decode().split("\0")[:-1]


@given(tail=_TAILS)
@settings(max_examples=300, deadline=None)
def test_every_accepted_string_means_the_same_to_sh(tail: str) -> None:
    """R74: whatever `simple_argv` accepts, sh reads as exactly the same words."""
    parsed = simple_argv("echo " + tail)
    if parsed.argv is None:
        return
    words = list(parsed.argv[1:])
    assert _sh_argv(tail) == words


@pytest.mark.parametrize(
    ("command", "argv"),
    [
        ("ls -la", ("ls", "-la")),
        ("echo 'a b' \"c d\"", ("echo", "a b", "c d")),
        ("echo ''", ("echo", "")),
        ("git log HEAD~2..HEAD^", ("git", "log", "HEAD~2..HEAD^")),
        ("grep -n 'x|y' f", ("grep", "-n", "x|y", "f")),
        (["ls", "a b"], ("ls", "a b")),
    ],
)
def test_accepted(command: str | list[str], argv: tuple[str, ...]) -> None:
    """R74: plain words and literal quoting are simple."""
    assert simple_argv(command).argv == argv


@pytest.mark.parametrize(
    ("command", "why"),
    [
        ("ls ~", "shell syntax or an unusual character: '~'"),
        ("ls a=~", "shell syntax or an unusual character: '~'"),
        ('echo "$x"', "has '$' inside double quotes"),
        ("echo 'a\nb'", "has the character U+000A inside quotes"),
        ("echo \u202e", "shell syntax or an unusual character: U+202E"),
        ("X=1 ls", "starts with a variable assignment"),
        ("if", "starts with the shell keyword 'if'"),
        ("", "is empty"),
        ("   ", "is empty"),
        ("x" * (MAX_BYTES + 1), "is longer than 16 KiB"),
        (["ls", "$(x)"], "has the character '$'"),
        (["ls", "a\nb"], "has the character U+000A"),
    ],
)
def test_refused_with_a_reason(command: str | list[str], why: str) -> None:
    """R74: anything a shell could read differently is refused, and the reason says why."""
    parsed = simple_argv(command)
    assert parsed.argv is None
    assert why in parsed.why


def test_a_megabyte_is_refused_at_once() -> None:
    """Issue 15 item 1: the size bound comes first; no parse of a long command."""
    assert simple_argv("a" * 1_000_000).why == "is longer than 16 KiB"
    assert simple_argv(["ls", "a" * 1_000_000]).why == "is longer than 16 KiB"


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap missing")
@given(tail=_TAILS)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_an_unasked_command_runs_exactly_the_argv_judged(tail: str) -> None:
    """R74, R75: the sandbox executes the judged argv itself: printf receives exactly
    the words `simple_argv` returned."""
    parsed = simple_argv("printf '%s\\0' " + tail)
    if parsed.argv is None:
        return

    async def run() -> bytes:
        sandbox = await Sandbox.probe(Config(home="/nonexistent-home"))
        result = await sandbox.run(parsed.argv or (), cwd="/", timeout_s=30)
        assert result.exit_code == 0, result.output
        return result.output.encode()

    output = trio.run(run)
    # printf with no argument prints its format once, with an empty one.
    assert output.decode().split("\0")[:-1] == (list(parsed.argv[2:]) or [""])
