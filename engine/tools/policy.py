"""Which commands run without asking (R60), and which confirmations need the password (R7).

Both checks fail closed: when in doubt a command needs confirmation, and when in doubt a
command touches a restricted path. They read the command text and ``cwd`` -- which the
caller gives as the real working directory the command will run in
(`agentrio.engine.tools.workdir`), so a relative path is judged where it really points
(issue 29 finding 6). The hidden-place check resolves real paths (`_hidden_hit`), and
the restricted-path check resolves the symlinks of the paths it finds (up to
`MAX_RESOLVED` of them): both read the file system, so callers run them off the Trio
thread. A ``$VARIABLE`` that expands to a path is still not seen -- which is why a
command that is not read-only is always confirmed by a person, and the restricted-path
check only decides whether that person must also give the system password.

- **Read-only** (`is_read_only`): a *simple* command (`agentrio.engine.tools.simple_command`: plain
  words, no shell syntax of any kind, at most 16 KiB), so that what runs is exactly the
  argv judged (R74), whose program is named on ``readonly_commands`` -- or ``git`` with a
  ``readonly_git`` subcommand -- and that names no hidden place (an agentrio home,
  credential files) by path, judged by real paths (`agentrio.engine.processes.hidden`). The
  program must be a bare name (found on the sandbox's fixed ``PATH``) or live in a
  system ``bin`` directory: ``./ls`` is whatever script sits in the working directory.
  Options that make a listed program write (``date -s``, ``git log --output=FILE``) or
  run configured code (``git -c core.pager=...``, ``--ext-diff``, ``--textconv``, any
  git option before the subcommand) disqualify it. Such a command
  runs in the read-only sandbox (`engine.sandbox`, R75); the sandbox is the real
  boundary, these checks keep obvious misuse from reaching it.
- **Restricted** (`touches_restricted`): some path in the command is a restricted path,
  lies under one, or is an ancestor of one (``rm -rf /`` touches ``/etc``); relative paths
  count once resolved against ``cwd``; globs match component by component (``/e*/hosts``
  touches ``/etc``); ``~`` expands to a home directory; a path that is a symlink into
  one counts. A privilege-raising program (`ELEVATORS`: ``sudo`` and friends) anywhere
  in the command counts too, found in the words as the shell reads them (``s''udo`` is
  ``sudo``). The program
  being run (the first word) is not a path it touches: running ``/usr/bin/python3``
  reads ``/usr`` but changes nothing there.
"""

from __future__ import annotations

import fnmatch
import os
import posixpath
import re
import shlex
from collections.abc import Sequence
from typing import Final

import attrs

from agentrio.engine.config import ToolsConfig
from agentrio.engine.processes.hidden import named_place
from agentrio.engine.tools.simple_command import simple_argv

__all__ = [
    "ELEVATORS",
    "MAX_RESOLVED",
    "SHELL_OPERATORS",
    "Verdict",
    "classify",
    "is_read_only",
    "path_outside",
    "program_name",
    "shell_words",
    "touches_restricted",
]

SHELL_OPERATORS: Final[tuple[str, ...]] = (";", "&", "|", "<", ">", "$(", "`", "\n", "\r")
"""Text that makes a shell do more than run one program, named in the reason a person is
shown. The decision itself does not rest on this list: `simple_argv` admits only plain
words."""

ELEVATORS: Final[frozenset[str]] = frozenset({"sudo", "sudoedit", "su", "doas", "pkexec", "run0"})
"""Programs that run something with another user's rights (R7)."""

MAX_RESOLVED: Final = 4096
"""Paths of one command whose symlinks the restricted-path check resolves; the text of
every further path is still checked."""
_SYSTEM_BIN_DIRS: Final = frozenset({"/bin", "/usr/bin", "/usr/local/bin", "/sbin", "/usr/sbin"})
_GIT_SAFE_GLOBAL_OPTIONS: Final = frozenset(
    {"--no-pager", "-P", "--no-optional-locks", "--literal-pathspecs", "--no-replace-objects"}
)
_GIT_UNSAFE_OPTIONS: Final = (
    "--output",
    "--ext-diff",
    "--textconv",
    "--show-signature",
    "--open-files-in-pager",
)
"""git options that write a file or run a configured program; git also accepts any
unambiguous abbreviation (``--outp=FILE``), so prefixes of these count too."""
_GLOB_CHARS: Final = frozenset("*?[")
_OPTION_LETTERS: Final = 8
# Splits a command into words at whitespace, quotes and operator characters, so that
# ``cat</etc/passwd`` and ``true;sudo x`` still show their parts.
_WORD_SPLIT: Final = re.compile(r"[\s;&|<>()`'\"]+")
# One piece of shell text: a single-quoted part, a double-quoted part, an escaped
# character, plain text, or a run of separators. The alternatives start with different
# characters, so matching is linear in the text (shlex is quadratic on one long word).
_SHELL_PIECE: Final = re.compile(
    r"'([^']*)'?|\"((?:[^\"\\]|\\.)*)\"?|\\(.?)|([^\s'\"\\;&|<>()`]+)|[\s;&|<>()`]+", re.S
)
_ESCAPE: Final = re.compile(r"\\(.)", re.S)


@attrs.frozen
class Verdict:
    """What running a command needs.

    ``needs_confirm``: the command is not read-only, so a person must approve it (R60).
    ``restricted``: that confirmation must also check the system password, because the
    command touches a restricted path or raises privileges (R7). It implies
    ``needs_confirm``: a read-only command is never asked about, wherever it reads.
    ``reason``: one line for the person asked (or for the log when nobody is asked).
    ``argv``: the exact argv the command means without a shell, when it is simple
    (`simple_argv`); a command that runs unasked runs exactly this (R74).
    """

    needs_confirm: bool
    restricted: bool
    reason: str
    argv: tuple[str, ...] | None = None


def _operator_in(text: str) -> str | None:
    for op in SHELL_OPERATORS:
        if op in text:
            return op
    return None


def shell_words(text: str) -> list[str]:
    """Words as a shell would mostly see them (quotes joined and removed), in linear time.

    Only for looking for paths (`touches_restricted`): an approximation that errs
    towards finding more words, never for deciding what runs."""
    words: list[str] = []
    current: list[str] = []
    started = False
    for match in _SHELL_PIECE.finditer(text):
        single, double, escaped, plain = match.groups()
        if single is None and double is None and escaped is None and plain is None:
            if started:
                words.append("".join(current))
                current, started = [], False
            continue
        if double is not None:
            current.append(_ESCAPE.sub(r"\1", double))
        else:
            current.append(next(p for p in (single, escaped, plain) if p is not None))
        started = True
    if started:
        words.append("".join(current))
    return words


def program_name(program: str) -> str | None:
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


def _read_only_problem(
    argv: tuple[str, ...], config: ToolsConfig, cwd: str | None, hidden: Sequence[str]
) -> str:
    """Why the simple command ``argv`` is not read-only, or ``""`` when it is."""
    name = program_name(argv[0])
    if name is None:
        return f"runs {argv[0]!r}, which is not a program from a system directory"
    if name == "git":
        if not _git_read_only(list(argv[1:]), config):
            return "is not a read-only git command"
    elif name not in config.readonly_commands:
        return "is not on the read-only list"
    elif name == "date" and _date_sets_clock(list(argv[1:])):
        return "sets the clock"
    hit = _hidden_hit(argv[1:], cwd, hidden)
    return f"names {hit}, which only a person may let a command read" if hit else ""


def _hidden_hit(words: Sequence[str], cwd: str | None, hidden: Sequence[str]) -> str:
    """The first hidden place (an agentrio home, a credential store) that ``cwd`` or a
    path in ``words`` resolves into -- by its text or its real path, every symlink,
    ``..`` and magic link (``/proc/self/root``) resolved (`named_place`) -- or ``""``.
    Recursive reads of an ancestor (``grep -r x /``) are left to the sandbox, which
    hides these places."""
    paths = [path for word in words for path in (*_candidates(word), *_option_values(word))]
    return named_place(paths, cwd, hidden)


def _option_values(word: str) -> list[str]:
    """What may follow a short option's letters in one word (``-f/path``, ``-rf../x``):
    after each of the first `_OPTION_LETTERS` letters (so a long word costs no more)."""
    if not word.startswith("-") or word.startswith("--"):
        return []
    values = []
    for index in range(2, min(len(word), _OPTION_LETTERS + 2)):
        if not word[index - 1].isalnum():
            break
        values.append(word[index:])
    return values


def is_read_only(
    command: str | list[str],
    config: ToolsConfig,
    *,
    cwd: str | None = None,
    hidden: Sequence[str] = (),
) -> bool:
    """True when ``command`` may run without confirmation (R60, R74); see the module
    docstring. Whether it then does also depends on the sandbox (R75)."""
    argv = simple_argv(command).argv
    return argv is not None and not _read_only_problem(argv, config, cwd, hidden)


def _words(command: str | list[str]) -> list[list[str]]:
    """Word lists to look for paths in: the text split at operators, and shell words.

    The first word of each list is the program and is dropped: running a program is not
    touching its directory (but a later copy of the same path, ``cp x /bin/cp``, is).
    A first word holding ``=`` is an assignment (``PATH=/sbin make``) and is kept.
    """
    parts = [command] if isinstance(command, str) else command
    split = [word for part in parts for word in _WORD_SPLIT.split(part) if word]
    lists = [split, shell_words(command) if isinstance(command, str) else list(command)]
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


def _under(path: str, root: str) -> bool:
    """``path`` is ``root`` or lies under it (no globs: ``path`` is a directory)."""
    theirs = _components(root)
    return _components(path)[: len(theirs)] == theirs


def _roots(config: ToolsConfig) -> list[str]:
    roots = (_absolute(root, None) for root in config.restricted_paths)
    return [root for root in roots if root is not None]


def _elevator_in(command: str | list[str]) -> str:
    """The privilege-raising program ``command`` runs, or ``""`` (issue 29 finding 6).

    Every word is looked at as the shell will see it: the parsed argv of a simple
    command, the shell words of any other (quotes joined and removed: ``s''udo`` and
    ``\\sudo`` are ``sudo``; ``$'sudo'`` too), and the text split at operators. The
    program's basename counts wherever it stands (``env sudo``, ``xargs doas``)."""
    parts = [command] if isinstance(command, str) else command
    words = [word for part in parts for word in _WORD_SPLIT.split(part)]
    parsed = simple_argv(command).argv
    words.extend(parsed if parsed is not None else ())
    if isinstance(command, str):
        spoken = shell_words(command)
        words.extend(spoken)
        words.extend(word.replace("$", "") for word in spoken)
    for word in words:
        name = posixpath.basename(word)
        if name in ELEVATORS:
            return name
    return ""


def _real(path: str, budget: list[int]) -> str | None:
    """``path`` with its symlinks resolved (``link/x`` where ``link -> /etc`` is
    ``/etc/x``), or None once ``budget`` (a one-item countdown) ran out or the path
    cannot be read. Reads the file system."""
    if budget[0] <= 0:
        return None
    budget[0] -= 1
    try:
        return os.path.realpath(path)
    except (OSError, ValueError):
        return None


def path_outside(words: Sequence[str], directory: str) -> str:
    """The first path a word of ``words`` may name (the word, what follows ``=`` or
    ``:`` in it, a short option's glued value) that lies outside the real directory
    ``directory`` by its text or its real path, or ``""``. Relative words are read from
    ``directory``; a path whose symlinks cannot be resolved (unreadable, or past
    `MAX_RESOLVED`) counts as outside. Reads the file system."""
    budget = [MAX_RESOLVED]
    for word in words:
        for candidate in (*_candidates(word), *_option_values(word)):
            path = _absolute(candidate, directory)
            if path is None:
                continue
            real = _real(path, budget)
            if real is None or not (_under(path, directory) and _under(real, directory)):
                return path
    return ""


def _restricted_hit(command: str | list[str], config: ToolsConfig, cwd: str | None) -> str:
    """The first reason ``command`` touches a restricted path, or ``""``."""
    elevator = _elevator_in(command)
    if elevator:
        return f"runs {elevator}"
    roots = _roots(config)
    if not roots:
        return ""
    where = _absolute(cwd, None) if cwd is not None else None
    if where is not None:
        # Working inside a restricted directory: whatever the program writes without
        # naming a path (make, tar x, a build) lands there.
        for place in dict.fromkeys((where, _real(where, [1]))):
            if place is not None and any(_under(place, root) for root in roots):
                return f"runs in {place}"
    budget = [MAX_RESOLVED]
    checked: set[str] = set()  # the same path, found twice, is judged (and read) once
    for words in _words(command):
        for word in words:
            for candidate in _candidates(word):
                path = _absolute(candidate, where)
                if path is None or path in checked:
                    continue
                checked.add(path)
                real = _real(path, budget)
                for root in roots:
                    if _overlaps(path, root):
                        return f"touches {path}"
                    if real is not None and real != path and _overlaps(real, root):
                        return f"touches {real} (through {path})"
    return ""


def touches_restricted(
    command: str | list[str], config: ToolsConfig, *, cwd: str | None = None
) -> bool:
    """True when ``command`` touches a restricted path or raises privileges (R7)."""
    return bool(_restricted_hit(command, config, cwd))


def classify(
    command: str | list[str],
    config: ToolsConfig,
    *,
    cwd: str | None = None,
    hidden: Sequence[str] = (),
) -> Verdict:
    """Decide whether ``command`` needs a confirmation (R60, R74) and the password (R7).

    The command is parsed once (`simple_argv`); ``Verdict.argv`` carries the argv that
    was judged, so the caller runs exactly that. ``hidden`` lists absolute paths a
    command must not name to run unasked (the agentrio home, credential places).

    Total: any text gets a verdict, never an exception. A NUL byte can reach no program
    (``execve`` refuses it), so such a command is judged no further and asks."""
    if "\x00" in (command if isinstance(command, str) else "".join(command)):
        return Verdict(
            needs_confirm=True,
            restricted=False,
            reason="needs confirmation: the command contains a NUL byte (no program gets one)",
            argv=None,
        )
    parsed = simple_argv(command)
    if parsed.argv is not None:
        problem = _read_only_problem(parsed.argv, config, cwd, hidden)
        if not problem:
            shown = shlex.join(parsed.argv)
            return Verdict(
                needs_confirm=False,
                restricted=False,
                reason=f"read-only: {shown}",
                argv=parsed.argv,
            )
    else:
        problem = parsed.why
    hit = _restricted_hit(command, config, cwd)
    if hit:
        return Verdict(
            needs_confirm=True, restricted=True, reason=f"restricted: {hit}", argv=parsed.argv
        )
    return Verdict(
        needs_confirm=True,
        restricted=False,
        reason=f"needs confirmation: the command {problem}",
        argv=parsed.argv,
    )
