"""engine/rules and the stores' rules: what a remembered rule covers, and that it lasts.

Covers R76 and R92 (issue 32 section 4): rules are kept by both stores (SQLite, and a
real ``redis-server``) across reopening, per home; forgetting says what went; an
argv-prefix rule is offered and matched only for a simple plain program, judged on
the parsed argv and the real directory, and no quoting, chaining, assignment, glob,
redirection or elevation widens it.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agentrio.engine.config import ToolsConfig
from agentrio.engine.rules import (
    CommandSubject,
    RuleBook,
    command_rule,
    covers,
    offered_prefix,
    prefix_rule,
)
from agentrio.engine.store import Store, open_store
from agentrio.engine.store.redis_store import open_redis_store
from agentrio.engine.store.sqlite import SCHEMA_VERSION
from agentrio.engine.tools.policy import classify
from agentrio.protocol.rules import COMMAND, COMMAND_PREFIX, AllowedRule

WORK = "/srv/work"


@pytest.fixture(params=["sqlite", "redis"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """Both backends: the SQLite file, and a real ``redis-server`` (tests/conftest.py)."""
    if request.param == "sqlite":
        async with open_store(tmp_path / "agentrio.db") as opened:
            yield opened
        return
    url = request.getfixturevalue("redis_url")
    async with open_redis_store(
        url, prefix="rules:", connect_timeout_s=None, reply_timeout_s=None
    ) as redis_store:
        yield redis_store


def _subject(command: str | list[str], cwd: str = WORK) -> CommandSubject:
    """A command as the gate judges it: its parsed argv and restricted verdict."""
    verdict = classify(command, ToolsConfig(), cwd=cwd)
    return CommandSubject(
        command=command, argv=verdict.argv, cwd=cwd, restricted=verdict.restricted
    )


# -- the stores ------------------------------------------------------------------------


async def test_rules_are_kept_listed_oldest_first_and_removed_saying_what(store: Store) -> None:
    """R92: a rule written is listed back equal, oldest first; deleting one returns
    exactly it (an unknown id: nothing), ``all`` returns every rule left."""
    late = command_rule("touch b", WORK, at=20.0)
    early = prefix_rule(("npm", "test"), WORK, at=10.0)
    await store.put_rule(late)
    await store.put_rule(early)
    assert await store.list_rules() == [early, late]
    assert await store.delete_rules("rule_00000000") == []
    assert await store.delete_rules(late.id) == [late]
    assert await store.list_rules() == [early]
    other = command_rule("make", "/srv/other", at=30.0)
    await store.put_rule(other)
    assert await store.delete_rules("all") == [early, other]
    assert await store.list_rules() == []


async def test_a_rule_outlives_the_sqlite_store_that_kept_it(tmp_path: Path) -> None:
    """R92: reopening the home's store (a daemon restart) finds the rule."""
    path = tmp_path / "agentrio.db"
    rule = prefix_rule(("npm", "test"), WORK, at=5.0)
    async with open_store(path) as first:
        await RuleBook(first).add(rule)
    async with open_store(path) as second:
        assert await RuleBook(second).rules() == [rule]
        assert await RuleBook(second).covering(_subject("npm test foo")) == rule


async def test_a_rule_outlives_the_redis_client_that_kept_it(redis_url: str) -> None:
    """R92, R83: a rule one Redis client (daemon) kept is seen by the next one with the
    same prefix, and by no deployment of another prefix; forgotten by one, it stops
    covering for the other at once."""
    rule = command_rule("touch made", WORK, at=5.0)
    async with open_redis_store(redis_url, prefix="home-a:") as first:
        await RuleBook(first).add(rule)
    async with (
        open_redis_store(redis_url, prefix="home-a:") as again,
        open_redis_store(redis_url, prefix="home-a:") as peer,
        open_redis_store(redis_url, prefix="home-b:") as other,
    ):
        assert await RuleBook(again).covering(_subject("touch made")) == rule
        assert await RuleBook(other).rules() == []
        assert await RuleBook(peer).forget(rule.id) == [rule]
        assert await RuleBook(again).covering(_subject("touch made")) is None


async def test_a_version_4_file_gains_the_rules_table(tmp_path: Path) -> None:
    """R72, R92: a store of schema version 4 (before rules) opens, moves to version 5
    and keeps rules from then on."""
    path = tmp_path / "old.db"
    async with open_store(path):
        pass
    with sqlite3.connect(path) as raw:
        raw.execute("DROP TABLE rules")
        raw.execute("PRAGMA user_version = 4")
    raw.close()
    rule = command_rule("true", WORK, at=1.0)
    async with open_store(path) as store:
        assert await store.list_rules() == []
        await store.put_rule(rule)
    async with open_store(path) as store:
        assert await store.list_rules() == [rule]
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    raw.close()


async def test_adding_the_same_rule_twice_keeps_the_first(tmp_path: Path) -> None:
    """R76: a second approval of what a rule already covers adds no second rule."""
    async with open_store(tmp_path / "agentrio.db") as store:
        book = RuleBook(store)
        first = await book.add(command_rule("touch a", WORK, at=1.0))
        assert await book.add(command_rule("touch a", WORK, at=2.0)) == first
        other = await book.add(prefix_rule(("touch", "a"), WORK, at=3.0))
        assert await book.rules() == [first, other]


async def test_an_unknown_kind_is_listed_and_covers_nothing(tmp_path: Path) -> None:
    """R92: a rule of a kind this daemon does not know (a newer daemon's) is listed
    and removable, and covers nothing (fail closed)."""
    future = AllowedRule(
        id="rule_0a0b0c0d", kind="everything", command="touch a", cwd=WORK, added_at=1.0
    )
    async with open_store(tmp_path / "agentrio.db") as store:
        await store.put_rule(future)
        book = RuleBook(store)
        assert await book.rules() == [future]
        assert await book.covering(_subject("touch a")) is None
        assert await book.forget("all") == [future]


# -- what a rule covers ----------------------------------------------------------------


def test_an_exact_rule_covers_that_command_in_that_directory_only() -> None:
    """R76: the exact text, in the same real directory; never another command of the
    same program, another directory, or a restricted command."""
    rule = command_rule(["touch", "a b"], WORK, at=1.0)
    assert rule.kind == COMMAND
    assert rule.covers == "exactly `touch 'a b'` in /srv/work"
    assert covers(rule, _subject("touch 'a b'"))
    assert covers(rule, _subject(["touch", "a b"]))
    assert not covers(rule, _subject("touch a b"))
    assert not covers(rule, _subject("touch 'a b'", "/srv/other"))
    restricted = command_rule("touch /etc/passwd", WORK, at=1.0)
    assert not covers(restricted, _subject("touch /etc/passwd"))
    assert not covers(attrs_evolve_cwd(rule, ""), _subject("touch 'a b'"))


def attrs_evolve_cwd(rule: AllowedRule, cwd: str) -> AllowedRule:
    """``rule`` with another directory (an older daemon's rule has none)."""
    return AllowedRule(
        id=rule.id, kind=rule.kind, command=rule.command, cwd=cwd, added_at=rule.added_at
    )


@pytest.mark.parametrize(
    ("command", "prefix"),
    [
        ("npm test", ("npm", "test")),
        ("npm test foo --watch=false", ("npm", "test")),
        (["cargo", "build", "--release"], ("cargo", "build")),
        ("git status --short", ("git", "status")),
        ("'npm' \"test\" x", ("npm", "test")),
        ("/usr/bin/npm test", None),  # only a bare program name
        ("git", None),  # a program alone is too wide
        ("npm", None),
        ("ls -la", None),  # the second word is an option
        ("sleep 30", None),  # ... or a number
        ("cat /etc/hosts", None),  # ... or a path
        ("npm X=1", None),  # ... or an assignment
        ("FOO=1 npm test", None),  # not a simple command
        ("npm test; rm -rf ~", None),
        ("npm test && rm x", None),
        ("npm test > out.txt", None),
        ("npm test *", None),  # a glob
        ("npm test $(rm x)", None),
        ("npm 'test; rm x'", None),  # one word, not a subcommand
        ("sudo npm test", None),  # an elevation
        ("doas npm test", None),
        ("npm test sudo", None),
        ("bash -c 'npm test'", None),  # a shell
        ("sh build.sh", None),
        ("python -c pass", None),  # an interpreter given code
        ("node -e 1", None),
        ("python script.py", None),  # an interpreter at all
        ("env npm test", None),  # a runner of what its arguments name
        ("xargs npm", None),
        ("git -c core.pager=sh log", None),
        ("npm test /etc/shadow", None),  # a restricted path
    ],
)
def test_the_prefix_offered(command: str | list[str], prefix: tuple[str, ...] | None) -> None:
    """R92: an argv prefix (the program and its subcommand word) is offered only for a
    simple plain program, judged on the parsed argv (the list in the module
    docstring of engine/rules/prefix.py)."""
    subject = _subject(command)
    assert offered_prefix(subject.argv, restricted=subject.restricted) == prefix


@pytest.mark.parametrize(
    ("command", "cwd", "covered"),
    [
        ("npm test", WORK, True),
        ("npm test foo", WORK, True),
        (["npm", "test", "--", "x y"], WORK, True),
        ("npm test foo", "/srv/other", False),
        ("npm test; rm x", WORK, False),
        ("npm test && rm x", WORK, False),
        ("npm test | tee x", WORK, False),
        ("npm test > x", WORK, False),
        ("npm test `rm x`", WORK, False),
        ("FOO=1 npm test", WORK, False),
        ("npm test *", WORK, False),
        ("npm testing", WORK, False),
        ("'npm test' foo", WORK, False),
        ("npm 'test foo'", WORK, False),
        ("sudo npm test", WORK, False),
        ("npm test sudo", WORK, False),
        ("npm test ~/.ssh/id_rsa", WORK, False),
        ("/tmp/npm test", WORK, False),
        ("npm run test", WORK, False),
        ("npx test", WORK, False),
        ("npm test sub/dir --watch=false", WORK, True),
        ("npm test --prefix /tmp/evil", WORK, False),  # another tree's package
        ("npm test --prefix=/tmp/evil", WORK, False),
        ("npm test ../other", WORK, False),
        ("npm test -C/tmp", WORK, False),  # a short option's glued value
        ("npm test x:/etc", WORK, False),
    ],
)
def test_a_prefix_rule_covers(command: str | list[str], cwd: str, covered: bool) -> None:
    """R92: ``npm test`` remembered in /srv/work covers a simple command whose argv
    starts with those two words, there; chaining, redirection, substitution,
    assignments, globs, quoting, elevation, restricted paths, another program path,
    another directory, or a further word naming a path outside it are never covered."""
    rule = prefix_rule(("npm", "test"), WORK, at=1.0)
    assert rule.kind == COMMAND_PREFIX
    assert rule.command == "npm test"
    assert (
        rule.covers
        == "`npm test …` in /srv/work (any further arguments that name no path outside it)"
    )
    assert covers(rule, _subject(command, cwd)) is covered


def test_a_prefix_rule_never_follows_a_symlink_out(tmp_path: Path) -> None:
    """R92: a further word that names a path inside the rule's directory by its text
    but outside it by its real path (a symlink out) is not covered."""
    base = Path(os.path.realpath(tmp_path))
    work = base / "work"
    work.mkdir()
    (work / "inside").mkdir()
    (work / "out").symlink_to(base)
    rule = prefix_rule(("npm", "test"), str(work), at=1.0)
    assert covers(rule, _subject("npm test inside", str(work)))
    assert not covers(rule, _subject("npm test out/x", str(work)))
