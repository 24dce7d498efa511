"""Which argv prefix a command may be offered as a rule (R92, the ``npm test *`` habit).

An argv-prefix rule lets a simple command run unasked when its judged argv starts with
the remembered words, in the remembered real directory. It is wider than an exact
rule, so it is offered, and matched, only where the words cannot mean more than they
say. `offered_prefix` is the one judgement; a rule matches a later command only when
that command is offered the very same prefix (so everything below holds at match
time too, not only when the rule was made):

- the command is **simple** (`agentrio.engine.tools.simple_command`: no shell syntax,
  the argv judged is the argv run): ``npm test; rm x``, ``npm test > f``, ``npm test
  $(x)``, ``FOO=1 npm test`` and an unquoted glob are not simple and are never
  covered; quoting cannot widen it, since the rule compares the parsed argv word by
  word (``'npm test'`` is one word, not two);
- it touches no restricted path and raises no privileges (``sudo npm test`` is never
  covered), and it is a plain program in the sense of "Allow this turn"
  (`agentrio.engine.tools.turn_scope.turn_refusal`): not a shell, not an interpreter
  given code, not a program that runs what its arguments name (``env``, ``xargs``,
  ``make``, ``git -c`` …);
- the program is a bare name found on ``PATH`` (``./build.sh`` is a file of the tree)
  and not an interpreter at all (``python script.py`` is offered no prefix: what the
  script does with more arguments was never shown);
- the prefix is **the program and one subcommand word**, exactly two words: the second
  must start with a letter and hold only letters, digits and ``._+:-`` (not an option,
  a number, a path or an assignment: ``sleep 30`` is offered nothing). So ``npm test
  foo`` offers ``npm test``, ``cargo build --release`` offers ``cargo build``; ``git``
  alone is never offered (a program with any arguments is too wide), nor ``ls -la`` or
  ``cat /etc/hosts``.

What the person accepts, and the docs say (docs/security.md): any further arguments,
including options of that subcommand, run unasked in that directory -- as long as none
names a path outside it (`agentrio.engine.rules.kinds`, where the rule is matched).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from agentrio.engine.tools.turn_scope import is_interpreter, turn_refusal

__all__ = ["PREFIX_WORDS", "offered_prefix"]

#: Words in an argv-prefix rule: the program and its subcommand.
PREFIX_WORDS: Final = 2
_SUBCOMMAND: Final = re.compile(r"[A-Za-z][A-Za-z0-9._+:-]*")


def offered_prefix(argv: Sequence[str] | None, *, restricted: bool) -> tuple[str, ...] | None:
    """The argv prefix a rule for this command may hold, or None when none may (see
    the module docstring). ``argv`` is the judged argv (None: not a simple command);
    ``restricted`` is the policy's verdict."""
    if argv is None or len(argv) < PREFIX_WORDS:
        return None
    if turn_refusal(tuple(argv), restricted=restricted):
        return None
    program, subcommand = argv[0], argv[1]
    if "/" in program or is_interpreter(program):
        return None
    if not _SUBCOMMAND.fullmatch(subcommand):
        return None
    return (program, subcommand)
