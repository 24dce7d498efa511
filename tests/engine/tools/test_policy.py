"""engine/tools/policy.py: which commands are read-only (R60) and which confirmations
need the system password (R7)."""

from __future__ import annotations

import attrs
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from agentrio.engine.config import ToolsConfig
from agentrio.engine.tools.policy import (
    SHELL_OPERATORS,
    Verdict,
    classify,
    is_read_only,
    touches_restricted,
)

CONFIG = ToolsConfig()


@pytest.mark.parametrize(
    "command",
    [
        "ls",
        "ls -la /tmp",
        "cat README.md",
        "grep -rn 'needle' src",
        "head -n 5 file",
        "tail file",
        "wc -l file",
        "pwd",
        "echo hello world",
        "date +%s",
        "whoami",
        "uname -a",
        "id",
        "/bin/ls",
        "/usr/bin/cat file",
        "git status",
        "git log --oneline -n 5",
        "git diff HEAD~1",
        "git show HEAD",
        "git --no-pager log",
        "git -P diff -- path",
        ["ls", "-l"],
        ["git", "status"],
    ],
)
def test_read_only_commands(command: str | list[str]) -> None:
    """R60: a single listed program (or git with a listed subcommand) is read-only."""
    assert is_read_only(command, CONFIG) is True
    assert classify(command, CONFIG).needs_confirm is False


@pytest.mark.parametrize(
    "command",
    [
        "",
        "   ",
        [],
        "rm -rf build",
        "ls; rm x",
        "ls && rm x",
        "ls & rm x",
        "ls | sh",
        "cat < file",
        "echo hi > file",
        "echo $(rm x)",
        "echo `rm x`",
        "ls\nrm x",
        "echo 'unterminated",
        "./ls",
        "bin/ls",
        "/tmp/evil/ls",
        "FOO=1 ls",
        "git",
        "git push",
        "git commit -m x",
        "git -c core.pager=sh log",
        "git --config-env=core.pager=X log",
        "git -C /tmp status",
        "git --exec-path=/tmp status",
        "git log --output=/tmp/x",
        "git log --outp=/tmp/x",
        "git diff --ext-diff",
        "date -s 2020-01-01",
        "date --set=2020-01-01",
        "date -us 2020-01-01",
        "sudo ls",
        ["rm", "x"],
        ["echo", "a;b"],
        ["ls", "$(x)"],
    ],
)
def test_not_read_only(command: str | list[str]) -> None:
    """R60: anything else needs confirmation."""
    assert is_read_only(command, CONFIG) is False
    assert classify(command, CONFIG).needs_confirm is True


def test_allowlist_is_configurable() -> None:
    """R60: the read-only lists come from the configuration."""
    config = attrs.evolve(CONFIG, readonly_commands=["make"], readonly_git=["push"])
    assert is_read_only("make", config) is True
    assert is_read_only("ls", config) is False
    assert is_read_only("git push", config) is True
    assert is_read_only("git status", config) is False


_operators = st.sampled_from(SHELL_OPERATORS)


@given(before=st.text(), operator=_operators, after=st.text())
@example(before="cat ~\x00/x", operator=";", after="")  # a NUL after ~ broke expanduser
def test_a_shell_operator_is_never_read_only(before: str, operator: str, after: str) -> None:
    """R60: any text containing a shell operator is never read-only."""
    command = f"{before}{operator}{after}"
    assert is_read_only(command, CONFIG) is False
    assert classify(command, CONFIG).needs_confirm is True


@pytest.mark.parametrize("command", ["cat ~\x00/x", "ls ~ab\x00c", ["ls", "a\x00b"]])
def test_a_nul_byte_is_judged_and_asks(command: str | list[str]) -> None:
    """R60, R74: the gate is total: a command with a NUL byte (which no program can
    receive) gets a verdict that asks, never an exception."""
    verdict = classify(command, CONFIG)
    assert (verdict.needs_confirm, verdict.argv) == (True, None)
    assert "NUL byte" in verdict.reason


@given(program=st.sampled_from(CONFIG.readonly_commands), operator=_operators, arg=st.text())
def test_a_listed_program_with_an_operator_is_not_read_only(
    program: str, operator: str, arg: str
) -> None:
    """R60: a listed program followed by an operator, as text or argv, needs confirmation."""
    assert is_read_only(f"{program} {arg}{operator}", CONFIG) is False
    assert is_read_only([program, f"{arg}{operator}"], CONFIG) is False


@pytest.mark.parametrize(
    "command",
    [
        "cat /etc/hosts",
        "cp x /usr/local/bin/",
        "rm -rf /etc",
        "rm -rf /",
        "rm -rf /*",
        "touch /e*/x",
        "cat</etc/passwd",
        "echo x >>/var/log/x",
        "cp --target-directory=/usr/share x",
        "PATH=/tmp:/sbin make",
        "ls //etc",
        "ls /tmp/../etc",
        "/bin/cp x /bin/cp",
        "sudo make install",
        "true;sudo rm x",
        "ls ~root",
        ["cp", "x", "/opt/app"],
        ["doas", "ls"],
    ],
)
def test_restricted_paths(command: str | list[str]) -> None:
    """R7: a restricted path, a path under one or above one, or sudo counts."""
    assert touches_restricted(command, CONFIG) is True


@pytest.mark.parametrize(
    "command",
    [
        "cat /etcetera/file",
        "rm -rf /tmp/build",
        "ls /home/user/etc",
        "/usr/bin/python3 script.py",
        "cat etc/hosts",
        "curl https://example.com/etc/x",
        "sed s/usr/x/ file",
        ["rm", "/srv/x"],
    ],
)
def test_unrestricted_paths(command: str | list[str]) -> None:
    """R7: other paths, and the program's own path, are not restricted."""
    assert touches_restricted(command, CONFIG) is False


def test_relative_paths_resolve_against_cwd() -> None:
    """R7: relative paths count once resolved against cwd."""
    assert touches_restricted("rm hosts", CONFIG, cwd="/etc") is True
    assert touches_restricted("make", CONFIG, cwd="/usr/src/linux") is True
    assert touches_restricted("rm ../../etc/hosts", CONFIG, cwd="/home/u") is True
    assert touches_restricted("rm ../x", CONFIG, cwd="/home/u") is False
    assert touches_restricted("rm etc/hosts", CONFIG, cwd="/home/u") is False
    assert touches_restricted("rm etc/hosts", CONFIG, cwd="/") is True


def test_restricted_list_is_configurable() -> None:
    """R7: the restricted paths come from the configuration."""
    config = attrs.evolve(CONFIG, restricted_paths=["/srv/data/"])
    assert touches_restricted("rm /srv/data/x", config) is True
    assert touches_restricted("rm /srv/other", config) is False
    assert touches_restricted("rm /etc/hosts", config) is False
    assert touches_restricted("rm -rf /srv", config) is True


@given(
    root=st.sampled_from(CONFIG.restricted_paths),
    # ``..`` would climb out of the root (``/etc/../x`` is ``/x``): not "under" it.
    rest=st.lists(
        st.from_regex(r"[A-Za-z0-9_.-]{1,8}", fullmatch=True).filter(lambda s: s != ".."),
        max_size=4,
    ),
)
def test_anything_under_a_restricted_root_is_restricted(root: str, rest: list[str]) -> None:
    """R7: every path under a restricted path is restricted."""
    path = "/".join([root, *rest])
    assert touches_restricted(f"rm {path}", CONFIG) is True


@given(
    root=st.sampled_from(CONFIG.restricted_paths),
    suffix=st.from_regex(r"[a-z]{1,5}", fullmatch=True),
)
def test_a_longer_name_is_not_under_the_root(root: str, suffix: str) -> None:
    """R7: /etcetera is not under /etc."""
    assert touches_restricted(f"rm {root}{suffix}/x", CONFIG) is False


def test_classify_verdicts() -> None:
    """R60, R7, R74: the verdict says whether to confirm, whether a password is needed,
    why, and the exact argv judged when the command is simple."""
    assert classify("ls /etc", CONFIG) == Verdict(
        needs_confirm=False, restricted=False, reason="read-only: ls /etc", argv=("ls", "/etc")
    )
    assert classify("rm /etc/hosts", CONFIG) == Verdict(
        needs_confirm=True,
        restricted=True,
        reason="restricted: touches /etc/hosts",
        argv=("rm", "/etc/hosts"),
    )
    assert classify(["sudo", "ls"], CONFIG) == Verdict(
        needs_confirm=True, restricted=True, reason="restricted: runs sudo", argv=("sudo", "ls")
    )
    assert classify("make", CONFIG, cwd="/usr/src") == Verdict(
        needs_confirm=True, restricted=True, reason="restricted: runs in /usr/src", argv=("make",)
    )
    assert classify("ls | wc", CONFIG) == Verdict(
        needs_confirm=True,
        restricted=False,
        reason="needs confirmation: the command uses shell syntax or an unusual character: '|'",
    )
    assert classify("rm x", CONFIG) == Verdict(
        needs_confirm=True,
        restricted=False,
        reason="needs confirmation: the command is not on the read-only list",
        argv=("rm", "x"),
    )
    assert classify("echo 'x", CONFIG) == Verdict(
        needs_confirm=True,
        restricted=False,
        reason="needs confirmation: the command has an unterminated quote",
    )
    assert classify("", CONFIG) == Verdict(
        needs_confirm=True, restricted=False, reason="needs confirmation: the command is empty"
    )
