"""The read-only sandbox that commands nobody was asked about run in (R75).

The policy (`agentrio.engine.tools.policy`) decides which commands may run unasked; this module is
the defence in depth behind it, so that a mistake in that list or a hostile repository
still cannot change anything. An unasked command runs under bubblewrap:

- the whole file system read-only (``--ro-bind / /``), with a private, empty ``/tmp``,
  ``/var/tmp``, ``/dev/shm`` and ``/run`` (where Unix sockets such as docker's live); a
  working directory under ``/tmp`` is bound back in, read-only;
- no network (a new network namespace with nothing in it), a new PID namespace, IPC
  and UTS namespaces, every capability dropped, killed when its parent dies;
- the agentrio home and the credential places of `SandboxConfig.hide` hidden (an empty
  directory, an empty file);
- a clean environment: a fixed ``PATH`` of system directories, ``HOME``, the locale
  and ``TZ`` -- no token, key or variable of the daemon's;
- ``git`` with every program-running setting neutralised (`git_overrides`): system and
  global config off, fsmonitor, hooks, pager, editors, signing programs, credential
  helpers and each configured filter, textconv, external diff and merge driver replaced
  by an inert value, submodules not entered; ``diff``/``log``/``show`` get
  ``--no-ext-diff --no-textconv``.

The group stays the caller's: bwrap does not start a new session, so the process-group
runner (`agentrio.engine.processes.runner.run_in_group`) still signals every process inside, and
the PID namespace ends them all once its first process is gone.

`Sandbox.probe` runs bubblewrap once at daemon start. When it is missing or cannot start
the sandbox is *unavailable*: nothing runs unasked (every command asks), the daemon
logs it once and ``/v1/health`` shows it. Never silently unsandboxed.
"""

from __future__ import annotations

import logging
import os
import posixpath
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from typing import Final

import attrs
import trio

from agentrio.engine.config import Config

__all__ = [
    "GIT_DIFF_SUBCOMMANDS",
    "SANDBOX_PATH",
    "Sandbox",
    "SandboxError",
    "SandboxStatus",
    "git_overrides",
    "sandbox_environment",
]

log = logging.getLogger(__name__)

SANDBOX_PATH: Final = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
"""The only ``PATH`` inside the sandbox: a bare program name never finds a script in
the working directory or in a directory the model chose."""
GIT_DIFF_SUBCOMMANDS: Final = frozenset({"diff", "log", "show"})
_GIT_DIFF_HARDENING: Final = ("--no-ext-diff", "--no-textconv")
_KEPT_ENV: Final = ("HOME", "LANG", "LANGUAGE", "TZ", "USER", "LOGNAME")
_PROBE_TIMEOUT_S: Final = 10.0
_GIT_LIST_TIMEOUT_S: Final = 10.0
_GIT_LIST_MAX_BYTES: Final = 1024 * 1024

# Settings that run a program, set to an inert value for every sandboxed git run. They
# are given as command-scope configuration (GIT_CONFIG_COUNT), which beats every file.
_GIT_FIXED: Final[tuple[tuple[str, str], ...]] = (
    ("core.fsmonitor", "false"),
    ("core.hooksPath", "/dev/null"),
    ("core.pager", "cat"),
    ("core.editor", "false"),
    ("core.askPass", "false"),
    ("core.sshCommand", "false"),
    ("core.gitProxy", "false"),
    ("core.alternateRefsCommand", "false"),
    ("sequence.editor", "false"),
    ("diff.external", "false"),
    ("diff.ignoreSubmodules", "all"),
    ("status.submoduleSummary", "false"),
    ("submodule.recurse", "false"),
    ("log.showSignature", "false"),
    ("gpg.program", "false"),
    ("gpg.openpgp.program", "false"),
    ("gpg.x509.program", "false"),
    ("gpg.ssh.program", "false"),
    ("credential.helper", ""),
    ("protocol.allow", "never"),
)
# The last part of a configured key that names a program, and the inert value it gets:
# a filter with no command does nothing, textconv through cat shows the file as it is,
# anything else runs ``false``.
_GIT_PROGRAM_KEYS: Final[Mapping[str, str]] = {
    "clean": "",
    "smudge": "",
    "process": "",
    "required": "false",
    "textconv": "cat",
    "command": "false",
    "driver": "false",
    "helper": "",
    "program": "false",
    "cmd": "false",
    "sshcommand": "false",
    "askpass": "false",
    "editor": "false",
    "fsmonitor": "false",
    "hookspath": "/dev/null",
    "pager": "cat",
    "gitproxy": "false",
    "uploadpack": "false",
    "receivepack": "false",
    "packobjectshook": "false",
    "alternaterefscommand": "false",
}


class SandboxError(Exception):
    """A sandboxed command could not be made safe to run, so it did not run."""


@attrs.frozen
class SandboxStatus:
    """Whether unasked commands can run: ``active`` False means every command asks;
    ``detail`` says why (or which program serves)."""

    active: bool
    program: str
    detail: str


def git_overrides(names: Sequence[str]) -> dict[str, str]:
    """The environment that neutralises every program-running git setting: the fixed
    list, plus each configured key among ``names`` (``git config --list --name-only``)
    whose last part names a program -- ``filter.<driver>.clean``,
    ``diff.<driver>.textconv``, ``pager.<command>`` and so on."""
    pairs = list(_GIT_FIXED)
    for name in names:
        section, _, rest = name.partition(".")
        last = name.rpartition(".")[2].lower()
        if section.lower() == "pager" and rest:
            pairs.append((name, "cat"))
        elif section.lower() != "alias" and last in _GIT_PROGRAM_KEYS:
            pairs.append((name, _GIT_PROGRAM_KEYS[last]))
    env = {
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_OPTIONAL_LOCKS": "0",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_PAGER": "cat",
        "GIT_CONFIG_COUNT": str(len(pairs)),
    }
    for index, (key, value) in enumerate(pairs):
        env[f"GIT_CONFIG_KEY_{index}"] = key
        env[f"GIT_CONFIG_VALUE_{index}"] = value
    return env


def _expand(path: str) -> str:
    return posixpath.normpath(os.path.expanduser(path))


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def sandbox_environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The whole environment of a sandboxed command: nothing of the daemon's but
    ``HOME``, the locale, ``TZ`` and the user's name (plus ``extra``)."""
    env = {"PATH": SANDBOX_PATH, "TERM": "dumb"}
    for name in _KEPT_ENV:
        value = os.environ.get(name)
        if value is not None:
            env[name] = value
    env.update({k: v for k, v in os.environ.items() if k.startswith("LC_")})
    if extra:
        env.update(extra)
    return env


def _bwrap_argv(program: str, hidden: Sequence[str], argv: Sequence[str], *, cwd: str) -> list[str]:
    """bubblewrap's command line: see the module docstring for each part."""
    args = [
        program,
        "--ro-bind", "/", "/",
        "--dev", "/dev",
        "--proc", "/proc",
        "--tmpfs", "/tmp",
        "--tmpfs", "/var/tmp",
        # Unix sockets (docker's, a session bus, an ssh agent) live here: a socket needs
        # no network namespace to be reached.
        "--tmpfs", "/run",
    ]  # fmt: skip
    if _under(cwd, "/tmp") or _under(cwd, "/var/tmp"):
        # The private /tmp would hide the working directory: show it, read-only.
        args += ["--ro-bind-try", cwd, cwd]
    for place in hidden:
        if os.path.isdir(place):
            args += ["--tmpfs", place]
        elif os.path.lexists(place):
            args += ["--ro-bind", "/dev/null", place]
    args += [
        "--unshare-all",
        "--die-with-parent",
        "--cap-drop", "ALL",
        "--chdir", cwd,
        "--",
        *argv,
    ]  # fmt: skip
    return args


class Sandbox:
    """Builds the bubblewrap command line for one unasked command; see the module doc."""

    def __init__(self, config: Config, status: SandboxStatus) -> None:
        self.status = status
        places = [os.path.abspath(str(config.home_path)), *map(_expand, config.sandbox.hide)]
        # A place reached through a symlink is hidden under both names.
        both = [name for place in places for name in (place, os.path.realpath(place))]
        self.hidden: tuple[str, ...] = tuple(dict.fromkeys(map(posixpath.normpath, both)))
        """Absolute places no unasked command sees (the home first)."""

    @classmethod
    async def probe(cls, config: Config) -> Sandbox:
        """Find bubblewrap and start it once; an unavailable sandbox is logged (once).

        The check runs in a worker thread with a real-time limit, so a mock clock in a
        test cannot time it out; its result is kept per program for the process."""
        wanted = config.sandbox.program
        program = wanted if "/" in wanted else shutil.which(wanted, path=SANDBOX_PATH)
        if program is None or not os.access(program, os.X_OK):
            status = SandboxStatus(
                active=False, program="", detail=f"{wanted!r} not found: install bubblewrap"
            )
        else:
            known = _probed.get(program)
            status = known if known is not None else await trio.to_thread.run_sync(_probe, program)
            _probed[program] = status
        if not status.active:
            log.warning("sandbox unavailable (%s): every command will ask first", status.detail)
        return cls(config, status)

    def wrap(self, argv: Sequence[str], *, cwd: str) -> list[str]:
        """bubblewrap's argv running exactly ``argv`` in ``cwd`` (absolute)."""
        if not self.status.active:
            raise SandboxError(f"the sandbox is unavailable: {self.status.detail}")
        return _bwrap_argv(self.status.program, self.hidden, argv, cwd=cwd)

    async def git_environment(self, cwd: str) -> dict[str, str]:
        """`git_overrides` for the configuration git would read in ``cwd``, listed by
        git itself inside the sandbox (``git config`` runs no configured program).

        Fails closed: when the listing fails, times out or is too large to read whole,
        `SandboxError` says so and the git command does not run. (A configuration
        changed between the listing and the run -- by a command a person approved --
        is not seen; the read-only sandbox still keeps what it runs from writing.)"""
        from agentrio.engine.processes.runner import run_in_group

        result = await run_in_group(
            self.wrap(["git", "config", "--list", "--name-only", "-z"], cwd=cwd),
            env=sandbox_environment(git_overrides(())),
            timeout_s=_GIT_LIST_TIMEOUT_S,
            keep_bytes=_GIT_LIST_MAX_BYTES,
        )
        if result.timed_out or result.output_bytes > _GIT_LIST_MAX_BYTES:
            raise SandboxError("git's configuration could not be read whole, so git did not run")
        if result.exit_code != 0:
            error = result.output.strip()[:300]
            raise SandboxError(
                f"git's configuration could not be read ({error}), so git did not run"
            )
        return git_overrides([name for name in result.output.split("\0") if name])

    async def prepare(
        self, argv: Sequence[str], *, cwd: str | None
    ) -> tuple[list[str], dict[str, str]]:
        """The argv and environment that run the judged ``argv`` in the sandbox.

        ``cwd`` None is the daemon's working directory; a relative one is taken from
        there, as the unsandboxed runner would."""
        where = posixpath.normpath(posixpath.join(os.getcwd(), cwd or "."))
        command = list(argv)
        extra: dict[str, str] = {}
        if posixpath.basename(command[0]) == "git":
            extra = await self.git_environment(where)
            sub = _git_subcommand(command)
            if sub is not None and command[sub] in GIT_DIFF_SUBCOMMANDS:
                command[sub + 1 : sub + 1] = _GIT_DIFF_HARDENING
        return self.wrap(command, cwd=where), sandbox_environment(extra)


_probed: dict[str, SandboxStatus] = {}


def _probe(program: str) -> SandboxStatus:
    """Start ``true`` in the sandbox as `Sandbox.wrap` would (blocking: a worker thread)."""
    try:
        result = subprocess.run(
            _bwrap_argv(program, (), ["true"], cwd="/"),
            env=sandbox_environment(),
            capture_output=True,
            timeout=_PROBE_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return SandboxStatus(active=False, program="", detail=f"{program} cannot start: {exc}")
    if result.returncode != 0:
        error = result.stderr.decode(errors="replace").strip()[:300]
        detail = f"{program} cannot start (exit {result.returncode}): {error}"
        return SandboxStatus(active=False, program="", detail=detail)
    return SandboxStatus(active=True, program=program, detail=f"bubblewrap at {program}")


def _git_subcommand(argv: Sequence[str]) -> int | None:
    for index in range(1, len(argv)):
        if not argv[index].startswith("-"):
            return index
    return None
