"""The approval gate, attacked class by class through the in-process engine (R74-R76).

Each case is a tool call a hostile model could make. A person (a ``chat-`` listener)
denies every confirmation unless the case says otherwise. Every case asserts what
happened -- asked, or run in the sandbox -- and that the side effect did not: the
marker file a successful attack would create is absent. Scratch folders live outside
``/tmp`` (the sandbox's ``/tmp`` is private: a write there would vanish and prove less).
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import attrs
import pytest
import trio

from agentrio.engine.assembly import open_engine
from agentrio.engine.config import Config
from agentrio.engine.core import Engine
from agentrio.engine.models.base import ModelReply, ToolCallRequest
from agentrio.engine.models.scripted import ScriptedModel
from agentrio.engine.pending import AskReply, AskRequest, Offered
from agentrio.engine.tools.sudo import FakeVerifier

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap missing")

ROOT = Path(__file__).resolve().parents[3]
PASSWORD = "correct horse"
_HARDENING = ["--no-ext-diff", "--no-textconv"]


@attrs.define
class Outcome:
    asked: list[AskRequest]
    results: list[str]


Answer = Callable[[AskRequest], AskReply]


def deny(request: AskRequest) -> AskReply:
    return AskReply(approve=False, reason="no")


async def _answer_asks(engine: Engine, answer: Answer, asked: list[AskRequest]) -> None:
    with engine.registry.listen("chat-") as listener:
        while True:
            notice = await listener.next_notice()
            if isinstance(notice, Offered):
                asked.append(notice.entry.request)
                await engine.answer(notice.entry.id, answer(notice.entry.request), by=listener)


@asynccontextmanager
async def gate(
    config: Config, turns: list[ModelReply], answer: Answer = deny
) -> AsyncIterator[tuple[Engine, ScriptedModel, list[AskRequest]]]:
    model = ScriptedModel(turns)
    asked: list[AskRequest] = []
    verifier = FakeVerifier(PASSWORD)
    async with open_engine(config, model=model, verifier=verifier) as engine:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_answer_asks, engine, answer, asked)
            yield engine, model, asked
            nursery.cancel_scope.cancel()


def _calls(*commands: str | list[str], cwd: Path | None = None, **extra: object) -> ModelReply:
    calls = []
    for index, command in enumerate(commands):
        args: dict[str, object] = {"command": command, **extra}
        if cwd is not None:
            args["cwd"] = str(cwd)
        calls.append(ToolCallRequest(id=f"c{index}", name="run_command", args=args))
    return ModelReply(text="", tool_calls=calls)


def _tool_results(model: ScriptedModel, turn: int) -> list[str]:
    return [m.content for m in model.calls[turn] if m.role == "tool"]


async def attempt(
    config: Config, *commands: str | list[str], cwd: Path | None = None, answer: Answer = deny
) -> Outcome:
    """One task whose one turn calls ``run_command`` with each command."""
    turns = [_calls(*commands, cwd=cwd), ModelReply(text="done")]
    async with gate(config, turns, answer) as (engine, model, asked):
        run = await engine.start_task("chat-gate", "go")
        assert (await run.wait_done()).status == "finished"
        return Outcome(asked=asked, results=_tool_results(model, 1)[-len(commands) :])


# ------------------------------------------------------------- words judged, string run

EXPANSIONS = [
    "git log --output=${X:-MARK}",
    "git log --outpu[t]=MARK",
    "git log --outpu?=MARK",
    "git log --outpu*=MARK",
    "git log --{output,x}=MARK",
    "git log $(echo --output)=MARK",
    "git log `echo --output`=MARK",
    "echo $(touch MARK)",
    "echo `touch MARK`",
    'echo "$(touch MARK)"',
    "echo 'a'\"$(touch MARK)\"",
    "echo \\$(touch MARK)",
    "ls; touch MARK",
    "ls && touch MARK",
    "ls || touch MARK",
    "ls | tee MARK",
    "echo hi > MARK",
    "echo hi >> MARK",
    "cat < /dev/null > MARK",
    "ls & touch MARK",
    "ls\ntouch MARK",
    "ls\rtouch MARK",
    "ls #\ntouch MARK",
    "X=1 touch MARK",
    "PATH=. ls",
    "ls ~/MARK",
    "echo ${HOME}",
    "echo $HOME",
    "echo 'unterminated",
    'echo "unterminated',
    "if true; then touch MARK; fi",
    "{ touch MARK; }",
    "(touch MARK)",
    "echo \u202etouch MARK",
    "echo\u00a0MARK",
    "echo \u200btouch",
    "echo '\x1b]0;title\x07'",
    "echo 'tab\tinside'",
    "date -s 2000-01-01",
    "date --set=2000-01-01",
    "git -c core.pager=touch\\ MARK log",
    "git --exec-path=. status",
    "git log --ext-diff",
    "git show --textconv",
    "git log --show-signature",
    "./ls",
    "/tmp/ls",
    "x" * (16 * 1024 + 1),
]


@pytest.mark.parametrize("template", EXPANSIONS)
async def test_shell_syntax_always_asks(template: str, config: Config, scratch: Path) -> None:
    """R74: any shell syntax, quoting trick, control or invisible character, odd
    program path or writing option makes the command ask; denied, nothing is written."""
    mark = scratch / "MARK"
    command = template.replace("MARK", str(mark))
    outcome = await attempt(config, command, cwd=scratch)
    assert len(outcome.asked) == 1, outcome.results
    assert outcome.asked[0].tool_args["command"] == command
    assert "denied by the user" in outcome.results[0]
    assert not mark.exists()
    assert list(scratch.iterdir()) == []


@pytest.mark.parametrize(
    ("command", "argv"),
    [
        ("echo plain words", ["plain", "words"]),
        ("echo 'single $(quoted)' \"double quoted\"", ["single $(quoted)", "double quoted"]),
        ("echo a'b'\"c\" ''", ["abc", ""]),
        ("echo HEAD~1 HEAD^", ["HEAD~1", "HEAD^"]),
        ("echo\ttabbed", ["tabbed"]),
    ],
)
async def test_simple_commands_run_unasked_as_the_argv_judged(
    command: str, argv: list[str], config: Config, scratch: Path
) -> None:
    """R74: a simple command runs unasked, as exactly the words judged (no shell)."""
    outcome = await attempt(config, command, cwd=scratch)
    assert outcome.asked == []
    assert outcome.results[0] == "exit 0\n" + " ".join(argv) + "\n"


# ------------------------------------------------------------------ hostile repositories

HOSTILE_KEYS = [
    ("core.fsmonitor", "touch MARK; echo"),
    ("core.pager", "touch MARK; cat"),
    ("core.hooksPath", "HOOKS"),
    ("diff.external", "touch MARK; echo"),
    ("diff.evil.textconv", "touch MARK; cat"),
    ("diff.evil.command", "touch MARK; echo"),
    ("filter.evil.clean", "touch MARK; cat"),
    ("filter.evil.smudge", "touch MARK; cat"),
    ("filter.evil.process", "touch MARK"),
    ("gpg.program", "PROGRAM"),
    ("pager.log", "touch MARK; cat"),
    ("include.path", "INCLUDED"),
]


def _hostile_repo(folder: Path, key: str, value: str, mark: Path) -> Path:
    repo = folder / "repo"
    repo.mkdir()

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)

    git("init", "-q")
    git("config", "user.email", "a@example.invalid")
    git("config", "user.name", "a")
    (repo / "f.txt").write_text("one\n")
    (repo / ".gitattributes").write_text("* filter=evil diff=evil\n")
    git("add", ".")
    git("commit", "-qm", "init")
    (repo / "f.txt").write_text("one\ntwo\n")
    program = folder / "program"
    program.write_text(f"#!/bin/sh\ntouch {mark}\n")
    program.chmod(0o755)
    hooks = folder / "hooks"
    hooks.mkdir()
    for hook in ("post-index-change", "pre-commit", "post-checkout"):
        (hooks / hook).write_text(f"#!/bin/sh\ntouch {mark}\n")
        (hooks / hook).chmod(0o755)
    included = folder / "included"
    included.write_text(f'[core]\n\tfsmonitor = "touch {mark}; echo"\n')
    value = (
        value.replace("MARK", str(mark))
        .replace("HOOKS", str(hooks))
        .replace("PROGRAM", str(program))
        .replace("INCLUDED", str(included))
    )
    git("config", key, value)
    if key == "gpg.program":
        git("config", "log.showSignature", "true")
    git("config", "filter.evil.required", "true")
    return repo


@pytest.mark.parametrize(("key", "value"), HOSTILE_KEYS)
@pytest.mark.parametrize("command", ["git status", "git diff", "git log -p", "git show"])
async def test_a_hostile_repository_runs_nothing(
    key: str, value: str, command: str, config: Config, scratch: Path
) -> None:
    """R75: in a repository whose config sets a program-running key, allowlisted git
    commands run unasked and run none of its programs (the marker is absent) -- the
    config is neutralised, not only the file system read-only."""
    mark = scratch / "MARK"
    repo = _hostile_repo(scratch, key, value, mark)
    outcome = await attempt(config, command, cwd=repo)
    assert outcome.asked == []
    assert not mark.exists(), outcome.results


@pytest.mark.parametrize(("key", "value"), HOSTILE_KEYS)
async def test_git_overrides_alone_neutralise_the_repository(
    key: str, value: str, config: Config, scratch: Path
) -> None:
    """R75: the git environment the sandbox builds neutralises every program-running
    key by itself, checked *outside* the sandbox, where the hostile program could
    write its marker."""
    mark = scratch / "MARK"
    repo = _hostile_repo(scratch, key, value, mark)
    async with open_engine(config, model=ScriptedModel([])) as engine:
        env = await engine.services.sandbox.git_environment(str(repo))
    base = {"PATH": "/usr/bin:/bin", "HOME": str(scratch)}
    for args in (["status"], ["diff"], ["diff", *_HARDENING], ["log", "-p"], ["show"]):
        await trio.run_process(
            ["git", *args],
            cwd=repo,
            env={**base, **env},
            check=False,
            capture_stdout=True,
            capture_stderr=True,
        )
    assert not mark.exists()


# ------------------------------------------------------------------- remembered approvals


def _approve(remember: bool = False, allow_turn: bool = False) -> Answer:
    def answer(request: AskRequest) -> AskReply:
        return AskReply(approve=True, remember=remember, allow_turn=allow_turn, password=PASSWORD)

    return answer


@pytest.mark.parametrize(
    "abuse",
    [
        "touch SAFE && touch MARK",
        "touch SAFE; touch MARK",
        "touch MARK",
        "touch SAFE MARK",
        "touch  SAFE",
        ["touch", "SAFE", "MARK"],
        "touch SAFE\ntouch MARK",
    ],
)
async def test_always_allow_covers_exactly_the_command_shown(
    abuse: str | list[str], config: Config, scratch: Path
) -> None:
    """R76: "Always allow" of ``touch SAFE`` remembers that command only: a later
    command that starts the same way, or adds to it, asks again (and is denied)."""
    safe, mark = scratch / "SAFE", scratch / "MARK"

    def fill(text: str) -> str:
        return text.replace("SAFE", str(safe)).replace("MARK", str(mark))

    abuse_filled = [fill(w) for w in abuse] if isinstance(abuse, list) else fill(abuse)
    turns = [
        _calls(fill("touch SAFE")),
        ModelReply(text="first"),
        _calls(abuse_filled),
        ModelReply(text="second"),
        _calls(fill("touch SAFE")),
        ModelReply(text="third"),
    ]
    answers = iter([_approve(remember=True), deny, deny])

    def answer(request: AskRequest) -> AskReply:
        return next(answers)(request)

    async with gate(config, turns, answer) as (engine, model, asked):
        for _ in range(3):
            run = await engine.start_task("chat-gate", "go")
            assert (await run.wait_done()).status == "finished"
        rules = await engine.allowed("chat-gate")
    assert [rule.command for rule in rules] == [fill("touch SAFE")]
    assert [request.tool_args["command"] for request in asked] == [
        fill("touch SAFE"),
        abuse_filled,
    ]
    assert not mark.exists()
    assert "denied by the user" in _tool_results(model, 3)[-1]
    assert _tool_results(model, 5)[-1] == "exit 0"


async def test_remembered_commands_are_listed_and_removed(config: Config, scratch: Path) -> None:
    """R76: a remembered command is listed; once removed, the same command asks again."""
    safe = scratch / "SAFE"
    turns = [
        _calls(f"touch {safe}"),
        ModelReply(text="first"),
        _calls(f"touch {safe}"),
        ModelReply(text="second"),
    ]
    answers = iter([_approve(remember=True), deny])

    def answer(request: AskRequest) -> AskReply:
        return next(answers)(request)

    async with gate(config, turns, answer) as (engine, _model, asked):
        run = await engine.start_task("chat-gate", "go")
        await run.wait_done()
        (rule,) = await engine.allowed("chat-gate")
        assert rule.command == f"touch {safe}"
        assert await engine.forget_allowed("chat-gate", rule.id) == ([], [rule])
        safe.unlink()
        run = await engine.start_task("chat-gate", "go")
        await run.wait_done()
    assert len(asked) == 2
    assert not safe.exists()


# ------------------------------------------------------------------- allow for this turn


async def test_allow_turn_never_skips_the_restricted_password(
    config: Config, scratch: Path
) -> None:
    """R76, R7: after "Allow this turn", a later call in the same turn that touches a
    restricted path still asks, with the password flow."""
    restricted = attrs.evolve(config.tools, restricted_paths=[str(scratch / "locked")])
    config = attrs.evolve(config, tools=restricted)
    (scratch / "locked").mkdir()
    mark = scratch / "locked" / "MARK"
    seen: list[AskRequest] = []

    def answer(request: AskRequest) -> AskReply:
        seen.append(request)
        if len(seen) == 1:
            return AskReply(approve=True, allow_turn=True)
        return AskReply(approve=False, reason="no")

    outcome = await attempt(
        config, f"touch {scratch / 'ok'}", f"touch {mark}", cwd=scratch, answer=answer
    )
    assert [(r.restricted, r.need_password) for r in outcome.asked] == [
        (False, False),
        (True, True),
    ]
    assert (scratch / "ok").exists()
    assert not mark.exists()


async def test_allow_turn_never_covers_shell_syntax(config: Config, scratch: Path) -> None:
    """R76: "Allow this turn" covers later simple commands of the turn, never one with
    shell syntax the person did not see."""
    mark = scratch / "MARK"

    def answer(request: AskRequest) -> AskReply:
        if request.tool_args["command"] == "touch first":
            return AskReply(approve=True, allow_turn=True)
        return AskReply(approve=False)

    outcome = await attempt(
        config, "touch first", "touch second", f"echo ok; touch {mark}", cwd=scratch, answer=answer
    )
    assert [r.tool_args["command"] for r in outcome.asked] == [
        "touch first",
        f"echo ok; touch {mark}",
    ]
    assert (scratch / "first").exists()
    assert (scratch / "second").exists()
    assert not mark.exists()


# --------------------------------------------------------------------- reading the home


@pytest.mark.parametrize(
    "template",
    [
        "cat HOME/token",
        "grep -r . HOME",
        "grep -a secret HOME/agentrio.db",
        "cat HOME/agentrio.db-wal",
        "head -c 100 HOME/agentrio.db",
        "ls HOME/sessions",
        "cat HOME/../home/token",
    ],
)
async def test_reading_the_home_asks(template: str, config: Config) -> None:
    """R75: a command that names the agentrio home asks (denied: nothing read)."""
    home = config.home_path
    await attempt(config, "echo start")  # the engine made the home, token and database
    command = template.replace("HOME", str(home))
    outcome = await attempt(config, command)
    assert len(outcome.asked) == 1
    assert "denied by the user" in outcome.results[0]


async def test_the_home_is_hidden_from_a_recursive_read(config: Config, scratch: Path) -> None:
    """R75: read recursively from above, the home shows empty inside the sandbox."""
    home = scratch / "home"
    # In the scratch folder (R86): the checkout, the fixture's default, may hold more
    # entries (node_modules) than the unasked path checks for homes.
    agent = attrs.evolve(config.agent, cwd=str(scratch))
    config = attrs.evolve(config, home=str(home), agent=agent)
    home.mkdir()
    (home / "token").write_text("the-daemon-token\n")
    outcome = await attempt(config, f"grep -r the-daemon-token {scratch}")
    assert outcome.asked == []
    assert "the-daemon-token" not in outcome.results[0]
    assert outcome.results[0].startswith("exit 1")


# ----------------------------------------------------------------------------- bounds


async def test_an_unasked_command_has_its_own_timeout(config: Config) -> None:
    """Issue 15 item 4: an unasked ``tail -f`` with a model-chosen timeout of 1e9 s
    ends at ``readonly_timeout_s``."""
    tools = attrs.evolve(config.tools, readonly_timeout_s=0.5)
    config = attrs.evolve(config, tools=tools)
    turns = [
        ModelReply(
            text="",
            tool_calls=[
                ToolCallRequest(
                    id="c0",
                    name="run_command",
                    args={"command": "tail -f /dev/null", "timeout_s": 1e9},
                )
            ],
        ),
        ModelReply(text="done"),
    ]
    async with gate(config, turns) as (engine, model, asked):
        start = trio.current_time()
        run = await engine.start_task("chat-gate", "go")
        await run.wait_done()
        took = trio.current_time() - start
    assert asked == []
    assert _tool_results(model, 1)[0].startswith("timed out after")
    assert took < 10


def test_a_model_timeout_is_clamped_to_the_maximum() -> None:
    """Issue 15 item 4: the clamp is ``command_timeout_s`` (documented default)."""
    assert Config().tools.command_timeout_s == 600.0
    assert Config().tools.readonly_timeout_s == 30.0


async def test_no_sandbox_means_every_command_asks(config: Config, scratch: Path) -> None:
    """R75: with bubblewrap missing nothing runs unasked -- even ``echo`` asks."""
    sandbox = attrs.evolve(config.sandbox, program=str(scratch / "no-bwrap"))
    config = attrs.evolve(config, sandbox=sandbox)
    async with open_engine(config, model=ScriptedModel([])) as engine:
        status = engine.services.sandbox.status
    assert status.active is False
    assert "not found" in status.detail
    outcome = await attempt(config, "echo hello")
    assert len(outcome.asked) == 1
    assert "denied by the user" in outcome.results[0]


async def test_the_sandbox_hides_sockets_and_the_daemon_environment(
    config: Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R75: ``/run`` (docker's and other Unix sockets) is empty inside the sandbox, and
    no variable of the daemon's reaches the command."""
    monkeypatch.setenv("AGENTRIO_TEST_SECRET", "s3cr3t-value")
    outcome = await attempt(config, "ls -A /run", "cat /proc/self/environ")
    assert outcome.asked == []
    assert outcome.results[0] == "exit 0"
    assert outcome.results[1].startswith("exit 0")
    assert "s3cr3t-value" not in outcome.results[1]
    assert "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" in outcome.results[1]


async def test_a_home_reached_through_a_symlink_is_hidden_under_both_names(
    config: Config, scratch: Path
) -> None:
    """R75: the home configured as a symlink: its real folder, named directly, asks
    too, and read from above it shows empty."""
    real = scratch / "real-home"
    real.mkdir()
    (real / "token").write_text("the-daemon-token\n")
    (scratch / "link-home").symlink_to(real)
    config = attrs.evolve(config, home=str(scratch / "link-home"))
    outcome = await attempt(config, f"cat {real}/token")
    assert len(outcome.asked) == 1
    outcome = await attempt(config, f"grep -r the-daemon-token {scratch}")
    assert outcome.asked == []
    assert "the-daemon-token" not in outcome.results[0]


@pytest.mark.parametrize("bad_timeout", [float("nan"), float("inf"), -1.0, 0])
async def test_a_timeout_that_is_not_a_positive_finite_number_runs_nothing(
    bad_timeout: float, config: Config, scratch: Path
) -> None:
    """Issue 15 item 4: a model-chosen ``timeout_s`` of NaN (which JSON can carry and
    every comparison lets through), infinity, zero or less is refused before anything
    runs -- even an approved command: the file is absent."""
    mark = scratch / "MARK"
    turns = [
        ModelReply(
            text="",
            tool_calls=[
                ToolCallRequest(
                    id="c0",
                    name="run_command",
                    args={"command": f"touch {mark}", "timeout_s": bad_timeout},
                )
            ],
        ),
        ModelReply(text="done"),
    ]
    async with gate(config, turns, _approve()) as (engine, model, asked):
        run = await engine.start_task("chat-gate", "go")
        await run.wait_done()
    assert asked == []
    assert "positive finite number" in _tool_results(model, 1)[0]
    assert not mark.exists()
