"""What "Allow this turn" covers (R76, issue 29 finding 6), in the dialog's own words.

A person who picks "Allow this turn" approves one command and lets the model run more
of the same kind, unasked, until its turn ends. The choice's label
(`agentrio.protocol.wording.ALLOW_TURN`) says what that kind is, and `turn_refusal` holds the
engine to exactly that: a later command of the turn is covered only when it is a
**plain program** --

- a simple command (`agentrio.engine.tools.simple_command`: plain words, no shell syntax; the
  argv judged is the argv run), that touches no restricted path and raises no
  privileges (`agentrio.engine.tools.policy`: those always ask, with the password);
- whose program is a bare name (found on ``PATH``) or lives in a system ``bin``
  directory: ``./build.sh`` is a file of the working tree, most likely a script;
- whose program is not a shell (``sh``, ``bash``, ``busybox`` …, whatever it is given:
  a script is code the person never saw);
- not an interpreter given code on its command line or on stdin (``python3 -c``,
  ``node -e``, ``perl -e``, ``ruby -e``, ``php -r``, ``python3 -``, an interpreter
  with no script file at all); awk and sed programs are code too;
- not a program that runs another program named in its arguments (``env``, ``xargs``,
  ``nice``, ``timeout``, ``find -exec``, ``git -c`` …): the program it runs was never
  judged.

Anything else asks again, whatever was allowed for the turn. The lists are of program
*names* (``/usr/bin/python3.12`` is ``python3.12``, which is ``python``); a program
that is none of these may still run code it reads from a file, as any approved program
may -- that is what the person approved.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Sequence
from typing import Final

from agentrio.engine.tools.policy import ELEVATORS, program_name

__all__ = ["INTERPRETERS", "RUNNERS", "SHELLS", "is_interpreter", "turn_refusal"]

SHELLS: Final[frozenset[str]] = frozenset(
    {"sh", "bash", "dash", "zsh", "ksh", "mksh", "pdksh", "ash", "fish", "csh", "tcsh",
     "rbash", "yash", "busybox", "toybox", "elvish", "nu", "xonsh", "pwsh"}
)  # fmt: skip
"""Shells (and multi-call binaries that contain one): never covered."""

INTERPRETERS: Final[dict[str, frozenset[str]]] = {
    "python": frozenset({"-c"}),
    "pypy": frozenset({"-c"}),
    "perl": frozenset({"-e", "-E", "-n", "-p", "-M", "-x"}),
    "ruby": frozenset({"-e", "-n", "-p", "-r", "-x"}),
    "node": frozenset({"-e", "--eval", "-p", "--print", "-r", "--require", "--import", "-i"}),
    "nodejs": frozenset({"-e", "--eval", "-p", "--print", "-r", "--require", "--import", "-i"}),
    "deno": frozenset({"eval", "repl", "-e"}),
    "bun": frozenset({"-e", "--eval", "-p", "--print", "x", "repl"}),
    "php": frozenset({"-r", "-a", "-B", "-R", "-F", "-E"}),
    "lua": frozenset({"-e", "-l", "-i"}),
    "luajit": frozenset({"-e", "-l", "-i"}),
    "tclsh": frozenset(),
    "wish": frozenset(),
    "rscript": frozenset({"-e", "--expr"}),
    "r": frozenset({"-e", "--expr"}),
    "julia": frozenset({"-e", "--eval", "-E", "--print", "-L"}),
    "osascript": frozenset({"-e"}),
    "guile": frozenset({"-c", "-e", "-l"}),
    "racket": frozenset({"-e", "--eval", "-l", "-r"}),
    "ghci": frozenset({"-e"}),
    "runghc": frozenset({"-e"}),
    "scala": frozenset({"-e"}),
    "groovy": frozenset({"-e"}),
    "jshell": frozenset(),
    "expect": frozenset({"-c"}),
    "gdb": frozenset({"-ex", "--ex", "-x", "--eval-command", "-iex", "-batch"}),
}
"""Interpreters, with the options that take code from the command line. Each is covered
only when it is given a script file and none of these options (nor ``-`` / stdin)."""

RUNNERS: Final[frozenset[str]] = frozenset(
    {"env", "xargs", "nice", "nohup", "timeout", "time", "stdbuf", "setsid", "chroot",
     "strace", "ltrace", "unshare", "nsenter", "flock", "watch", "parallel", "script",
     "chrt", "ionice", "taskset", "prlimit", "runuser", "setpriv", "systemd-run", "exec",
     "command", "builtin", "eval", "source", ".", "ssh", "tmux", "screen", "awk", "gawk",
     "mawk", "nawk", "busybox", "sed", "vim", "vi", "nvim", "ex", "emacs", "less", "more",
     "man", "make", "gmake", "rsync", "tar", "zip", "sqlite3", "dc", "m4",
     "doas", "sudo", "su", "pkexec", "run0", "sudoedit", "at", "batch", "crontab"}
)  # fmt: skip
"""Programs that run other programs or code named in their arguments (``tar
--to-command``, ``rsync -e``, ``less`` with ``LESSOPEN``, ``make``'s recipes, awk and
sed programs): never covered, since what they would run was never judged."""

_FIND_RUNS: Final = frozenset({"-exec", "-execdir", "-ok", "-okdir", "-fprint", "-fls"})
_GIT_CONFIG_OPTIONS: Final = ("-c", "--config-env", "--exec-path")
_VERSION: Final = re.compile(r"(?:[0-9][0-9.]*[a-z]?|-[0-9][0-9.]*)$")


def _names(program: str) -> frozenset[str]:
    """The names a program goes by: its basename in lower case, and that without a
    version suffix (``/usr/bin/python3.12`` → ``python3.12`` and ``python``)."""
    base = posixpath.basename(program).lower()
    stripped = _VERSION.sub("", base)
    return frozenset({base, stripped}) if stripped else frozenset({base})


def is_interpreter(program: str) -> bool:
    """Whether ``program`` (a name or path) is one of `INTERPRETERS`, by any of its names."""
    return bool(_names(program) & INTERPRETERS.keys())


def _interpreter_code(args: Sequence[str], code_options: frozenset[str]) -> str:
    """Why an interpreter invocation runs code it was not given as a file, or ``""``."""
    has_file = False
    for arg in args:
        if arg == "-":
            return "reads its program from stdin"
        name = arg.partition("=")[0]
        if name in code_options:
            return f"is given code with {name}"
        if arg.startswith("-") and not arg.startswith("--"):
            # Joined short options: ``-Sc``, ``-ne``, ``-ecode``.
            if any(f"-{letter}" in code_options for letter in arg[1:]):
                return f"is given code with {arg[:24]!r}"
        elif not arg.startswith("-"):
            has_file = True
    return "" if has_file else "has no script file (it would read one from stdin)"


def turn_refusal(argv: tuple[str, ...] | None, *, restricted: bool) -> str:
    """Why "Allow this turn" does not cover a command (see the module docstring), or
    ``""`` when it does. ``argv`` is the judged argv (None: not a simple command);
    ``restricted`` is the policy's verdict (a restricted path or an elevation)."""
    if argv is None:
        return "it is not a plain program (it needs a shell)"
    if restricted:
        return "it touches a restricted path or raises privileges"
    if any(_names(word) & ELEVATORS for word in argv):
        return "it raises privileges"
    if program_name(argv[0]) is None:
        return f"{argv[0][:64]!r} is a file, not a system program (it may be a script)"
    names, args = _names(argv[0]), argv[1:]
    program = posixpath.basename(argv[0])
    if names & SHELLS:
        return f"{program} is a shell"
    for name in sorted(names & INTERPRETERS.keys()):
        why = _interpreter_code(args, INTERPRETERS[name])
        if why:
            return f"{program} {why}"
    if names & RUNNERS:
        return f"{program} runs what its arguments name"
    if "find" in names and any(arg in _FIND_RUNS for arg in args):
        return "find runs what its arguments name"
    if "git" in names and any(
        arg == option or arg.startswith(option + "=") or (option == "-c" and arg.startswith("-c"))
        for arg in args
        for option in _GIT_CONFIG_OPTIONS
    ):
        return "git is given configuration that may run a program"
    return ""
