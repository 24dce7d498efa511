"""The read-only sandbox that commands nobody was asked about run in (R75).

The policy (`agentrio.engine.tools.policy`) decides which commands may run unasked; this module is
the defence in depth behind it, so that a mistake in that list or a hostile repository
still cannot change anything. An unasked command runs under bubblewrap:

- the whole file system read-only (``--ro-bind / /``), with a private, empty ``/tmp``,
  ``/var/tmp``, ``/dev/shm`` and ``/run`` (where Unix sockets such as docker's live);
- the working directory resolved to its real path first (every symlink on the way,
  through an open directory descriptor, so nothing can swap it between the check and
  the mount); one under ``/tmp`` or ``/var/tmp`` is bound back in, read-only, at that
  real path, from the descriptor (``--ro-bind-fd``). Everything a command can reach is
  thus at its real path, where the hidden places are covered;
- no network (a new network namespace with nothing in it), a new PID namespace, IPC
  and UTS namespaces, every capability dropped, killed when its parent dies;
- the hidden places (`agentrio.engine.processes.hidden`: every agentrio home, ``[sandbox]
  hide``) covered after the binds, under their names and real paths (an empty
  directory, an empty file); a working directory inside one is refused;
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
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Final

import attrs
import trio

from agentrio.engine.config import Config
from agentrio.engine.processes.hidden import (
    CWD_SCAN_BUDGET,
    CWD_SCAN_DEPTH,
    Hidden,
    HiddenPlaces,
    ScanTooLarge,
    discover_homes,
    place_of,
)
from agentrio.engine.processes.runner import CommandResult, run_in_group

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
_PRIVATE: Final = ("/tmp", "/var/tmp", "/run")
"""Empty in the sandbox (a tmpfs each)."""
_BOUND_ROOTS: Final = ("/tmp", "/var/tmp")
"""Of those, where a working directory is bound back in."""
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


def _outermost(places: Sequence[str]) -> list[str]:
    """``places`` without those under another one (its cover hides them already)."""
    kept: list[str] = []
    for place in sorted(dict.fromkeys(places), key=len):
        if not place_of(place, kept):
            kept.append(place)
    return kept


def _bwrap_argv(
    program: str,
    hidden: Sequence[str],
    argv: Sequence[str],
    *,
    cwd: str,
    cwd_fd: int | None = None,
) -> list[str]:
    """bubblewrap's command line: see the module docstring for each part. ``cwd_fd``
    (an open descriptor of ``cwd``, a real path) is bound in at ``cwd`` before the
    hidden places are covered, so the ones under it are covered too."""
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
    if cwd_fd is not None:
        args += ["--ro-bind-fd", str(cwd_fd), cwd]
    for place in _outermost(hidden):
        if any(_under(place, private) for private in _PRIVATE) and not (
            cwd_fd is not None and _under(place, cwd)
        ):
            continue  # on an empty tmpfs already (a mount would only cost time)
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


def _homes_under(real: str) -> list[str]:
    return discover_homes([(real, CWD_SCAN_DEPTH)], CWD_SCAN_BUDGET, complete=True)


def _open_directory(path: str) -> tuple[int, str]:
    """An ``O_PATH`` descriptor of the directory ``path`` (symlinks followed) and the
    real path of what it opened, read back from the descriptor itself, so the path
    judged is the directory bound even if a name on the way changes meanwhile.
    A relative ``path`` is taken from the daemon's working directory."""
    try:
        path = posixpath.join(os.getcwd(), path)
        fd = os.open(path, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise SandboxError(
            f"the working directory {path} cannot be used ({exc.strerror})"
        ) from None
    try:
        real = os.readlink(f"/proc/self/fd/{fd}")
    except OSError as exc:
        os.close(fd)
        raise SandboxError(
            f"the working directory {path} cannot be resolved ({exc.strerror})"
        ) from None
    if not real.startswith("/") or real.endswith(" (deleted)"):
        os.close(fd)
        raise SandboxError(f"the working directory {path} is gone")
    return fd, real


class Sandbox:
    """Runs one unasked command under bubblewrap; see the module doc."""

    def __init__(self, config: Config, status: SandboxStatus) -> None:
        self.status = status
        self.places = HiddenPlaces(config)
        """The hidden places (`agentrio.engine.processes.hidden`), fresh for every command."""

    @classmethod
    async def probe(cls, config: Config) -> Sandbox:
        """Find bubblewrap and start it once; an unavailable sandbox is logged (once).
        Then the first scan for agentrio homes (`HiddenPlaces.scan`).

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
        sandbox = cls(config, status)
        if status.active:
            await sandbox.places.current()
        return sandbox

    async def run(
        self,
        argv: Sequence[str],
        *,
        cwd: str | None,
        timeout_s: float | None,
        kill_grace_s: float = 2.0,
        keep_bytes: int = 32 * 1024,
        on_output: Callable[[bytes], Awaitable[None]] | None = None,
    ) -> CommandResult:
        """Run the judged ``argv`` in the sandbox, in its own process group (R48).

        ``cwd`` None is the daemon's working directory; a relative one is taken from
        there, as the unsandboxed runner would. Raises `SandboxError` (nothing ran)
        when the sandbox is unavailable, the working directory cannot be opened or
        lies in a hidden place, a hidden file has another name (`Hidden.linked`), or
        git's configuration cannot be read whole."""
        async with self._placed(cwd) as place:
            command = list(argv)
            extra: dict[str, str] = {}
            if posixpath.basename(command[0]) == "git":
                extra = await self._git_overrides(place)
                sub = _git_subcommand(command)
                if sub is not None and command[sub] in GIT_DIFF_SUBCOMMANDS:
                    command[sub + 1 : sub + 1] = _GIT_DIFF_HARDENING
            return await run_in_group(
                place.wrap(self.status.program, command),
                env=sandbox_environment(extra),
                pass_fds=place.fds,
                timeout_s=timeout_s,
                kill_grace_s=kill_grace_s,
                keep_bytes=keep_bytes,
                on_output=on_output,
            )

    async def git_environment(self, cwd: str | None) -> dict[str, str]:
        """`git_overrides` for the configuration git would read in ``cwd``, listed by
        git itself inside the sandbox (``git config`` runs no configured program).

        Fails closed: when the listing fails, times out or is too large to read whole,
        `SandboxError` says so and the git command does not run. (A configuration
        changed between the listing and the run -- by a command a person approved --
        is not seen; the read-only sandbox still keeps what it runs from writing.)"""
        async with self._placed(cwd) as place:
            return await self._git_overrides(place)

    @asynccontextmanager
    async def _placed(self, cwd: str | None) -> AsyncIterator[_Place]:
        """The working directory opened and judged, with the hidden places of this
        command; the descriptor is closed on exit."""
        if not self.status.active:
            raise SandboxError(f"the sandbox is unavailable: {self.status.detail}")
        await self.places.refresh()
        place = await trio.to_thread.run_sync(self._place, cwd or ".")
        try:
            yield place
        finally:
            os.close(place.fd)

    def _place(self, cwd: str) -> _Place:
        """`_placed`'s file-system work, in one worker thread (blocking)."""
        hidden = self.places.snapshot()
        if hidden.linked:
            raise SandboxError(hidden.linked)
        fd, real = _open_directory(cwd)
        try:
            bound = any(_under(real, root) for root in _BOUND_ROOTS)
            if bound:
                # The private /tmp would hide it: bind it back, with the agentrio homes
                # inside it hidden too.
                try:
                    homes = _homes_under(real)
                except ScanTooLarge:
                    raise SandboxError(
                        f"the working directory {real} is too large to check for agentrio "
                        f"homes (over {CWD_SCAN_BUDGET} entries); a person can run it"
                    ) from None
                hidden = attrs.evolve(hidden, places=(*hidden.places, *homes))
            hit = place_of(real, hidden.places)
            if hit:
                raise SandboxError(f"the working directory {real} is in a hidden place ({hit})")
        except BaseException:
            os.close(fd)
            raise
        return _Place(real=real, fd=fd, bound=bound, hidden=hidden)

    async def _git_overrides(self, place: _Place) -> dict[str, str]:
        result = await run_in_group(
            place.wrap(self.status.program, ["git", "config", "--list", "--name-only", "-z"]),
            env=sandbox_environment(git_overrides(())),
            pass_fds=place.fds,
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


@attrs.frozen
class _Place:
    """Where one sandboxed command runs: the working directory's real path and open
    descriptor (``bound``: bound into the sandbox, being under ``/tmp``), and the
    hidden places."""

    real: str
    fd: int
    bound: bool
    hidden: Hidden

    @property
    def fds(self) -> tuple[int, ...]:
        return (self.fd,) if self.bound else ()

    def wrap(self, program: str, argv: Sequence[str]) -> list[str]:
        cwd_fd = self.fd if self.bound else None
        return _bwrap_argv(program, self.hidden.places, argv, cwd=self.real, cwd_fd=cwd_fd)


_probed: dict[str, SandboxStatus] = {}


def _probe(program: str) -> SandboxStatus:
    """Start ``true`` in the sandbox as `Sandbox.run` would, with a working directory
    bound from a descriptor (``--ro-bind-fd``, which an old bubblewrap lacks), in a
    worker thread (blocking)."""
    try:
        fd, real = _open_directory("/tmp")
    except SandboxError as exc:
        return SandboxStatus(active=False, program="", detail=f"{program} cannot start: {exc}")
    try:
        result = subprocess.run(
            _bwrap_argv(program, (), ["true"], cwd=real, cwd_fd=fd),
            env=sandbox_environment(),
            capture_output=True,
            timeout=_PROBE_TIMEOUT_S,
            check=False,
            pass_fds=(fd,),
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return SandboxStatus(active=False, program="", detail=f"{program} cannot start: {exc}")
    finally:
        os.close(fd)
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
