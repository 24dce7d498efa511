"""The gate, round three (issue 29 findings 4, 6 and 10), attacked through the
in-process engine: a remembered command and its directory, checks on the real cwd,
what "Allow this turn" covers, and commands that cannot start.

As in test_gate.py, a ``chat-`` listener answers each confirmation as the case says
(deny unless told otherwise), and every case asserts that the side effect of the attack
did not happen: the marker file is absent.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import attrs
import pytest
import trio

from agentrio.engine.assembly import open_engine
from agentrio.engine.config import Config
from agentrio.engine.models.base import ModelReply
from agentrio.engine.pending import AskReply, AskRequest, Offered
from agentrio.engine.rules import command_rule
from agentrio.engine.runs import RunOrigin
from agentrio.engine.tools.policy import classify
from agentrio.engine.tools.run_command import CommandPlan, start_failure
from agentrio.engine.tools.turn_scope import turn_refusal
from tests.engine.test_background_approvals import SESSION, WINDOW, Scene
from tests.engine.tools.test_gate import (
    _approve,
    _calls,
    _tool_results,
    attempt,
    deny,
    gate,
)

HERE = os.path.realpath(os.getcwd())
DEADLINE_S = 30


def _script(folder: Path, body: str) -> Path:
    folder.mkdir()
    (folder / "build.sh").write_text(body)
    return folder


# ---------------------------------------------------- finding 4: a rule and its directory


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap missing")
async def test_a_remembered_command_covers_only_its_real_directory(
    config: Config, scratch: Path
) -> None:
    """Issue 29 finding 4, R76: "Always allow" of ``sh build.sh`` in a trusted checkout
    remembers the command AND that checkout's real path. The same command with the cwd
    of a hostile checkout asks again (denied: its script did not run); a symlink to
    the trusted checkout is the same real directory (covered); once the symlink points
    at the hostile checkout, it asks again. Every confirmation shows the real path."""
    mark = scratch / "MARK"
    trusted = _script(scratch / "trusted", "touch built\n")
    hostile = _script(scratch / "hostile", f"touch {mark}\n")
    link = scratch / "link"
    link.symlink_to(trusted)
    turns = [
        _calls("sh build.sh", cwd=trusted),
        ModelReply(text="1"),
        _calls("sh build.sh", cwd=hostile),
        ModelReply(text="2"),
        _calls("sh build.sh", cwd=link),
        ModelReply(text="3"),
        _calls("sh build.sh", cwd=link),
        ModelReply(text="4"),
    ]
    answers = iter([_approve(remember=True), deny, deny])
    async with gate(config, turns, lambda r: next(answers)(r)) as (engine, model, asked):
        for number in range(4):
            if number == 3:
                link.unlink()
                link.symlink_to(hostile)
            run = await engine.start_task("chat-gate", "go")
            assert (await run.wait_done()).status == "finished"
        rules = await engine.allowed("chat-gate")
    assert [(rule.command, rule.cwd) for rule in rules] == [("sh build.sh", str(trusted))]
    assert [request.tool_args["cwd"] for request in asked] == [
        str(trusted),
        str(hostile),
        str(hostile),
    ]
    assert (trusted / "built").exists()
    assert not mark.exists()
    assert _tool_results(model, 3)[-1] == "not run: denied by the user: no"
    assert _tool_results(model, 5)[-1] == "exit 0"  # the symlink to the trusted one
    assert _tool_results(model, 7)[-1] == "not run: denied by the user: no"


async def test_no_cwd_is_the_sessions_directory_shown_and_remembered(config: Config) -> None:
    """Issue 29 finding 4, R86: a call that names no cwd runs in the session's
    directory (here the configured default, ``[agent] cwd``), and the confirmation says
    which (its ``cwd`` argument, the real path), so the rule an "Always allow" makes
    holds it; the model's own arguments are all shown too."""
    turns = [_calls("true", timeout_s=5), ModelReply(text="done")]
    async with gate(config, turns, _approve(remember=True)) as (engine, _model, asked):
        run = await engine.start_task("chat-gate", "go")
        assert (await run.wait_done()).status == "finished"
        (rule,) = await engine.allowed("chat-gate")
    assert [request.tool_args for request in asked] == [
        {"command": "true", "timeout_s": 5, "cwd": HERE}
    ]
    assert (rule.command, rule.cwd) == ("true", HERE)


async def test_a_background_subagent_uses_a_rule_only_in_its_directory(
    config: Config, tmp_path: Path
) -> None:
    """Issue 29 finding 4, R30: a background sub-agent acts with its parent session's
    rules, nobody watching -- but only in the directory each rule was shown with.
    ``touch made`` remembered in ``trusted`` runs there unasked; the same command in
    ``elsewhere`` is not run (it waits for the follow-up's confirmation, denied here)."""
    base = Path(os.path.realpath(tmp_path))
    trusted, elsewhere = base / "trusted", base / "elsewhere"
    trusted.mkdir()
    elsewhere.mkdir()
    model = Scene(
        [
            {"command": "touch made", "cwd": str(trusted)},
            {"command": "touch made", "cwd": str(elsewhere)},
        ]
    )
    with trio.fail_after(DEADLINE_S):
        async with open_engine(config, model=model) as engine:
            await engine.rules.add(command_rule("touch made", str(trusted), at=0.0))
            with engine.registry.listen("cli-", windows={WINDOW}) as listener:
                run = await engine.start_task(SESSION, "go", origin=RunOrigin("c", WINDOW))
                assert (await run.wait_done()).status == "finished"
                notice = await listener.next_notice()
                assert isinstance(notice, Offered)
                assert notice.entry.request.tool_args == {
                    "command 1": "touch made",
                    "cwd 1": str(elsewhere),
                }
                await engine.answer(notice.entry.id, AskReply(approve=False), by=listener)
    assert (trusted / "made").exists()
    assert not (elsewhere / "made").exists()


# ------------------------------------- finding 6: checks on the argv and the real cwd


@pytest.mark.parametrize(
    "command",
    [
        "s''udo -n true",
        's""udo -n true',
        "\\sudo -n true",
        "$'sudo' -n true",
        ["/usr/bin/sudo", "-n", "true"],
        "env sudo -n true",
        "nice -n 1 doas true",
        "run0 true",
    ],
)
def test_an_elevation_is_found_as_the_shell_reads_it(
    command: str | list[str], config: Config
) -> None:
    """Issue 29 finding 6, R7: a privilege-raising program counts however it is quoted
    or wrapped (``s''udo`` is ``sudo`` to the shell): the verdict is restricted."""
    verdict = classify(command, config.tools, cwd=HERE)
    assert verdict.restricted, verdict.reason
    assert "runs " in verdict.reason


async def after_allow_turn(
    config: Config, scratch: Path, command: str, cwd: Path | None
) -> list[tuple[bool, bool]]:
    """One turn: ``touch ok`` approved with "Allow this turn", then ``command`` (denied
    if asked); ``(restricted, need_password)`` of each confirmation. ``ok`` was made."""
    seen: list[AskRequest] = []

    def answer(request: AskRequest) -> AskReply:
        seen.append(request)
        if len(seen) == 1:
            return AskReply(approve=True, allow_turn=True)
        return AskReply(approve=False, reason="no")

    outcome = await attempt(config, f"touch {scratch / 'ok'}", command, cwd=cwd, answer=answer)
    assert (scratch / "ok").exists()
    return [(r.restricted, r.need_password) for r in outcome.asked]


async def test_allow_turn_never_covers_a_quoted_sudo(config: Config, scratch: Path) -> None:
    """Issue 29 finding 6, R76, R7: after "Allow this turn", ``s''udo touch MARK``
    (a simple command: quotes only) asks, restricted, with the password field; denied,
    nothing ran."""
    mark = scratch / "MARK"
    asked = await after_allow_turn(config, scratch, f"s''udo -n touch {mark}", scratch)
    assert asked == [(False, False), (True, True)]
    assert not mark.exists()


@pytest.mark.parametrize("how", ["relative, no cwd", "through a symlink"])
async def test_a_path_is_judged_where_it_really_points(
    how: str, config: Config, scratch: Path
) -> None:
    """Issue 29 finding 6, R7: ``touch ../…/locked/MARK`` with no cwd argument is
    resolved against the session's real directory, and ``touch link/MARK`` (``link ->
    locked``) by the symlink's target: both touch the restricted ``locked``, so even
    after "Allow this turn" they ask, with the password; denied, nothing ran."""
    locked = scratch / "locked"
    locked.mkdir()
    config = attrs.evolve(config, tools=attrs.evolve(config.tools, restricted_paths=[str(locked)]))
    mark = locked / "MARK"
    if how == "through a symlink":
        (scratch / "link").symlink_to(locked)
        command, cwd = "touch link/MARK", scratch
    else:
        command, cwd = "touch " + os.path.join("..", os.path.relpath(mark, HERE + "/..")), None
    asked = await after_allow_turn(config, scratch, command, cwd)
    assert asked == [(False, False), (True, True)]
    assert not mark.exists()


CODE_GIVEN = [
    "python3 -c \"open('MARK', 'w').close()\"",
    "python3 -Sc \"open('MARK', 'w').close()\"",
    "bash -c 'touch MARK'",
    "sh -c 'touch MARK'",
    "sh build.sh",
    "./build.sh",
    "node -e \"require('fs').writeFileSync('MARK', '')\"",
    "perl -e 'open(F, \">MARK\")'",
    "python3 -",
    "sh -s",
    "env touch MARK",
    "xargs -a list touch",
    "find . -name list -exec touch MARK ';'",
    'awk \'BEGIN { printf "" > "MARK" }\'',
    "git -c 'alias.x=!touch MARK' x",
]


@pytest.mark.parametrize("command", CODE_GIVEN)
async def test_allow_turn_never_covers_a_shell_or_code(
    command: str, config: Config, scratch: Path
) -> None:
    """Issue 29 finding 6, R76: "Allow this turn" says "plain programs only (no shell,
    interpreter code, sudo or restricted path)", and holds to it: after it, a shell,
    an interpreter given code (``-c``, ``-e``, stdin), or a program that runs what its
    arguments name asks again; denied, nothing ran (each would make MARK)."""
    (scratch / "build.sh").write_text("#!/bin/sh\ntouch MARK\n")
    (scratch / "build.sh").chmod(0o755)
    (scratch / "list").write_text("MARK\n")

    def answer(request: AskRequest) -> AskReply:
        if request.tool_args["command"] == "touch first":
            return AskReply(approve=True, allow_turn=True)
        return AskReply(approve=False)

    outcome = await attempt(
        config, "touch first", "touch second", command, cwd=scratch, answer=answer
    )
    assert [r.tool_args["command"] for r in outcome.asked] == ["touch first", command]
    assert (scratch / "second").exists()  # a plain program: covered
    assert not (scratch / "MARK").exists()


@pytest.mark.parametrize(
    ("argv", "covered"),
    [
        (("touch", "x"), True),
        (("python3", "script.py"), True),
        (("python3", "-m", "pytest"), True),
        (("/usr/bin/node", "tool.js"), True),
        (("./build.sh",), False),
        (("tools/run", "x"), False),
        (("git", "commit", "-m", "x"), True),
        (("python3.12", "-c", "x"), False),
        (("python3", "-W", "ignore", "-c", "x"), False),
        (("python3",), False),
        (("perl", "-ne", "print"), False),
        (("node", "--eval=x"), False),
        (("ruby", "-e", "x"), False),
        (("php", "-r", "x"), False),
        (("busybox", "touch", "x"), False),
        (("/bin/dash", "x.sh"), False),
        (("timeout", "5", "touch", "x"), False),
        (("find", ".", "-execdir", "rm", "{}", ";"), False),
        (("git", "-c", "core.pager=sh", "log"), False),
        (("git", "--config-env=core.pager=X", "log"), False),
        (("sudoedit", "/etc/hosts"), False),
        (None, False),
    ],
)
def test_what_allow_turn_covers(argv: tuple[str, ...] | None, covered: bool) -> None:
    """Issue 29 finding 6: `turn_refusal` on a table of argvs (None: not simple)."""
    assert (turn_refusal(argv, restricted=False) == "") is covered
    assert turn_refusal(argv, restricted=True) != ""


# --------------------------------------- finding 10: a program or cwd that is not there


async def test_a_missing_cwd_is_a_tool_error_the_model_reads(config: Config, scratch: Path) -> None:
    """Issue 29 finding 10: a ``run_command`` whose cwd does not exist is not asked
    about and not run; the model reads why and the task goes on to its answer."""
    gone = scratch / "gone"
    turns = [_calls(f"touch {scratch / 'MARK'}", cwd=gone), ModelReply(text="noted")]
    async with gate(config, turns, _approve()) as (engine, model, asked):
        run = await engine.start_task("chat-gate", "go")
        outcome = await run.wait_done()
    assert (outcome.status, outcome.text) == ("finished", "noted")
    assert asked == []
    assert _tool_results(model, 1) == [
        f"not run: the working directory {str(gone)!r} does not exist"
    ]
    assert not (scratch / "MARK").exists()


async def test_an_approved_program_that_is_not_there_is_a_tool_error(
    config: Config, scratch: Path
) -> None:
    """Issue 29 finding 10: an approved argv whose program does not exist is a tool
    result the model reads (not an internal error); the task finishes."""
    turns = [_calls(["no-such-program-29", "x"], cwd=scratch), ModelReply(text="noted")]
    async with gate(config, turns, _approve()) as (engine, model, asked):
        run = await engine.start_task("chat-gate", "go")
        outcome = await run.wait_done()
    assert (outcome.status, outcome.text) == ("finished", "noted")
    assert len(asked) == 1
    assert _tool_results(model, 1) == [
        "not run: the program 'no-such-program-29' could not be started: No such file or directory"
    ]


def test_a_directory_gone_before_the_start_is_named_as_such() -> None:
    """Issue 29 finding 10: when the directory vanished between its resolution and the
    start (the OSError names it), the model reads that, not "the program failed"."""
    plan = CommandPlan(command="make", argv=("make",), sandboxed=False)
    gone = FileNotFoundError(2, "No such file or directory", "/srv/gone")
    assert start_failure(plan, gone, "/srv/gone") == (
        "not run: the working directory '/srv/gone' could not be entered: No such file or directory"
    )
    missing = FileNotFoundError(2, "No such file or directory", "make")
    assert start_failure(plan, missing, "/srv/here") == (
        "not run: the program 'make' could not be started: No such file or directory"
    )
