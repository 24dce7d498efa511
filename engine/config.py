"""agentrio's configuration: frozen attrs values loaded from ``<home>/config.toml``.

A missing file means defaults; every key is optional. An invalid file raises
`ConfigError` with one line naming the key and its line, e.g.
``config.toml:7: server.port: expected an integer, got a string``.
The home is ``$AGENTRIO_HOME`` or ``~/.config/agentrio``. See docs/configuration.md.
"""

from __future__ import annotations

import operator
import os
import re
import tomllib
import typing
from functools import partial
from pathlib import Path
from typing import Any, Final, Literal

import attrs
import cattrs
import tomli_w
from cattrs.gen import make_mapping_structure_fn
from cattrs.preconf.tomllib import make_converter

from agentrio.engine.agent_config import AgentConfig
from agentrio.engine.credential_stores import DEFAULT_HIDE
from agentrio.engine.errors import ConfigError
from agentrio.engine.mcp.config import McpServerConfig, mcp_problems, refused_mcp_keys
from agentrio.engine.sentinel_url import (
    REDIS_SCHEMES,
    SENTINEL_SCHEME,
    SentinelTarget,
    parse_sentinel_url,
)
from agentrio.protocol.asks import ACK_WAIT_S
from agentrio.protocol.codec import format_problem, install_strict_hooks
from agentrio.protocol.frontends import DiscordConfig, TelegramConfig, token_key_refused

__all__ = [
    "DEFAULT_HIDE",
    "SENTINEL_SCHEME",
    "AgentConfig",
    "BackgroundConfig",
    "Config",
    "DiscordConfig",
    "McpServerConfig",
    "ModelConfig",
    "SandboxConfig",
    "SentinelTarget",
    "ServerConfig",
    "StoreConfig",
    "TelegramConfig",
    "ToolsConfig",
    "default_home",
    "load_config",
    "locate_error",
    "model_problem",
    "parse_sentinel_url",
    "save_config",
]

DEFAULT_PORT: Final = 17990


@attrs.frozen(kw_only=True)
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = attrs.field(
        default=DEFAULT_PORT, validator=[attrs.validators.ge(0), attrs.validators.le(65535)]
    )
    #: Browser ``Origin`` values allowed to open ``/v1/ws`` (besides the daemon's own).
    allowed_origins: list[str] = attrs.field(factory=list)
    #: ``Host`` header values accepted over TCP besides the daemon's own names
    #: (``127.0.0.1``, ``localhost``, ``[::1]`` with the port) and the hosts of
    #: ``allowed_origins``: e.g. ``agent.lan:8765`` behind a proxy (issue 29, DNS
    #: rebinding).
    allowed_hosts: list[str] = attrs.field(factory=list)
    #: Seconds a session with nothing to do stays in memory (no run, no subscriber,
    #: no background job, no open ask); then it is dropped with its replay buffer and
    #: rebuilt from the store on its next use. 0 keeps every session.
    session_idle_s: float = attrs.field(default=600.0, validator=attrs.validators.ge(0))
    #: Bytes of a session's recent events kept for replay to new subscribers; the
    #: oldest go first (also at most 512 events).
    replay_bytes: int = attrs.field(default=4 * 1024 * 1024, validator=attrs.validators.ge(0))
    #: Bytes the idle sessions may hold together, daemon-wide (their replay buffers
    #: and ~3 KiB each): past it the longest-idle go at once, not after
    #: ``session_idle_s`` (issue 23).
    idle_sessions_bytes: int = attrs.field(
        default=16 * 1024 * 1024, validator=attrs.validators.ge(0)
    )
    #: Bytes of events one subscriber may fall behind; past it the subscriber is
    #: dropped (WebSocket close 4008, SSE a final ``: dropped`` comment) and may
    #: resubscribe to replay.
    subscriber_queue_bytes: int = attrs.field(
        default=8 * 1024 * 1024, validator=attrs.validators.ge(64 * 1024)
    )
    #: Seconds a ``chat-``/``tg-``/``dc-`` question outlives the front-end it was
    #: shown on (a reloaded web page) while it waits for another one; then it is
    #: denied (R79). 0 denies at once. ``cli-`` questions never wait (R6, R43).
    listener_grace_s: float = attrs.field(default=30.0, validator=attrs.validators.ge(0))
    #: Seconds a front-end may take to acknowledge an ask it was shown before the ask
    #: says it is not acknowledged yet (``late``, issue 34, R97).
    ack_wait_s: float = attrs.field(default=ACK_WAIT_S, validator=attrs.validators.gt(0))


@attrs.frozen(kw_only=True)
class ModelConfig:
    """One model: ``[model]`` (the default) or a named ``[models.NAME]`` table
    (docs/configuration.md, docs/providers.md)."""

    #: ``builtin`` (offline), ``openai`` (Chat Completions), ``openai-responses``
    #: (the Responses API), ``anthropic`` (Messages) or ``scripted``.
    provider: Literal["builtin", "openai", "openai-responses", "anthropic", "scripted"] = "builtin"
    base_url: str = "http://127.0.0.1:11434/v1"
    name: str = ""
    #: Environment variable holding the API key; empty: ``OPENAI_API_KEY``, or
    #: ``ANTHROPIC_API_KEY`` for ``anthropic``.
    api_key_env: str = ""
    #: Name of a stored secret holding the API key, used when the variable is unset.
    api_key_secret: str = ""
    timeout_s: float = 120.0
    stream: bool = True
    #: TOML file of turns for the ``scripted`` provider.
    script: str = ""
    #: Longest reply in tokens; 0: the provider's default (8192 for ``anthropic``,
    #: which requires a value).
    max_output_tokens: int = attrs.field(default=0, validator=attrs.validators.ge(0))
    #: ``openai`` / ``openai-responses``: reasoning effort (``low``, ``medium``,
    #: ``high``); empty: not sent.
    reasoning_effort: str = ""
    #: ``anthropic``: extended thinking's token budget; 0: thinking off.
    thinking_tokens: int = attrs.field(default=0, validator=attrs.validators.ge(0))
    #: Tries of one call in all (429, 5xx, connection errors, timeouts are retried).
    retries: int = attrs.field(default=4, validator=attrs.validators.ge(1))
    #: First back-off between tries, doubling up to ``retry_max_s``.
    retry_base_s: float = attrs.field(default=1.0, validator=attrs.validators.ge(0))
    retry_max_s: float = attrs.field(default=30.0, validator=attrs.validators.ge(0))
    #: The longest ``Retry-After`` waited for; a longer one fails the call at once.
    max_retry_after_s: float = attrs.field(default=120.0, validator=attrs.validators.ge(0))
    #: Names of ``[models.NAME]`` tried in order when this model still fails after
    #: its retries (never for a context-length refusal).
    fallback: list[str] = attrs.field(factory=list)
    #: The model's context window in tokens: a task's input (system prompt, summary,
    #: earlier exchanges, its own turns) is kept within it less a reserve for the reply.
    context_tokens: int = attrs.field(default=128_000, validator=attrs.validators.ge(1024))
    #: USD per million input / cached input / output tokens, for ``/usage``; 0: unknown.
    price_input: float = attrs.field(default=0.0, validator=attrs.validators.ge(0))
    price_cached_input: float = attrs.field(default=0.0, validator=attrs.validators.ge(0))
    price_output: float = attrs.field(default=0.0, validator=attrs.validators.ge(0))


@attrs.frozen(kw_only=True)
class ToolsConfig:
    #: Programs that run without confirmation when used alone, without shell operators.
    readonly_commands: list[str] = attrs.field(
        factory=lambda: [
            "ls",
            "cat",
            "head",
            "tail",
            "wc",
            "grep",
            "pwd",
            "echo",
            "date",
            "whoami",
            "uname",
            "id",
        ]
    )
    #: ``git`` subcommands that count as read-only.
    readonly_git: list[str] = attrs.field(factory=lambda: ["status", "log", "diff", "show"])
    #: Paths whose use in a command asks for the system password (R7).
    restricted_paths: list[str] = attrs.field(
        factory=lambda: ["/etc", "/usr", "/bin", "/sbin", "/boot", "/lib", "/var", "/opt", "/root"]
    )
    #: The longest a command may run; a model-chosen ``timeout_s`` is clamped to it.
    command_timeout_s: float = 600.0
    #: The longest a command that runs without confirmation (in the sandbox) may run.
    readonly_timeout_s: float = 30.0
    #: Seconds between SIGTERM and SIGKILL when a command's group is cancelled (R48).
    kill_grace_s: float = 2.0
    #: Largest tool result kept, in bytes.
    max_result_bytes: int = 32 * 1024
    #: The environment of an approved command (docs/configuration.md): ``inherit``
    #: passes the daemon's minus ``env_withhold``; ``minimal`` only ``env_keep``. The
    #: daemon's own credentials (model keys, bot tokens, ``AGENTRIO_*``) never pass.
    command_env: Literal["inherit", "minimal"] = "inherit"
    #: With ``command_env = "minimal"``: the variables passed (globs, any case).
    env_keep: list[str] = attrs.field(
        factory=lambda: [
            "PATH",
            "HOME",
            "USER",
            "LOGNAME",
            "SHELL",
            "LANG",
            "LANGUAGE",
            "LC_*",
            "TZ",
            "TERM",
            "TMPDIR",
            "AGENTRIO_HOME",
            "AGENTRIO_OWNER",
        ]
    )
    #: Variables never passed to an approved command (globs, any case): credentials.
    env_withhold: list[str] = attrs.field(
        factory=lambda: [
            "*_API_KEY",
            "*_APIKEY",
            "*_KEY",
            "*_TOKEN",
            "*_SECRET",
            "*_SECRET_*",
            "*PASSWORD*",
            "*PASSWD*",
            "*_CREDENTIALS",
            "*_PAT",
            "*_DSN",
            "DATABASE_URL",
        ]
    )


@attrs.frozen(kw_only=True)
class BackgroundConfig:
    #: Legs running at once per session; 0 means half the CPU count, at least 3 (R22).
    max_tasks: int = 0
    keywords: list[str] = attrs.field(
        factory=lambda: [
            "error",
            "err!",
            "fail",
            "fatal",
            "panic",
            "exception",
            "traceback",
            "segmentation fault",
            "core dumped",
            "out of memory",
            "permission denied",
            "command not found",
            "no such file",
        ]
    )
    settle_s: float = 2.0
    max_settle_s: float = 10.0
    report_interval_s: float = 30.0
    #: Largest size of a leg's log file; past it the log keeps its first half and a
    #: rolling tail, with a marker saying how many bytes were elided between them.
    max_log_bytes: int = attrs.field(
        default=64 * 1024 * 1024, validator=attrs.validators.ge(64 * 1024)
    )


@attrs.frozen(kw_only=True)
class SandboxConfig:
    """The read-only sandbox commands run in when nobody was asked (R75)."""

    #: bubblewrap's program; when it is missing or cannot start, every command asks.
    program: str = "bwrap"
    #: Places hidden inside the sandbox besides every agentrio home (``~`` is the
    #: daemon user's home; `DEFAULT_HIDE`, docs/security.md). A directory becomes
    #: empty, a file reads as empty. Setting it replaces the list.
    hide: list[str] = attrs.field(factory=lambda: list(DEFAULT_HIDE))


@attrs.frozen(kw_only=True)
class StoreConfig:
    """Where state lives (docs/deployment.md): the SQLite file in the home (one
    daemon), or a Redis server several daemons can share (issue 21)."""

    #: ``sqlite`` (``<home>/agentrio.db``, the default) or ``redis``.
    backend: Literal["sqlite", "redis"] = "sqlite"
    #: The Redis server (``redis://``, ``rediss://`` for TLS, ``unix://``, or
    #: ``redis+sentinel://`` naming Sentinels and a service); required with
    #: ``backend = "redis"``. A password in it is never logged.
    url: str = ""
    #: Prefix of every key this deployment writes, so several can share one server.
    prefix: str = "agentrio:"


@attrs.frozen(kw_only=True)
class Config:
    server: ServerConfig = attrs.field(factory=ServerConfig)
    model: ModelConfig = attrs.field(factory=ModelConfig)
    #: Named models (``[models.NAME]``): chosen per session with ``/model NAME``, or
    #: tried as another model's ``fallback``.
    models: dict[str, ModelConfig] = attrs.field(factory=dict)
    #: Optional model that checks watcher hits (R29); provider ``""`` means none.
    decision_model: ModelConfig | None = None
    tools: ToolsConfig = attrs.field(factory=ToolsConfig)
    background: BackgroundConfig = attrs.field(factory=BackgroundConfig)
    sandbox: SandboxConfig = attrs.field(factory=SandboxConfig)
    #: The Telegram front-end (docs/frontends.md); its token is never in this file.
    telegram: TelegramConfig = attrs.field(factory=TelegramConfig)
    #: The Discord front-end (docs/frontends.md); its token is never in this file.
    discord: DiscordConfig = attrs.field(factory=DiscordConfig)
    store: StoreConfig = attrs.field(factory=StoreConfig)
    #: ``[agent]``: what every task is told (`AgentConfig`).
    agent: AgentConfig = attrs.field(factory=AgentConfig)
    mcp: dict[str, McpServerConfig] = attrs.field(factory=dict)  #: [mcp.NAME], docs/mcp.md
    #: Most turns one task may take before it fails.
    max_turns: int = 50
    #: Where state lives; set from the environment, not from the file.
    home: str = ""

    @property
    def home_path(self) -> Path:
        return Path(self.home) if self.home else default_home()


_converter = make_converter(forbid_extra_keys=True)
install_strict_hooks(_converter)
# Named tables ([models.NAME], [mcp.NAME]) structure as their class (strict hooks).
for _table in (dict[str, ModelConfig], dict[str, McpServerConfig]):
    _converter.register_structure_hook_func(
        partial(operator.eq, _table), make_mapping_structure_fn(_table, _converter)
    )


def default_home() -> Path:
    env = os.environ.get("AGENTRIO_HOME")
    return Path(env).expanduser() if env else Path.home() / ".config" / "agentrio"


def load_config(home: Path | None = None) -> Config:
    """Load ``<home>/config.toml`` (defaults when absent); raise `ConfigError`, one line
    ``file:line: key: problem`` (issue 30: every mistake, the same shape)."""
    home = home or default_home()
    path = home / "config.toml"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return Config(home=str(home))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror})") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(_syntax_error(path, exc)) from None
    data.pop("home", None)
    for table, key, refusal in _secret_keys(data):
        raise ConfigError(_where(path, text, f"{table}.{key}", refusal))
    try:
        config = _converter.structure(data, Config)
    except Exception as exc:  # cattrs raises several kinds; all mean "bad file"
        raise ConfigError(_describe(path, text, exc)) from None
    for key, problem, near in _problems(config):
        raise ConfigError(_where(path, text, key, problem, near=near))
    _check_models(config, path, text)
    return attrs.evolve(config, home=str(home))


#: Keys that would hold a secret, refused with where the secret goes instead: a
#: config.toml is often shared, copied or readable by others (docs/configuration.md).
_MODEL_KEY_REFUSED: Final = (
    "an API key never goes in config.toml: name the environment variable holding it "
    "(api_key_env) or a stored secret (api_key_secret)"
)


def _secret_keys(data: dict[str, Any]) -> list[tuple[str, str, str]]:
    """``(table, key, why refused)`` for each secret-holding key present in ``data``."""
    found = []
    for platform in ("telegram", "discord"):
        table = data.get(platform)
        if isinstance(table, dict) and "token" in table:
            found.append((platform, "token", token_key_refused(platform)))
    for name in ("model", "decision_model"):
        table = data.get(name)
        if isinstance(table, dict):
            found += [(name, key, _MODEL_KEY_REFUSED) for key in ("api_key", "key") if key in table]
    return found + refused_mcp_keys(data)


def model_problem(model: ModelConfig) -> tuple[str, str] | None:
    """``(key, problem)`` for a ``[model]`` table its types allow but its provider
    cannot use (``openai`` without ``name``, ``scripted`` without ``script``, …), or
    None. `load_config` reports it with the file and line; `agentrio.engine.models.factory`
    checks the same for a `ModelConfig` made in code."""
    if model.provider == "scripted" and not model.script.strip():
        return "script", 'required with provider = "scripted" (a TOML file of turns)'
    if model.provider in ("openai", "openai-responses", "anthropic"):
        if not model.name.strip():
            return "name", f'required with provider = "{model.provider}" (the model to call)'
        if not model.base_url.startswith(("http://", "https://")):
            return "base_url", f"expected an http(s) URL, got {model.base_url!r}"
        if model.timeout_s <= 0:
            return "timeout_s", "expected a number of seconds > 0"
    return None


def _problems(config: Config) -> list[tuple[str, str, str]]:
    """``(dotted key, problem, the key that makes it one)`` for what the types cannot
    express: the models, then ``[store]``. The third names the line of a required
    key that is missing (``provider`` for ``name``)."""
    found = []
    for table, model in (("model", config.model), ("decision_model", config.decision_model)):
        problem = model_problem(model) if model is not None else None
        if problem is not None:
            found.append((f"{table}.{problem[0]}", problem[1], f"{table}.provider"))
    found += [
        (f"store.{key}", problem, "store.backend") for key, problem in _store_problems(config.store)
    ]
    return found + mcp_problems(config.mcp)


def _store_problems(store: StoreConfig) -> list[tuple[str, str]]:
    """The ``[store]`` checks a type cannot express."""
    found = []
    if store.url and not store.url.startswith(REDIS_SCHEMES):
        found.append(("url", f"expected a URL starting with {', '.join(REDIS_SCHEMES)}"))
    elif store.url.startswith(SENTINEL_SCHEME):
        try:
            parse_sentinel_url(store.url)
        except ValueError as exc:
            found.append(("url", str(exc)))
    if store.backend == "redis" and not store.url:
        found.append(("url", 'required when store.backend is "redis"'))
    if not store.prefix:
        found.append(("prefix", "must not be empty"))
    return found


def _check_models(config: Config, path: Path, text: str) -> None:
    """Every ``fallback`` names a ``[models.NAME]`` table, and no model falls back to
    itself; one ``file:line: key:`` line."""
    tables = {"model": config.model, **{f"models.{n}": m for n, m in config.models.items()}}
    for where, model in tables.items():
        for name in model.fallback:
            problem = ""
            if name not in config.models:
                known = ", ".join(sorted(config.models)) or "none are defined"
                problem = f"{name!r} is not a [models.NAME] table ({known})"
            elif where == f"models.{name}":
                problem = f"{name!r} cannot fall back to itself"
            if problem:
                line = _line_of(text, f"{where}.fallback")
                at = f"{path}:{line}" if line else str(path)
                raise ConfigError(f"{at}: {where}.fallback: {problem}")


def save_config(config: Config, home: Path | None = None) -> Path:
    """Write ``config`` (without ``home``) to ``<home>/config.toml`` atomically."""
    from agentrio.engine.store.files import make_home, write_private_atomic

    home = home or config.home_path
    make_home(home)
    data: dict[str, Any] = _converter.unstructure(config)
    data.pop("home", None)
    data = {k: v for k, v in data.items() if v is not None}
    path = home / "config.toml"
    write_private_atomic(path, tomli_w.dumps(data).encode(), tmp=path.with_suffix(".toml.tmp"))
    return path


def _describe(path: Path, text: str, exc: Exception) -> str:
    """One line: ``file:line: dotted.key: problem`` (an unknown key says which it may
    have meant)."""
    if isinstance(exc, cattrs.BaseValidationError):
        messages = cattrs.transform_error(exc, path="$", format_exception=format_problem)
        first = messages[0] if messages else str(exc)
    else:
        first = str(exc)
    problem, _, where = first.rpartition(" @ ")
    if not where:
        problem, where = first, "$"
    extra = re.search(r"extra fields found \((.+)\)", problem)
    # a named table's key: cattrs says ``models['fast'].name``, the file ``models.fast``
    key = re.sub(r"\['([^']*)'\]", r".\1", where.removeprefix("$")).removeprefix(".")
    if extra:
        name = extra.group(1).split(",")[0].strip()
        problem = _unknown_key(key, name)
        key = f"{key}.{name}" if key else name
    refused = _validator_refusal(exc)
    if refused is not None:  # a field's validator: cattrs names only its table
        name, problem = refused
        key = f"{key}.{name}" if key else name
    return _where(path, text, key or "config", problem)


def _validator_refusal(exc: BaseException) -> tuple[str, str] | None:
    """``(field, problem)`` of an attrs validator's `ValueError` inside ``exc``
    (``'port' must be <= 65535: 70000``), or None."""
    while isinstance(exc, cattrs.BaseValidationError) and exc.exceptions:
        exc = exc.exceptions[0]
    said = (
        re.fullmatch(r"'?([A-Za-z_]\w*)'? (must .+)", str(exc)) if type(exc) is ValueError else None
    )
    return (said.group(1), said.group(2)) if said else None


def locate_error(path: Path, message: str) -> str:
    """A `ConfigError` raised past loading (``model.script: /x.toml: no such file``, when
    the model is built) as the loader says its own: ``file:line: key: problem``."""
    key, sep, problem = message.partition(": ")
    if not sep or not re.fullmatch(r"[a-z_]+(\.[a-z_]+)+", key):
        return f"{path}: {message}"
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        text = ""
    return _where(path, text, key, problem)


def _syntax_error(path: Path, exc: tomllib.TOMLDecodeError) -> str:
    """``file:line: syntax: problem (column N)`` from tomllib's message, which ends
    ``(at line L, column C)``."""
    message = str(exc)
    at = re.search(r"\s*\(at line (\d+), column (\d+)\)$", message)
    if at is None:
        return f"{path}:1: syntax: {message}"
    return f"{path}:{at.group(1)}: syntax: {message[: at.start()]} (column {at.group(2)})"


def _unknown_key(table: str, name: str) -> str:
    """``unknown key`` and the closest known key of ``table`` (dotted; "" is the top)."""
    import difflib  # only for a mistake (cold start, B7)

    known = [field.name for field in attrs.fields(_table_class(table)) if field.name != "home"]
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    if close:
        return f"unknown key (did you mean {close[0]}?)"
    return f"unknown key (expected one of {', '.join(known)})"


def _table_class(table: str) -> type:
    """The attrs class of the dotted ``table`` of `Config` (``""`` is `Config`)."""
    cls: type = Config
    for part in filter(None, table.split(".")):
        hint = typing.get_type_hints(cls)[part]
        cls = next(t for t in (hint, *typing.get_args(hint)) if attrs.has(t))
    return cls


def _where(path: Path, text: str, key: str, problem: str, *, near: str = "") -> str:
    """``file:line: key: problem``, the line of ``key`` -- or, for a key that is not in
    the file (a required one), of ``near`` or else of its table."""
    parts = key.split(".")
    line = _line_of(text, near) if near and _line_of(text, key) is None else None
    while parts and line is None:
        line = _line_of(text, ".".join(parts))
        parts.pop()
    return f"{path}:{line or 1}: {key}: {problem}"


def _line_of(text: str, dotted: str) -> int | None:
    """The 1-based line of ``dotted`` (``server.port``) in TOML text, if it is found:
    a ``[table]`` header, ``key =`` in its table, or a dotted ``a.b =`` key."""
    wanted = ".".join(p for p in re.split(r"\.|\[\d+\]", dotted) if p)
    if not wanted:
        return None
    current = ""
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        header = re.fullmatch(r"\[([^\[\]]+)\]", stripped)
        if header:
            current = re.sub(r"\s*\.\s*", ".", header.group(1).strip())
            if current == wanted:
                return number
            continue
        assigned = re.match(r"([A-Za-z0-9_.\s-]+?)\s*=", stripped)
        if assigned:
            name = re.sub(r"\s*\.\s*", ".", assigned.group(1))
            full = f"{current}.{name}" if current else name
            if full == wanted or full.startswith(wanted + "."):
                return number
    return None
