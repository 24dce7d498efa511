"""Issue 30 "Start-up tells the truth": every mistake in ``config.toml`` stops the
daemon with one line ``file:line: key: problem`` and exit 2. The test walks the
configuration's schema (`agentrio.engine.config.Config`, its tables and theirs) and feeds every
key a value of the wrong type, and every key that is required (only ever with another
key's value: ``provider = "openai"`` needs ``name``) missing; each through the real
command line (``agentrio daemon``), whose serving part is replaced so nothing starts.
"""

from __future__ import annotations

import re
import typing
from pathlib import Path
from typing import Any, Literal

import attrs
import pytest

from agentrio.engine import cli as engine_cli
from agentrio.engine.config import Config
from agentrio.engine.server import lifecycle


def _leaves(cls: type, prefix: str = "") -> list[tuple[str, Any]]:
    """``(dotted key, type)`` of every key of the schema, tables included."""
    found: list[tuple[str, Any]] = []
    for name, hint in typing.get_type_hints(cls).items():
        if name == "home" and cls is Config:
            continue  # set from the environment, never read from the file
        key = f"{prefix}{name}"
        named = [t for t in typing.get_args(hint) if attrs.has(t)]
        if typing.get_origin(hint) is dict and named:  # [models.NAME], [mcp.NAME]: one
            found += _leaves(named[0], f"{key}.fast.")
            continue
        found.append((key, hint))
        table = next((t for t in (hint, *typing.get_args(hint)) if attrs.has(t)), None)
        if table is not None:
            found += _leaves(table, f"{key}.")
    return found


def _wrong(hint: Any) -> str:
    """A TOML value that is not of type ``hint``."""
    origin = typing.get_origin(hint)
    if attrs.has(hint) or any(attrs.has(t) for t in typing.get_args(hint)):
        return "1"  # a table given a number
    if origin is Literal:
        return '"no-such-choice"'
    if origin is list:
        return '"not a list"'
    if origin is dict:
        return '"not a table"'
    if hint is str:
        return "1"
    if hint in (int, float, bool):
        return '"a string"'
    raise AssertionError(f"no wrong value for {hint!r}")


def _toml(key: str, value: str) -> str:
    table, _, name = key.rpartition(".")
    return f"# a comment first\n[{table}]\n{name} = {value}\n" if table else f"{name} = {value}\n"


LEAVES = _leaves(Config)

#: The keys that are required, and what requires each.
REQUIRED = {
    "model.name": '[model]\nprovider = "openai"\n',
    "model.script": '[model]\nprovider = "scripted"\n',
    "decision_model.name": '[decision_model]\nprovider = "openai"\n',
    "decision_model.script": '[decision_model]\nprovider = "scripted"\n',
    "store.url": '[store]\nbackend = "redis"\n',
}


def _daemon_says(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str) -> tuple[int, str]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (home / "config.toml").write_text(text)
    monkeypatch.setenv("AGENTRIO_HOME", str(home))

    def never(*args: object, **kwargs: object) -> int:
        raise AssertionError(f"the daemon started on a bad config:\n{text}")

    monkeypatch.setattr(lifecycle, "run_daemon", never)
    return engine_cli.main(["daemon", "--home", str(home)]), str(home / "config.toml")


def test_the_walk_sees_the_whole_schema() -> None:
    """The walk itself: every table and some deep keys are in it, and every key has a
    default (so the only required keys are those another key's value requires)."""
    keys = {key for key, _ in LEAVES}
    assert {"server.port", "model.name", "telegram.allowed_users", "store.url"} <= keys
    assert {"decision_model.provider", "sandbox.hide", "discord.gateway_url"} <= keys
    assert len(keys) > 60
    classes = [Config] + [
        t for _, hint in LEAVES for t in (hint, *typing.get_args(hint)) if attrs.has(t)
    ]
    no_default = [
        f"{cls.__name__}.{field.name}"
        for cls in classes
        for field in attrs.fields(cls)
        if field.default is attrs.NOTHING
    ]
    assert no_default == []


@pytest.mark.parametrize(("key", "hint"), LEAVES, ids=[key for key, _ in LEAVES])
def test_a_key_of_the_wrong_type_is_one_line_with_its_line_and_exit_2(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    key: str,
    hint: Any,
) -> None:
    """Issue 30: each key of the schema given a wrong type: exit 2, one line naming
    the file, the key's line and the key."""
    text = _toml(key, _wrong(hint))
    code, path = _daemon_says(tmp_path, monkeypatch, text)
    err = capsys.readouterr().err
    assert code == 2
    line = 3 if "." in key else 1
    assert re.fullmatch(
        rf"agentrio daemon: {re.escape(path)}:{line}: {re.escape(key)}: \S.*\n", err
    )


@pytest.mark.parametrize("key", sorted(REQUIRED))
def test_a_required_key_missing_is_one_line_with_the_line_requiring_it_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], key: str
) -> None:
    """Issue 30: ``provider = "openai"`` without ``name`` (and each other required key
    missing): exit 2, one line naming the key and the line that requires it -- not the
    traceback of a daemon that got as far as building the model."""
    code, path = _daemon_says(tmp_path, monkeypatch, REQUIRED[key])
    err = capsys.readouterr().err
    assert code == 2
    assert re.fullmatch(
        rf"agentrio daemon: {re.escape(path)}:2: {re.escape(key)}: required \S.*\n", err
    )


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("[server]\nport = 70000\n", "2: server.port: must be <= 65535: 70000"),
        ("[server]\nprot = 1\n", "2: server.prot: unknown key (did you mean port?)"),
        ("[servr]\nport = 1\n", "1: servr: unknown key (did you mean server?)"),
        ("server.port = 'x'\n", "1: server.port: expected an integer, got a string"),
        ("[telegram]\napi_base_url = 'ftp://h'\n", "2: telegram.api_base_url: must start with"),
        ("[model]\napi_key = 'sk-1'\n", "2: model.api_key: an API key never goes in config.toml"),
        ("[server\n", "1: syntax: Expected ']'"),
    ],
)
def test_values_unknown_keys_secrets_and_syntax_are_one_line_too(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    text: str,
    where: str,
) -> None:
    """Issue 30: a validator's refusal names its key (not only its table), an unknown
    key says which it may have meant, an API key in the file is refused, a syntax error
    names its line; all one line and exit 2."""
    code, path = _daemon_says(tmp_path, monkeypatch, text)
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith(f"agentrio daemon: {path}:{where}")
    assert err.count("\n") == 1


def test_a_mistake_found_only_when_the_model_is_built_is_one_line_too(tmp_path: Path) -> None:
    """Issue 30: a script file that is not there is found only when the daemon builds
    its model; the real daemon says it like the loader does (file, line, key), exit 2,
    no traceback, and never serves."""
    import subprocess
    import sys

    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(
        f'[model]\nprovider = "scripted"\nscript = "{tmp_path}/no.toml"\n'
    )
    done = subprocess.run(
        [sys.executable, "-m", "agentrio.engine", "daemon", "--port", "0", "--home", str(home)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert done.stderr.splitlines()[-1] == (
        f"agentrio daemon: {home / 'config.toml'}:3: model.script: {tmp_path}/no.toml: no such file"
    )
    assert not (home / "daemon.json").exists()
