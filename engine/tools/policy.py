"""Which commands run without asking (R60), and which confirmations need the password (R7).

Both checks fail closed: when in doubt a command needs confirmation, and when in doubt a
command touches a restricted path. They read only the command text (and ``cwd``); they
never look at the file system, so a symlink into ``/etc`` or a ``$VARIABLE`` that expands
to one is not seen -- which is why a command that is not read-only is always confirmed by
a person, and the restricted-path check only decides whether that person must also give
the system password.

- **Read-only** (`is_read_only`): a single program, no shell operator anywhere in the
  text (`SHELL_OPERATORS`, checked on the raw string, and on every argv token too: a list
  never passes through a shell, but a conservative check costs at most one question),
  named on ``readonly_commands`` -- or ``git`` with a ``readonly_git`` subcommand. The
  program must be a bare name (found on ``PATH``) or live in a system ``bin`` directory:
  ``./ls`` is whatever script sits in the working directory. Options that make a listed
  program write (``date -s``, ``git log --output=FILE``) or run configured code (``git
  -c core.pager=...``, any git option before the subcommand) disqualify it.
- **Restricted** (`touches_restricted`): some path in the command is a restricted path,
  lies under one, or is an ancestor of one (``rm -rf /`` touches ``/etc``); relative paths
  count once resolved against ``cwd``; globs match component by component (``/e*/hosts``
  touches ``/etc``); ``~`` expands to a home directory. A privilege-raising program
  (`ELEVATORS`: ``sudo`` and friends) anywhere in the command counts too. The program
  being run (the first word) is not a path it touches: running ``/usr/bin/python3``
  reads ``/usr`` but changes nothing there.
"""

from __future__ import annotations

import fnmatch
import os
import posixpath
import re
import shlex
from typing import Final

import attrs

from engine.config import ToolsConfig

__all__ = [
    "ELEVATORS",
    "SHELL_OPERATORS",
    "Verdict",
    "classify",
    "is_read_only",
    "touches_restricted",
]

SHELL_OPERATORS: Final[tuple[str, ...]] = (";", "&", "|", "<", ">", "$(", "`", "\n", "\r")
"""Text that makes a shell do more than run one program (R60). ``\\r`` is here because
some terminals and shells treat it as a line break."""

ELEVATORS: Final[frozenset[str]] = frozenset({"sudo", "su", "doas", "pkexec"})
"""Programs that run something with another user's rights (R7)."""

_SYSTEM_BIN_DIRS: Final = frozenset({"/bin", "/usr/bin", "/usr/local/bin", "/sbin", "/usr/sbin"})
_GIT_SAFE_GLOBAL_OPTIONS: Final = frozenset(
    {"--no-pager", "-P", "--no-optional-locks", "--literal-pathspecs", "--no-replace-objects"}
)
_GIT_UNSAFE_OPTIONS: Final = ("--output", "--ext-diff")
"""git options that write a file or run a configured program; git also accepts any
unambiguous abbreviation (``--outp=FILE``), so prefixes of these count too."""
_GLOB_CHARS: Final = frozenset("*?[")
# Splits a command into words at whitespace, quotes and operator characters, so that
# ``cat</etc/passwd`` and ``true;sudo x`` still show their parts.
_WORD_SPLIT: Final = re.compile(r"[\s;&|<>()`'\"]+")


@attrs.frozen
class Verdict:
    """What running a command needs.

    ``needs_confirm``: the command is not read-only, so a person must approve it (R60).
    ``restricted``: that confirmation must also check the system password, because the
    command touches a restricted path or raises privileges (R7). It implies
    ``needs_confirm``: a read-only command is never asked about, wherever it reads.
    ``reason``: one line for the person asked (or for the log when nobody is asked).
    """

    needs_confirm: bool
    restricted: bool
    reason: str


def _operator_in(text: str) -> str | None:
    for op in SHELL_OPERATORS:
        if op in text:
            return op
    return None


def _argv(command: str | list[str]) -> list[str] | None:
    """The command's argv, or None when it cannot be one plain program call."""
    if isinstance(command, str):
        if _operator_in(command) is not None:
            return None
        try:
            return shlex.split(command)
        except ValueError:
            return None
    if any(_operator_in(token) is not None for token in command):
        return None
    return list(command)


def _program_name(program: str) -> str | None:
    """The name a listed program goes by, or None if ``program`` is not a trusted copy."""
    if "/" not in program:
        return program
    directory, name = posixpath.split(posixpath.normpath(program))
    return name if directory in _SYSTEM_BIN_DIRS else None


def _git_read_only(args: list[str], config: ToolsConfig) -> bool:
    index = 0
    while index < len(args) and args[index].startswith("-"):
        if args[index] not in _GIT_SAFE_GLOBAL_OPTIONS:
            return False
        index += 1
    if index >= len(args) or args[index] not in config.readonly_git:
        return False
    return not any(_git_unsafe_option(arg) for arg in args[index + 1 :])


def _git_unsafe_option(arg: str) -> bool:
    name = arg.partition("=")[0]
    if not name.startswith("--") or name == "--":
        return False
    return any(name.startswith(bad) or bad.startswith(name) for bad in _GIT_UNSAFE_OPTIONS)


def _date_sets_clock(args: list[str]) -> bool:
    for arg in args:
        if arg.startswith("--s"):
            return True
        if arg.startswith("-") and not arg.startswith("--") and "s" in arg:
            return True
    return False


def is_read_only(command: str | list[str], config: ToolsConfig) -> bool:
    """True when ``command`` may run without confirmation (R60); see the module docstring."""
    argv = _argv(command)
    if not argv:
        return False
    name = _program_name(argv[0])
    if name is None:
        return False
    if name == "git":
        return _git_read_only(argv[1:], config)
    if name not in config.readonly_commands:
        return False
    return not (name == "date" and _date_sets_clock(argv[1:]))


def _words(command: str | list[str]) -> list[list[str]]:
    """Word lists to look for paths in: the text split at operators, and shlex tokens.

    The first word of each list is the program and is dropped: running a program is not
    touching its directory (but a later copy of the same path, ``cp x /bin/cp``, is).
    A first word holding ``=`` is an assignment (``PATH=/sbin make``) and is kept.
    """
    parts = [command] if isinstance(command, str) else command
    split = [word for part in parts for word in _WORD_SPLIT.split(part) if word]
    lists = [split]
    if isinstance(command, str):
        try:
            lists.append(shlex.split(command))
        except ValueError:
            pass
    else:
        lists.append(list(command))
    return [words[1:] if words and "=" not in words[0] else words for words in lists]


def _candidates(word: str) -> list[str]:
    """``word`` itself, and what follows ``=`` in it, split at ``:`` (``PATH=/a:/b``)."""
    found = [word]
    _, eq, value = word.partition("=")
    if eq:
        found.append(value)
        found.extend(value.split(":"))
    else:
        found.extend(word.split(":"))
    return found


def _absolute(path: str, cwd: str | None) -> str | None:
    if path.startswith("~"):
        path = os.path.expanduser(path)
    if not path.startswith("/"):
        if cwd is None:
            return None
        path = posixpath.join(cwd, path)
    # normpath keeps exactly two leading slashes ("//etc"); the kernel does not.
    return posixpath.normpath("/" + path.lstrip("/"))


def _components(path: str) -> list[str]:
    return [part for part in path.split("/") if part]


def _overlaps(path: str, root: str) -> bool:
    """``path`` is ``root``, lies under it, or is an ancestor of it; globs match per part."""
    mine, theirs = _components(path), _components(root)
    return all(
        fnmatch.fnmatchcase(their, own) if _GLOB_CHARS & set(own) else their == own
        for own, their in zip(mine, theirs, strict=False)
    )


def _roots(config: ToolsConfig) -> list[str]:
    roots = (_absolute(root, None) for root in config.restricted_paths)
    return [root for root in roots if root is not None]


def _restricted_hit(command: str | list[str], config: ToolsConfig, cwd: str | None) -> str:
    """The first reason ``command`` touches a restricted path, or ``""``."""
    parts = [command] if isinstance(command, str) else command
    for part in parts:
        for word in _WORD_SPLIT.split(part):
            if posixpath.basename(word) in ELEVATORS:
                return f"runs {posixpath.basename(word)}"
    roots = _roots(config)
    where = _absolute(cwd, None) if cwd is not None else None
    if where is not None:
        # Working inside a restricted directory: whatever the program writes without
        # naming a path (make, tar x, a build) lands there.
        for root in roots:
            if _components(where)[: len(_components(root))] == _components(root):
                return f"runs in {where}"
    for words in _words(command):
        for word in words:
            for candidate in _candidates(word):
                path = _absolute(candidate, where)
                if path is None:
                    continue
                for root in roots:
                    if _overlaps(path, root):
                        return f"touches {path}"
    return ""


def touches_restricted(
    command: str | list[str], config: ToolsConfig, *, cwd: str | None = None
) -> bool:
    """True when ``command`` touches a restricted path or raises privileges (R7)."""
    return bool(_restricted_hit(command, config, cwd))


def classify(command: str | list[str], config: ToolsConfig, *, cwd: str | None = None) -> Verdict:
    """Decide whether ``command`` needs a confirmation (R60) and the password (R7)."""
    shown = command if isinstance(command, str) else shlex.join(command)
    if is_read_only(command, config):
        return Verdict(needs_confirm=False, restricted=False, reason=f"read-only: {shown}")
    hit = _restricted_hit(command, config, cwd)
    if hit:
        return Verdict(needs_confirm=True, restricted=True, reason=f"restricted: {hit}")
    text = command if isinstance(command, str) else " ".join(command)
    operator = _operator_in(text)
    if operator is not None:
        why = f"uses the shell operator {operator!r}"
    else:
        argv = _argv(command)
        why = "cannot be parsed" if argv is None else "is not on the read-only list"
        if argv == []:
            why = "is empty"
    return Verdict(needs_confirm=True, restricted=False, reason=f"needs confirmation: {why}")
