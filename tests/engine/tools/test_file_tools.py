"""read_file, write_file and edit_file through the real engine (issue 32 section 2).

A scripted model makes the calls; a real registry listener answers the asks; the files
are real. Every refusal asserts its side effect did not happen: the file is
byte-identical, the secret is in no event. The working directory is the test's
scratch folder (the daemon's directory: `agentrio.engine.tools.workdir`), so reads
under it are within the sandbox's reach.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio

from agentrio.engine.assembly import open_engine
from agentrio.engine.config import AgentConfig, Config
from agentrio.engine.core import Engine
from agentrio.engine.models.base import ModelReply, ToolCallRequest
from agentrio.engine.models.scripted import ScriptedModel
from agentrio.engine.pending import AskReply, Offered
from agentrio.engine.rules import CommandSubject, EditSubject, command_rule, covers, edits_rule
from agentrio.protocol.codec import dumps
from agentrio.protocol.events import Confirm, Event, ToolResult, ToolSkipped

TOKEN = "tok-" + "s3cr3t" * 5


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The directory commands (and file tools) resolve relative paths against."""
    folder = tmp_path / "work"
    folder.mkdir()
    monkeypatch.chdir(folder)
    return folder


@pytest.fixture
def config(work: Path, tmp_path: Path) -> Config:
    """Sessions that name no directory work in ``work`` (``[agent] cwd``, R86)."""
    return Config(home=str(tmp_path / "home"), agent=AgentConfig(cwd=str(work)))


def _calls(*calls: tuple[str, dict[str, Any]]) -> ScriptedModel:
    replies = [
        ModelReply(tool_calls=[ToolCallRequest(id=f"c{n}", name=name, args=args)])
        for n, (name, args) in enumerate(calls)
    ]
    return ScriptedModel([*replies, ModelReply(text="done")])


async def _run(
    config: Config,
    model: ScriptedModel,
    answer: Callable[[Offered, Engine], AskReply | None] | None = None,
    session: str = "chat-files",
) -> list[Event]:
    """Run one task; ``answer`` replies to each ask (None: leave it to the test's
    side effect, then approve)."""
    async with open_engine(config, model=model) as engine:
        with engine.registry.listen("chat-") as listener:
            run = await engine.start_task(session, "go")
            async with trio.open_nursery() as nursery:

                async def answering() -> None:
                    while True:
                        notice = await listener.next_notice()
                        if isinstance(notice, Offered) and answer is not None:
                            reply = answer(notice, engine) or AskReply(approve=True)
                            await engine.answer(notice.entry.id, reply, by=listener)

                nursery.start_soon(answering)
                await run.wait_done()
                nursery.cancel_scope.cancel()
        return list(engine.session(session).hub.events_of(run.task_hash))


def _results(events: list[Event]) -> list[ToolResult | ToolSkipped]:
    return [e for e in events if isinstance(e, ToolResult | ToolSkipped)]


# ---------------------------------------------------------------- read_file


async def test_read_file_reads_text_and_line_ranges(config: Config, work: Path) -> None:
    """Issue 32 s2: a relative path from the working directory, unasked; a line range is
    1-based and inclusive; past the end is the model's error."""
    (work / "notes.txt").write_bytes(b"one\ntwo\r\nthree\nfour")
    events = await _run(
        config,
        _calls(
            ("read_file", {"path": "notes.txt"}),
            ("read_file", {"path": "notes.txt", "start_line": 2, "end_line": 3}),
            ("read_file", {"path": "./notes.txt", "start_line": 4}),
            ("read_file", {"path": "notes.txt", "start_line": 9}),
        ),
    )
    outputs = [(r.ok, r.output) for r in _results(events) if isinstance(r, ToolResult)]
    assert outputs == [
        (True, "one\ntwo\r\nthree\nfour"),
        (True, "two\r\nthree\n"),
        (True, "four"),
        (False, f"{work}/notes.txt has fewer than 9 lines"),
    ]
    assert not [e for e in events if isinstance(e, Confirm)]


async def test_read_file_clamps_with_one_right_count(config: Config, work: Path) -> None:
    """Issue 32 s2: a large file comes back within max_result_bytes, marker included,
    head and tail kept, the marker counting exactly the file's bytes left out -- a
    marker written in the file itself does not change the count."""
    fake = b"\n...[999999 bytes elided]...\n"
    body = b"a" * 50_000 + fake + "é".encode() * 30_000 + b"z" * 20_000
    (work / "big.txt").write_bytes(body)
    events = await _run(config, _calls(("read_file", {"path": "big.txt"})))
    [result] = _results(events)
    assert isinstance(result, ToolResult)
    data = result.output.encode()
    limit = config.tools.max_result_bytes
    assert len(data) <= limit
    found = re.findall(r"\n\.\.\.\[(\d+) bytes elided\]\.\.\.\n", result.output)
    assert len(found) == 1  # the file's own fake marker lies in the elided middle
    kept = len(data) - len(f"\n...[{found[0]} bytes elided]...\n".encode())
    assert int(found[0]) == len(body) - kept
    head, _, tail = result.output.partition(f"\n...[{found[0]} bytes elided]...\n")
    assert body.startswith(head.encode())
    assert body.endswith(tail.encode())


async def test_read_file_refuses_hidden_places_by_real_path(
    config: Config, work: Path, tmp_path: Path
) -> None:
    """Issue 32 s2: the home's token through a symlink in the working directory, a
    planted agentrio home, /proc (the daemon's environment) and /tmp outside the
    working directory are refused without asking; the token is in no event."""
    home = Path(config.home)
    home.mkdir(parents=True, exist_ok=True)
    (work / "innocent.txt").symlink_to(home / "token")
    planted = work / "planted"
    planted.mkdir()
    for name in ("token", "agentrio.db"):
        (planted / name).write_text(TOKEN)
    outside = tmp_path / "outside.txt"
    outside.write_text("outside")
    model = _calls(
        ("read_file", {"path": "innocent.txt"}),
        ("read_file", {"path": "planted/agentrio.db"}),
        ("read_file", {"path": "/proc/self/environ"}),
        ("read_file", {"path": str(outside)}),
    )
    async with open_engine(config, model=model) as engine:
        (home / "token").write_text(TOKEN)  # the engine's own token, whatever it wrote
        run = await engine.start_task("chat-files", "go")
        await run.wait_done()
        events = list(engine.session("chat-files").hub.events_of(run.task_hash))
    reasons = [r.reason for r in _results(events) if isinstance(r, ToolSkipped)]
    assert len(reasons) == 4, _results(events)
    real_home = os.path.realpath(home)
    assert reasons[0].startswith(f"{real_home}/token is in a hidden place ({real_home}")
    assert reasons[0].endswith(": no tool reads there unasked")
    assert reasons[1].startswith(f"{planted}/agentrio.db is in a hidden place ({planted})")
    assert reasons[2].endswith("read_file does not read /proc")
    assert reasons[3] == (
        f"{outside} is under /tmp, which unasked reads do not reach "
        "(only the working directory is seen there)"
    )
    wire = "".join(dumps(e) for e in events)
    assert TOKEN not in wire
    assert "s3cr3t" not in wire
    assert not [e for e in events if isinstance(e, Confirm)]


# ---------------------------------------------------------------- edits


def _approve(notice: Offered, engine: Engine) -> AskReply:
    return AskReply(approve=True)


async def test_an_approved_edit_applies_exactly_the_diff_shown(config: Config, work: Path) -> None:
    """Issue 32 s2: the confirmation shows the real path and the diff as typed details;
    what is written is exactly that change, the file's mode kept."""
    target = work / "app.py"
    target.write_bytes(b"a = 1\nb = 2\r\nc = 3\n")
    target.chmod(0o640)
    link = work / "link.py"
    link.symlink_to(target)
    events = await _run(
        config,
        _calls(("edit_file", {"path": "link.py", "old_string": "b = 2", "new_string": "b = 20"})),
        _approve,
    )
    [confirm] = [e for e in events if isinstance(e, Confirm)]
    assert confirm.args == {"path": str(target)}
    assert confirm.details is not None
    assert confirm.details.change is not None
    change = confirm.details.change
    assert change.diff == "@@ -1,3 +1,3 @@\n a = 1\n-b = 2\r\n+b = 20\r\n c = 3\n"
    assert (change.added, change.removed, change.created) == (1, 1, False)
    assert change.rule_dir == str(work)
    assert target.read_bytes() == b"a = 1\nb = 20\r\nc = 3\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert link.is_symlink()
    [result] = _results(events)
    assert isinstance(result, ToolResult)
    assert result.ok
    assert result.details is not None
    assert result.details.change is not None
    assert result.details.change.diff == change.diff
    assert sorted(os.listdir(work)) == ["app.py", "link.py"]  # no temporary file left


async def test_a_denied_edit_leaves_the_file_byte_identical(config: Config, work: Path) -> None:
    """Issue 32 s2: a deny writes nothing; the model reads the reason."""
    target = work / "keep.txt"
    target.write_bytes(b"keep\n")
    before = target.stat()
    events = await _run(
        config,
        _calls(("write_file", {"path": "keep.txt", "content": "replaced\n"})),
        lambda notice, engine: AskReply(approve=False, reason="no"),
    )
    [skipped] = _results(events)
    assert isinstance(skipped, ToolSkipped)
    assert skipped.reason == "denied by the user: no"
    assert target.read_bytes() == b"keep\n"
    assert target.stat().st_ino == before.st_ino


@pytest.mark.parametrize("how", ["content", "symlink", "created"])
async def test_a_file_changed_before_approval_is_not_overwritten(
    config: Config, work: Path, tmp_path: Path, how: str
) -> None:
    """Issue 32 s2: between the dialog and the approval the file's bytes change, its
    name is swapped to a symlink elsewhere, or a new file appears: the change is not
    applied, every file is byte-identical, and the model is told to read again."""
    target = work / "f.txt"
    elsewhere = work / "elsewhere.txt"
    elsewhere.write_bytes(b"elsewhere\n")
    if how != "created":
        target.write_bytes(b"old\n")
    args = (
        {"path": "f.txt", "content": "new\n"}
        if how == "created"
        else {"path": "f.txt", "old_string": "old", "new_string": "new"}
    )

    def meddle(notice: Offered, engine: Engine) -> AskReply:
        if how == "content":
            target.write_bytes(b"someone else's\n")
        elif how == "symlink":
            target.unlink()
            target.symlink_to(elsewhere)
        else:
            target.write_bytes(b"appeared\n")
        return AskReply(approve=True)

    tool = "write_file" if how == "created" else "edit_file"
    events = await _run(config, _calls((tool, args)), meddle)
    [result] = _results(events)
    assert isinstance(result, ToolResult)
    assert not result.ok
    assert result.output.startswith("not written: ")
    assert result.output.endswith(
        "Nothing was changed; read the file again and make the change anew."
    )
    assert elsewhere.read_bytes() == b"elsewhere\n"
    expected = {"content": b"someone else's\n", "symlink": b"elsewhere\n", "created": b"appeared\n"}
    assert target.read_bytes() == expected[how]
    assert sorted(os.listdir(work)) == ["elsewhere.txt", "f.txt"]


async def test_edit_errors_and_refusals_never_ask(config: Config, work: Path) -> None:
    """Issue 32 s2: an ambiguous or missing old_string, a hidden place and /proc are
    the model's error, before any confirmation; the files are unchanged."""
    (work / "twice.txt").write_text("x x\n")
    home = Path(config.home)
    home.mkdir(parents=True, exist_ok=True)
    model = _calls(
        ("edit_file", {"path": "twice.txt", "old_string": "x", "new_string": "y"}),
        ("edit_file", {"path": "twice.txt", "old_string": "zz", "new_string": "y"}),
        ("write_file", {"path": str(home / "config.toml"), "content": "[x]\n"}),
        ("write_file", {"path": "/proc/self/comm", "content": "x"}),
        ("write_file", {"path": "nodir/new.txt", "content": "x"}),
    )
    events = await _run(config, model, _approve)
    assert not [e for e in events if isinstance(e, Confirm)]
    results = _results(events)
    texts = [r.output if isinstance(r, ToolResult) else r.reason for r in results]
    assert "occurs 2 times" in texts[0]
    assert "was not found in the file; read it again" in texts[1]
    assert "is in a hidden place" in texts[2]
    assert texts[3].endswith("file tools do not write under /proc")
    assert "does not exist" in texts[4]
    assert (work / "twice.txt").read_text() == "x x\n"
    assert not (home / "config.toml").exists() or "[x]" not in (home / "config.toml").read_text()


async def test_a_new_file_gets_0666_less_the_umask(config: Config, work: Path) -> None:
    """Issue 32 s2: write_file creates a file as any program would (umask 022: 0644)."""
    old = os.umask(0o027)
    try:
        events = await _run(
            config, _calls(("write_file", {"path": "new.txt", "content": "hi\n"})), _approve
        )
    finally:
        os.umask(old)
    [confirm] = [e for e in events if isinstance(e, Confirm)]
    assert confirm.details is not None
    assert confirm.details.change is not None
    assert confirm.details.change.created
    assert confirm.details.change.diff == "@@ -0,0 +1 @@\n+hi\n"
    assert (work / "new.txt").read_bytes() == b"hi\n"
    assert stat.S_IMODE((work / "new.txt").stat().st_mode) == 0o640


async def test_always_allow_edits_under_a_directory(config: Config, work: Path) -> None:
    """Issue 32 s2: "Always allow edits under <dir>" is an offered rule of its own, kept
    in the home's rules with its directory; it covers edits under it and nothing else
    -- a sibling directory still asks -- and, forgotten, covers nothing."""
    (work / "sub").mkdir()
    other = work.parent / "other"
    other.mkdir()
    asked: list[str] = []

    def remember_first(notice: Offered, engine: Engine) -> AskReply:
        asked.append(notice.entry.request.tool_args["path"])
        [offer] = notice.entry.request.offers
        where = os.path.dirname(notice.entry.request.tool_args["path"])
        assert offer.covers == f"edits of files under {where} (write_file, edit_file)"
        # The first is remembered through the offered rule; the second asks (a sibling).
        return AskReply(approve=True, rule=offer.kind if len(asked) == 1 else "")

    model = _calls(
        ("write_file", {"path": "a.txt", "content": "a\n"}),
        ("write_file", {"path": "b.txt", "content": "b\n"}),
        ("write_file", {"path": "sub/e.txt", "content": "e\n"}),
        ("write_file", {"path": str(other / "c.txt"), "content": "c\n"}),
        ("write_file", {"path": "d.txt", "content": "d\n"}),
    )
    left: list[Any] = []
    async with open_engine(config, model=model) as engine:
        with engine.registry.listen("chat-") as listener:
            run = await engine.start_task("chat-rules", "go")
            async with trio.open_nursery() as nursery:

                async def answering() -> None:
                    while True:
                        notice = await listener.next_notice()
                        if isinstance(notice, Offered):
                            reply = remember_first(notice, engine)
                            if len(asked) == 2:  # the sibling's ask: forget the rule now
                                left.append(await engine.allowed("chat-rules"))
                                await engine.forget_allowed("chat-rules", "all")
                            await engine.answer(notice.entry.id, reply, by=listener)

                nursery.start_soon(answering)
                await run.wait_done()
                nursery.cancel_scope.cancel()
        rules = await engine.allowed("chat-rules")
    # a.txt asked and was remembered; b.txt and sub/e.txt (under it) did not ask; the
    # sibling asked; once the rule was forgotten, d.txt asked again.
    assert asked == [str(work / "a.txt"), str(other / "c.txt"), str(work / "d.txt")]
    [listed] = left
    assert [(r.kind, r.command, r.cwd) for r in listed] == [
        ("edits", "write_file, edit_file", str(work))
    ]
    assert rules == []
    for name, text in (("b.txt", "b\n"), ("sub/e.txt", "e\n"), ("d.txt", "d\n")):
        assert (work / name).read_text() == text
    assert (other / "c.txt").read_text() == "c\n"


def test_an_edits_rule_covers_only_file_changes_under_its_directory() -> None:
    """Issue 32 s2: "under" by whole path components (``/w/ab`` is not under ``/w/a``),
    never a command, and no command rule covers a file change."""
    rule = edits_rule("/w/a", at=1.0)
    assert rule.covers == "edits of files under /w/a (write_file, edit_file)"
    assert covers(rule, EditSubject(path="/w/a/x", cwd="/w/a"))
    assert covers(rule, EditSubject(path="/w/a/b/x", cwd="/w/a/b"))
    assert not covers(rule, EditSubject(path="/w/ab/x", cwd="/w/ab"))
    assert not covers(rule, EditSubject(path="/w/x", cwd="/w"))
    command = CommandSubject(
        command="write_file, edit_file", argv=None, cwd="/w/a", restricted=False
    )
    assert not covers(rule, command)
    assert not covers(
        command_rule("write_file, edit_file", "/w/a", at=1.0),
        EditSubject(path="/w/a/x", cwd="/w/a"),
    )
