"""``agentrio doctor``: what a daemon of this home needs, checked, one line each with
what to do (issue 30).

The checks read; they change nothing (no file is written, no daemon started): the
configuration and the mode of ``config.toml``; the sandbox (bubblewrap started once, as
the daemon does); the store (the SQLite file opened read-only, or the Redis server
pinged); the model (``GET <base_url>/models`` for ``openai``, with the key when one is
set, never printed); the chat bots (library, token, allowed users; the platform itself
is not contacted); MCP servers (agentrio has no MCP client yet: said so); and the port
(this home's daemon answering, or the configured port free or held by something else).

Each line starts with ``ok``, ``warn``, ``FAIL`` or ``--`` (nothing to check); a
``warn`` or ``FAIL`` line ends with what to do. Exit status 0 when nothing failed, else 1.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import stat
from collections.abc import Awaitable, Callable
from contextlib import closing
from pathlib import Path
from typing import Final, Literal
from urllib.parse import urlsplit

import attrs
import trio

from agentrio.engine.config import Config, ModelConfig, load_config
from agentrio.engine.errors import ConfigError
from agentrio.engine.extras import installed, missing_message

__all__ = ["Finding", "check_all", "main"]

Mark = Literal["ok", "warn", "FAIL", "--"]

#: How long one network check (model, Redis, the daemon's health) may take.
CHECK_TIMEOUT_S: Final = 5.0


@attrs.frozen
class Finding:
    """One line of the report: its mark, what was checked, and what was found (with
    what to do, for ``warn`` and ``FAIL``)."""

    mark: Mark
    what: str
    text: str

    def line(self) -> str:
        return f"{self.mark:<4}  {self.what:<15} {self.text}"


def main(home: Path | None) -> int:
    """Print the report for ``home`` (default: the configured home); return 0 or 1."""
    # The checks reuse the daemon's parts, which log what they find; the report says it.
    logging.getLogger().addHandler(logging.NullHandler())
    findings = trio.run(check_all, home)
    for finding in findings:
        print(finding.line(), flush=True)
    failed = sum(finding.mark == "FAIL" for finding in findings)
    warned = sum(finding.mark == "warn" for finding in findings)
    if failed or warned:
        print(f"{failed} failed, {warned} to look at")
    else:
        print("all good")
    return 1 if failed else 0


async def check_all(home: Path | None) -> list[Finding]:
    """Every check, in the report's order; a configuration that does not load is the
    only finding (the others would check the wrong thing)."""
    try:
        config = load_config(home)
    except ConfigError as exc:
        return [Finding("FAIL", "config", f"{exc} -- fix it; the daemon will not start")]
    checks: list[Callable[[Config], Awaitable[list[Finding]]]] = [
        _in_thread(_config),
        _sandbox,
        _store,
        _models,
        _in_thread(_bots),
        _mcp,
        _ports,
    ]
    findings: list[Finding] = []
    for check in checks:
        findings += await check(config)
    return findings


def _in_thread(
    check: Callable[[Config], list[Finding]],
) -> Callable[[Config], Awaitable[list[Finding]]]:
    """A check that reads files, run in a worker thread."""

    async def run(config: Config) -> list[Finding]:
        return await trio.to_thread.run_sync(check, config)

    return run


def _config(config: Config) -> list[Finding]:
    path = config.home_path / "config.toml"
    if not path.exists():
        return [Finding("ok", "config", f"no {path}: the defaults (docs/configuration.md)")]
    found = [Finding("ok", "config", f"{path} is valid")]
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        found.append(
            Finding(
                "warn",
                "config mode",
                f"{path} is open to other users (mode {mode:04o}): chmod 600 {path}",
            )
        )
    return found


async def _sandbox(config: Config) -> list[Finding]:
    from agentrio.engine.processes.sandbox import Sandbox

    status = (await Sandbox.probe(config)).status
    if status.active:
        return [Finding("ok", "sandbox", status.detail)]
    return [
        Finding(
            "warn",
            "sandbox",
            f"{status.detail}: every command asks first until it works -- install "
            "bubblewrap (sudo apt-get install bubblewrap, or make sysdeps) and allow "
            "unprivileged user namespaces (docs/security.md)",
        )
    ]


async def _store(config: Config) -> list[Finding]:
    if config.store.backend == "redis":
        return [await _redis(config)]
    db = config.home_path / "agentrio.db"
    if not await trio.to_thread.run_sync(db.exists):
        return [Finding("ok", "store", f"SQLite: no {db} yet (made at the first start)")]
    problem = await trio.to_thread.run_sync(_sqlite_problem, db)
    if problem:
        return [
            Finding(
                "FAIL",
                "store",
                f"{db} is not a readable database ({problem}): move it aside "
                f"(mv {db} {db}.broken) or restore a backup",
            )
        ]
    return [Finding("ok", "store", f"SQLite at {db}")]


def _sqlite_problem(db: Path) -> str:
    """What is wrong with reading ``db`` (read-only, blocking), or ""."""
    try:
        with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1.0)) as connection:
            connection.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.Error as exc:
        return str(exc)
    return ""


async def _redis(config: Config) -> Finding:
    if not installed("redis"):
        return Finding("FAIL", "store", missing_message("redis"))
    from agentrio.engine.store.redis_client import open_client

    where = _without_password(config.store.url)
    try:
        with trio.fail_after(CHECK_TIMEOUT_S):
            async with open_client(
                config.store.url, connect_timeout_s=CHECK_TIMEOUT_S, reply_timeout_s=CHECK_TIMEOUT_S
            ) as client:
                await client.ping()
    except Exception as exc:  # coredis raises many kinds; each means "not reachable"
        return Finding(
            "FAIL",
            "store",
            f"cannot reach the Redis store at {where} ({type(exc).__name__}): start Redis, "
            "or fix [store] url in config.toml",
        )
    return Finding("ok", "store", f"Redis at {where} answers")


def _without_password(url: str) -> str:
    parts = urlsplit(url)
    netloc = parts.netloc.rpartition("@")[2]
    return f"{parts.scheme}://{netloc}{parts.path}"


async def _models(config: Config) -> list[Finding]:
    found = [await _model("model", config.model)]
    if config.decision_model is not None:
        found.append(await _model("decision model", config.decision_model))
    return found


async def _model(what: str, model: ModelConfig) -> Finding:
    if model.provider == "builtin":
        return Finding("ok", what, "builtin (offline, no network)")
    if model.provider == "scripted":
        script = Path(model.script)
        if not await trio.to_thread.run_sync(_is_file, script):
            return Finding("FAIL", what, f"no script file {script}: fix [model] script")
        return Finding("ok", what, f"scripted, from {script}")
    return await _openai(what, model)


def _is_file(path: Path) -> bool:
    """Whether ``path`` (``~`` expanded) is a file (blocking)."""
    return path.expanduser().is_file()


async def _openai(what: str, model: ModelConfig) -> Finding:
    import httpx

    url = model.base_url.rstrip("/") + "/models"
    key = os.environ.get(model.api_key_env, "") if model.api_key_env else ""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    try:
        async with httpx.AsyncClient(timeout=CHECK_TIMEOUT_S) as client:
            reply = await client.get(url, headers=headers)
    except httpx.HTTPError as exc:
        return Finding(
            "FAIL",
            what,
            f"{model.base_url} is not reachable ({type(exc).__name__}): start the model "
            "server, or fix [model] base_url in config.toml",
        )
    if reply.status_code in (401, 403):
        where = f"${model.api_key_env}" if model.api_key_env else "api_key_env"
        return Finding(
            "FAIL",
            what,
            f"{model.base_url} refuses the API key (HTTP {reply.status_code}): set {where} "
            "(or [model] api_key_secret) to a valid key",
        )
    if reply.status_code != 200:
        return Finding(
            "warn",
            what,
            f"{model.base_url} answers, but GET /models gave HTTP {reply.status_code}: "
            "check [model] base_url (it ends before /chat/completions)",
        )
    names = _model_names(reply)
    if names is not None and model.name not in names:
        shown = ", ".join(sorted(names)[:5]) or "none"
        return Finding(
            "warn",
            what,
            f"{model.base_url} answers, but lists no model {model.name!r} (it has: "
            f"{shown}): fix [model] name",
        )
    return Finding("ok", what, f"openai-compatible {model.name!r} at {model.base_url} answers")


def _model_names(reply: object) -> set[str] | None:
    """The model ids of a ``/models`` answer, or None when it is not the usual shape."""
    try:
        data = reply.json()["data"]  # type: ignore[attr-defined]
        return {str(item["id"]) for item in data}
    except (ValueError, KeyError, TypeError):
        return None


def _bots(config: Config) -> list[Finding]:
    from agentrio.protocol.frontends import (
        DISCORD_TOKEN_ENV,
        DISCORD_TOKEN_FILE,
        TELEGRAM_TOKEN_ENV,
        TELEGRAM_TOKEN_FILE,
    )

    found = []
    for name, table, env, file in (
        ("telegram", config.telegram, TELEGRAM_TOKEN_ENV, TELEGRAM_TOKEN_FILE),
        ("discord", config.discord, DISCORD_TOKEN_ENV, DISCORD_TOKEN_FILE),
    ):
        token_file = config.home_path / file
        if not table.enabled:
            found.append(Finding("--", name, f"off ([{name}] enabled = true turns it on)"))
        elif not installed(name):
            found.append(Finding("FAIL", name, missing_message(name)))
        elif not os.environ.get(env) and not token_file.is_file():
            found.append(
                Finding(
                    "FAIL",
                    name,
                    f"no bot token: set ${env}, or run `agentrio {name} --store-token` "
                    f"(it goes to {token_file}, never to config.toml)",
                )
            )
        elif not table.allowed_users:
            found.append(
                Finding(
                    "warn",
                    name,
                    f"[{name}] allowed_users is empty, so the bot refuses everyone: add "
                    "your user id (docs/frontends.md)",
                )
            )
        else:
            users = len(table.allowed_users)
            found.append(Finding("ok", name, f"enabled: library, token, {users} allowed user(s)"))
    return found


async def _mcp(config: Config) -> list[Finding]:
    await trio.lowlevel.checkpoint()
    return [Finding("--", "mcp servers", "none configured (this agentrio runs no MCP servers yet)")]


async def _ports(config: Config) -> list[Finding]:
    from agentrio.engine.server.lifecycle import read_daemon_json
    from agentrio.engine.server.ports import port_taken

    home = config.home_path
    info = await trio.to_thread.run_sync(read_daemon_json, home) or {}
    host, port = info.get("host"), info.get("port")
    if isinstance(host, str) and isinstance(port, int) and await _answers(host, port):
        return [Finding("ok", "port", f"this home's daemon answers at http://{host}:{port}")]
    host, port = config.server.host, config.server.port
    if not await trio.to_thread.run_sync(port_taken, host, port):
        return [Finding("ok", "port", f"{host}:{port} is free for this home's daemon")]
    holder = "another agentrio daemon" if await _answers(host, port) else "another program"
    return [
        Finding(
            "warn",
            "port",
            f"{host}:{port} is held by {holder}: a daemon the REPL starts takes a free "
            f"port instead; for `agentrio daemon` pass --port N or set [server] port",
        )
    ]


async def _answers(host: str, port: int) -> bool:
    """Whether an agentrio daemon answers ``GET /v1/health`` at ``host:port``."""
    import httpx

    url = f"http://{'[' + host + ']' if ':' in host else host}:{port}/v1/health"
    try:
        async with httpx.AsyncClient(timeout=CHECK_TIMEOUT_S) as client:
            reply = await client.get(url)
        return reply.status_code == 200 and reply.json().get("ok") is True
    except (httpx.HTTPError, ValueError, AttributeError):
        return False
