"""A command's exact argv, when its words need no shell to mean what they say (R74).

A command the model writes as a string is, for ``/bin/sh``, a program: it expands
parameters (``${X:-...}``), globs (``--outpu[t]=F``), tildes and braces, splits at
operators, reads redirections and comments. A policy that judges *words* and a shell
that runs the *string* disagree exactly there -- so a command runs without confirmation
only when no such step could apply: `simple_argv` accepts a string only when it is
plain words, returns the argv that ``sh`` would build from it, and that argv is what
runs (``execve``, no shell). Anything it refuses is asked about.

Accepted, in one left-to-right pass (linear in the length, bounded by `MAX_BYTES`):

- words separated by spaces or tabs, made of letters, digits, the plain punctuation
  `_WORD_PUNCTUATION` and printable non-ASCII letters, and ``~``/``^`` right after a
  letter or digit (``HEAD~1``: only a leading ``~`` is expanded);
- single-quoted parts (``'any text'``: ``sh`` takes it literally, and so do we), and
  double-quoted parts without ``$``, backquote, backslash or ``!`` (which ``sh`` would
  interpret inside double quotes);
- adjacent parts form one word (``'a'b"c"`` is ``abc``), and ``''`` is an empty word.

Refused: any other character (``$ ` \\ ~ * ? [ ] { } ; & | < > ( ) # ! ^`` and so on),
control and invisible characters (newlines, tabs inside quotes, bidi controls, zero
width and non-breaking spaces: `str.isprintable`), an unterminated quote, a first word
that assigns (``X=1 ls``) or is a shell keyword, and anything longer than `MAX_BYTES`.
`tests/engine/tools/test_simple_command.py` checks with hypothesis that, for every
string accepted, ``/bin/sh`` builds the same argv.

An argv given as a list never meets a shell; its words have to be printable and hold
none of ``$ ` ; & | < >`` (a word with those was written for a shell that is not there).
"""

from __future__ import annotations

from typing import Final

import attrs

__all__ = ["MAX_BYTES", "Parsed", "simple_argv"]

MAX_BYTES: Final = 16 * 1024
"""A longer command is never judged simple: it asks (and is never parsed twice)."""

_WORD_PUNCTUATION: Final = frozenset("_-./,:@%+=")
# Plain inside a word after a letter or digit (``HEAD~1``, ``HEAD^``); at a word's start
# or after ``=``/``:`` a shell may expand ``~``.
_AFTER_ALNUM: Final = frozenset("~^")
_DOUBLE_QUOTE_SPECIAL: Final = frozenset('$`\\!"')
# No shell reads an argv list, but a word holding these was probably written for one
# (``["ls", "$(x)"]``): asking costs one question.
_LIST_SHELLISH: Final = frozenset("$`;&|<>")
_SEPARATORS: Final = frozenset(" \t")
_SHELL_KEYWORDS: Final = frozenset(
    {
        "!",
        "{",
        "}",
        "case",
        "do",
        "done",
        "elif",
        "else",
        "esac",
        "fi",
        "for",
        "function",
        "if",
        "in",
        "select",
        "then",
        "time",
        "until",
        "while",
        "[[",
        "]]",
    }
)


@attrs.frozen
class Parsed:
    """The outcome of `simple_argv`: ``argv`` when the command is simple, else None and
    ``why`` (one line for the person asked)."""

    argv: tuple[str, ...] | None
    why: str = ""


def _refuse(why: str) -> Parsed:
    return Parsed(argv=None, why=why)


def _printable(char: str) -> bool:
    return char.isprintable()


def _describe(char: str) -> str:
    return repr(char) if char.isprintable() else f"U+{ord(char):04X}"


def _word_char(char: str) -> bool:
    if char.isascii():
        return char.isalnum() or char in _WORD_PUNCTUATION
    return char.isprintable() and not char.isspace()


def _split(text: str) -> Parsed:
    words: list[str] = []
    current: list[str] = []
    in_word = False
    index, end = 0, len(text)
    while index < end:
        char = text[index]
        if char in _SEPARATORS:
            if in_word:
                words.append("".join(current))
                current, in_word = [], False
            index += 1
        elif char == "'":
            close = text.find("'", index + 1)
            if close < 0:
                return _refuse("has an unterminated quote")
            part = text[index + 1 : close]
            bad = next((c for c in part if not _printable(c)), None)
            if bad is not None:
                return _refuse(f"has the character {_describe(bad)} inside quotes")
            current.append(part)
            in_word, index = True, close + 1
        elif char == '"':
            close = text.find('"', index + 1)
            if close < 0:
                return _refuse("has an unterminated quote")
            part = text[index + 1 : close]
            bad = next((c for c in part if c in _DOUBLE_QUOTE_SPECIAL or not _printable(c)), None)
            if bad is not None:
                return _refuse(f"has {_describe(bad)} inside double quotes")
            current.append(part)
            in_word, index = True, close + 1
        elif _word_char(char) or (
            char in _AFTER_ALNUM
            and index > 0
            and text[index - 1].isascii()
            and text[index - 1].isalnum()
        ):
            current.append(char)
            in_word, index = True, index + 1
        else:
            return _refuse(f"uses shell syntax or an unusual character: {_describe(char)}")
    if in_word:
        words.append("".join(current))
    return Parsed(argv=tuple(words))


def _check_list(command: list[str]) -> Parsed:
    for word in command:
        bad = next((c for c in word if c in _LIST_SHELLISH or not _printable(c)), None)
        if bad is not None:
            return _refuse(f"has the character {_describe(bad)}")
    return Parsed(argv=tuple(command))


def _size(command: str | list[str]) -> int:
    """UTF-8 size, counted without encoding anything longer than needed."""
    if isinstance(command, str):
        return len(command) if len(command) > MAX_BYTES else len(command.encode())
    total = 0
    for word in command:
        total += (len(word) if len(word) > MAX_BYTES else len(word.encode())) + 1
        if total > MAX_BYTES:
            break
    return total


def simple_argv(command: str | list[str]) -> Parsed:
    """The argv ``command`` means with no shell involved, or why it needs one (R74)."""
    if _size(command) > MAX_BYTES:
        return _refuse(f"is longer than {MAX_BYTES // 1024} KiB")
    parsed = _split(command) if isinstance(command, str) else _check_list(command)
    argv = parsed.argv
    if argv is None:
        return parsed
    if not argv:
        return _refuse("is empty")
    if isinstance(command, str):
        first = argv[0]
        if "=" in first:
            return _refuse("starts with a variable assignment")
        if first in _SHELL_KEYWORDS:
            return _refuse(f"starts with the shell keyword {first!r}")
    return parsed
