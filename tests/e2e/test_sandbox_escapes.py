"""Issue 29, findings 1, 2 and 9, through the real daemon: the attacks a model can make
on the hidden places and on the daemon's environment, and that none of them shows a
secret.

The daemon runs a scripted model (its tool calls carry a ``cwd``), with no front-end
listening for ``chat-`` asks: a command that needs a confirmation is denied ("no
front-end is listening"), so every call either was judged read-only and ran in the
sandbox, or asked. Each test plants secrets (the daemon's token, another home's
token, the default home's, credential stores under the daemon's ``$HOME``, API keys
and bot tokens in its environment) and asserts that none appears in any event of the
run, while a planted control line does (the read really happened).
"""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest
import tomli_w

from agentrio import Decision
from agentrio.handles import RunHandle
from agentrio.protocol.events import ToolResult, ToolSkipped
from agentrio.testing import RunningDaemon

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap missing")

ASKED = "no front-end is listening"
CONTROL = "visible-control-line"


def _secret(name: str) -> str:
    return f"SECRET-{name}-{secrets.token_hex(8)}"


@attrs.frozen
class Call:
    """One ``run_command`` call of the script."""

    command: str | list[str]
    cwd: Path | None = None


@attrs.define
class Planted:
    """The places of one test: ``root`` (tmp_path) holds the daemon's home, the fake
    ``$HOME`` (``user``), another home, a repository and the symlinks."""

    root: Path
    secrets: list[str] = attrs.field(factory=list)

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def user(self) -> Path:
        return self.root / "user"

    def plant(self, path: Path, name: str) -> str:
        value = _secret(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(value + "\n")
        self.secrets.append(value)
        return value

    def plant_home(self, path: Path, name: str) -> str:
        """An agentrio home: a ``token`` next to a ``daemon.lock``."""
        value = self.plant(path / "token", name)
        (path / "daemon.lock").write_text("12345\n")
        return value


def _write_config(planted: Planted, runs: Sequence[Sequence[Call]], model: str = "") -> None:
    """The daemon's config.toml and its script: one turn of calls per run, then "done"."""
    turns: list[dict[str, Any]] = []
    for run in runs:
        calls = []
        for index, call in enumerate(run):
            args: dict[str, Any] = {"command": call.command}
            if call.cwd is not None:
                args["cwd"] = str(call.cwd)
            calls.append({"id": f"c{len(turns)}-{index}", "name": "run_command", "args": args})
        turns += [{"text": "", "tool_calls": calls}, {"text": "done"}]
    script = planted.root / "script.toml"
    script.write_text(tomli_w.dumps({"turns": turns}))
    planted.home.mkdir(mode=0o700, exist_ok=True)
    (planted.home / "config.toml").write_text(
        f'[model]\nprovider = "scripted"\nscript = "{script}"\n{model}'
        '[tools]\nreadonly_commands = ["cat", "ls", "grep", "printenv"]\n'
    )


async def _run(
    daemon: RunningDaemon, session: str = "chat-escape", *, approve: bool = False
) -> RunHandle:
    async with daemon.connect() as client:
        rule = (lambda ask: Decision.allow()) if approve else None
        window = "w-escape" if approve else ""
        run = await client.run(session, "go", window_hash=window, on_ask=rule)
        done = await run.wait_done()
    assert done.status == "finished", done
    return run


def _outcomes(run: RunHandle) -> list[ToolResult | ToolSkipped]:
    return [e for e in run.events_so_far if isinstance(e, (ToolResult, ToolSkipped))]


def _assert_no_secret(run: RunHandle, secrets_: Sequence[str]) -> None:
    """No planted secret in any event of the run, whatever its kind."""
    shown = repr(run.events_so_far) + run.final_text
    leaked = [value for value in secrets_ if value in shown]
    assert leaked == []


def _assert_asked(outcome: ToolResult | ToolSkipped) -> None:
    assert isinstance(outcome, ToolSkipped), outcome
    assert ASKED in outcome.reason


def _assert_ran(outcome: ToolResult | ToolSkipped) -> ToolResult:
    assert isinstance(outcome, ToolResult), outcome
    return outcome


def _asked_then_ran(run: RunHandle, calls: Sequence[Call], *, ran: int) -> list[ToolResult]:
    """Every call but the last ``ran`` asked; those ran (their results returned)."""
    outcomes = _outcomes(run)
    assert len(outcomes) == len(calls)
    for outcome in outcomes[:-ran]:
        _assert_asked(outcome)
    return [_assert_ran(outcome) for outcome in outcomes[-ran:]]


# ------------------------------------------------------------------ finding 1: symlinks


def _layout(planted: Planted) -> dict[str, Path]:
    root = planted.root
    links = root / "links"
    deep = links / "deep" / "a" / "b" / "c"
    deep.mkdir(parents=True)
    (links / "to-home").symlink_to(planted.home)
    (links / "to-root").symlink_to("/")
    (links / "to-parent").symlink_to(root)
    (links / "hop").symlink_to(deep)
    repo = root / "repo"
    repo.mkdir()
    (repo / "readme.txt").write_text(CONTROL + "\n")
    return {"links": links, "repo": repo}


@pytest.fixture
def symlinks(tmp_path: Path) -> tuple[Planted, list[Call]]:
    planted = Planted(tmp_path)
    places = _layout(planted)
    links, repo = places["links"], places["repo"]
    home = planted.home
    relative_home = str(home).lstrip("/")
    calls = [
        Call("cat token", cwd=links / "to-home"),
        Call("ls", cwd=links / "to-home"),
        Call(f"cat {relative_home}/token", cwd=links / "to-root"),
        Call(f"ls {relative_home}", cwd=links / "to-root"),
        Call("cat home/token", cwd=links / "to-parent"),
        # From hop's real place (links/deep/a/b/c) five levels up is the root: the
        # text says links/hop/../../../../.. , somewhere above the root.
        Call("cat ../../../../../home/token", cwd=links / "hop"),
        Call(f"cat /proc/self/root{home}/token", cwd=repo),
        Call(f"cat /dev/fd/../root{home}/token", cwd=repo),
        Call(["cat", f"{links}/to-home/token"], cwd=repo),
        # Reads of an ancestor run (in the sandbox), and show none of the home.
        Call(["grep", "-r", ".", "."], cwd=links / "to-parent"),
        Call(["grep", "-r", ".", str(tmp_path)], cwd=repo),
    ]
    _write_config(planted, [calls])
    return planted, calls


@pytest.fixture
def agentrio_daemon_home(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """The fixture each test names (``indirect`` parameter) plants its files and
    writes the config before the daemon starts."""
    request.getfixturevalue(request.param)
    return tmp_path / "home"


def layout(name: str) -> pytest.MarkDecorator:
    return pytest.mark.parametrize("agentrio_daemon_home", [name], indirect=True)


@pytest.fixture
def agentrio_daemon_env(tmp_path: Path) -> dict[str, str]:
    return {"HOME": str(tmp_path / "user"), **ENVIRONMENT}


@layout("symlinks")
async def test_a_symlinked_working_directory_or_path_never_shows_the_home(
    agentrio_daemon: RunningDaemon, symlinks: tuple[Planted, list[Call]]
) -> None:
    """Issue 29 finding 1: a cwd that is a symlink to the home, to ``/`` or to the
    home's parent, a relative path whose ``..`` only the real path resolves,
    ``/proc/self/root``, ``/dev/fd/..`` and a path through a symlink all ask (denied:
    nobody listens); recursive reads of an ancestor run in the sandbox and show the
    control line but not the token."""
    planted, calls = symlinks
    run = await _run(agentrio_daemon)
    for result in _asked_then_ran(run, calls, ran=2):
        assert f"readme.txt:{CONTROL}" in result.output
    _assert_no_secret(run, [agentrio_daemon.token, *planted.secrets])


# --------------------------------------------------------- finding 2: every home, stores

STORES = [
    ".vault-token",
    ".npmrc",
    ".zsh_history",
    ".bash_history",
    ".local/share/fish/fish_history",
    ".config/rclone/rclone.conf",
    ".cargo/credentials.toml",
    ".terraform.d/credentials.tfrc.json",
    ".docker/config.json",
    ".kube/config",
    ".aws/credentials",
    ".config/gcloud/credentials.db",
    ".mozilla/firefox/abc.default/logins.json",
    ".config/google-chrome/Default/Cookies",
]


@pytest.fixture
def homes(tmp_path: Path) -> tuple[Planted, list[Call]]:
    planted = Planted(tmp_path)
    user = planted.user
    other = tmp_path / "other-home"
    planted.plant_home(other, "other-home")
    planted.plant_home(user / ".config" / "agentrio", "default-home")
    for store in STORES:
        planted.plant(user / store, store)
    (user / "notes.txt").write_text(CONTROL + "\n")
    work = tmp_path / "work"
    planted.plant_home(work / "a" / "b" / "copied-home", "copied-home")
    (work / "readme.txt").write_text(CONTROL + "\n")
    calls = [
        Call(f"cat {other}/token"),
        Call("cat other-home/token", cwd=tmp_path),
        Call(f"cat {user}/.config/agentrio/token"),
        *(Call(f"cat {user}/{store}") for store in STORES),
        Call(["grep", "-r", ".", "."], cwd=user),
        Call(["grep", "-r", ".", "."], cwd=tmp_path),
        Call(["grep", "-r", ".", "."], cwd=work),
    ]
    _write_config(planted, [calls])
    return planted, calls


@layout("homes")
async def test_every_agentrio_home_and_credential_store_is_hidden(
    agentrio_daemon: RunningDaemon, homes: tuple[Planted, list[Call]]
) -> None:
    """Issue 29 finding 2: another home beside the daemon's, the default home
    (``~/.config/agentrio``, the daemon runs with another), a copied home deep in the
    working directory, and the 2026 credential stores (shell histories, vault, rclone,
    cargo, terraform, docker, kube, cloud, browser profiles): named, each asks; read
    recursively, each is hidden while the control line shows."""
    planted, calls = homes
    run = await _run(agentrio_daemon)
    for result in _asked_then_ran(run, calls, ran=3):
        assert CONTROL in result.output
    _assert_no_secret(run, [agentrio_daemon.token, *planted.secrets])


# ------------------------------------------------------------------ finding 1: hard links


@pytest.fixture
def hard_link(tmp_path: Path) -> tuple[Planted, list[list[Call]]]:
    planted = Planted(tmp_path)
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "readme.txt").write_text(CONTROL + "\n")
    runs = [
        [Call("cat innocent.txt", cwd=repo), Call("ls", cwd=repo)],
        [Call("cat readme.txt", cwd=repo)],
    ]
    _write_config(planted, runs)
    return planted, runs


@layout("hard_link")
async def test_a_hard_link_to_the_token_closes_the_unasked_path(
    agentrio_daemon: RunningDaemon, hard_link: tuple[Planted, list[list[Call]]]
) -> None:
    """Issue 29 finding 1 (hard links): with a second name of the daemon's token in a
    readable folder, every command asks -- the link itself and an innocent ``ls`` --
    and the token is in no output; once the link is gone, commands run unasked
    again."""
    planted, _ = hard_link
    link = planted.root / "repo" / "innocent.txt"
    os.link(agentrio_daemon.home / "token", link)
    first = await _run(agentrio_daemon)
    for outcome in _outcomes(first):
        _assert_asked(outcome)
    link.unlink()
    second = await _run(agentrio_daemon)
    (outcome,) = _outcomes(second)
    assert CONTROL in _assert_ran(outcome).output
    _assert_no_secret(first, [agentrio_daemon.token])
    _assert_no_secret(second, [agentrio_daemon.token])


# --------------------------------------------------------------- finding 9: environment

ENVIRONMENT = {
    "ACME_LLM_CREDENTIAL": _secret("model-key"),
    "OPENAI_API_KEY": _secret("openai-key"),
    "AGENTRIO_TELEGRAM_TOKEN": _secret("telegram-token"),
    "AGENTRIO_DISCORD_TOKEN": _secret("discord-token"),
    "AGENTRIO_DEPLOY_SECRET": _secret("agentrio-secret"),
    "GITHUB_TOKEN": _secret("github-token"),
    "VISIBLE_SETTING": "visible-value",
}
# The model's key again, under a name no pattern matches.
ENVIRONMENT["INNOCENT_NAME"] = ENVIRONMENT["ACME_LLM_CREDENTIAL"]
PLANTED_ENV = [value for name, value in ENVIRONMENT.items() if name != "VISIBLE_SETTING"]


@pytest.fixture
def environment(tmp_path: Path) -> tuple[Planted, list[Call]]:
    planted = Planted(tmp_path)
    planted.user.mkdir()
    calls = [Call("env"), Call("printenv")]
    _write_config(planted, [calls], model='api_key_env = "ACME_LLM_CREDENTIAL"\n')
    return planted, calls


@layout("environment")
async def test_commands_never_get_the_daemons_credentials(
    agentrio_daemon: RunningDaemon, environment: tuple[Planted, list[Call]]
) -> None:
    """Issue 29 finding 9: an approved ``env`` (a person said yes) shows the daemon's
    ordinary variables but not its model key (``[model] api_key_env``), another API
    key, the bot tokens, an ``AGENTRIO_*`` secret, a ``*_TOKEN``, nor the model key
    copied under an innocent name; an unasked ``printenv`` (sandboxed) shows none of
    the daemon's variables at all."""
    run = await _run(agentrio_daemon, "cli-escape", approve=True)
    approved, unasked = (_assert_ran(outcome) for outcome in _outcomes(run))
    assert "VISIBLE_SETTING=visible-value" in approved.output
    assert f"AGENTRIO_HOME={agentrio_daemon.home}" in approved.output
    assert "PATH=" in approved.output
    assert "VISIBLE_SETTING" not in unasked.output
    assert "PATH=/usr/local/sbin:" in unasked.output
    _assert_no_secret(run, [agentrio_daemon.token, *PLANTED_ENV])
