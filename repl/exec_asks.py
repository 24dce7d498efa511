"""How ``agentrio exec`` answers its task's asks: nobody is there to ask.

Every confirmation is denied, with a reason the model reads as ``denied by the exec
policy: <reason>`` (``denied_by`` ``policy``: no person denied it), unless an ``--allow
REGEX`` rule covers it: a ``run_command`` confirmation whose command -- the whole text
that will run, an argv as ``shlex.join`` of it, ``;`` and ``&&`` and all -- fully
matches the pattern, and whose real working directory (the one the confirmation
shows, which the daemon resolved and runs the command in) is the real directory
``agentrio exec`` was started in (`agentrio.approvals.RuleOfCommands`, as a remembered
"Always allow" is bound to its command and directory, R76). A pattern never matches a
prefix: ``--allow 'touch [a-z.]+'`` does not cover ``touch a; rm -rf b``. A command
touching a restricted path is denied whatever the rules say: it needs the system
password (R7), which a non-interactive run has no one to type. Questions
(``ask_user``) and secrets are declined with a reason, so the model goes on without
them.

The asks of a task ``exec`` starts are its window's (R5, R78): no other window and
no prefix listener can take them, so ``exec`` is the one that answers; a person who
wants to answer should run the task in the REPL (``agentrio --session ID``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Final

import attrs

from agentrio.approvals import RuleOfCommands, confirmed_command
from agentrio.handles import Decision
from agentrio.protocol.frames import Ask

__all__ = [
    "NOT_ALLOWED",
    "NO_PASSWORD",
    "NO_QUESTIONS",
    "NO_SECRETS",
    "ExecAsks",
    "Judged",
]

#: The reason a confirmation no ``--allow`` rule covers is denied with.
NOT_ALLOWED: Final = "non-interactive run (agentrio exec), no --allow rule covers it"
#: The reason a confirmation of a restricted-path command is denied with (R7).
NO_PASSWORD: Final = (
    "non-interactive run (agentrio exec): a command touching a restricted path needs "
    "the system password, and nobody is there to type it"
)
#: The reason an ``ask_user`` question is declined with.
NO_QUESTIONS: Final = (
    "non-interactive run (agentrio exec): nobody can answer questions; go on without "
    "the answer, or say in your reply what you need"
)
#: The reason a secret ask is declined with.
NO_SECRETS: Final = "non-interactive run (agentrio exec): nobody can enter a secret value"


@attrs.frozen(kw_only=True)
class Judged:
    """One ask and how it was answered: ``approved``, and the line ``exec`` prints
    about it on stderr."""

    approved: bool
    note: str


@attrs.define
class ExecAsks:
    """The ``--allow`` rules of one ``agentrio exec`` and what it answered so far."""

    rules: list[RuleOfCommands]
    #: Every ask answered, in order.
    judged: list[Judged] = attrs.field(factory=list)

    @classmethod
    def of(cls, patterns: Sequence[str], cwd: str | None = None) -> ExecAsks:
        """Rules for ``patterns`` in the real directory ``cwd`` (default: this
        process's working directory). Raises `re.error` for a bad pattern."""
        where = cwd if cwd is not None else os.getcwd()
        return cls([RuleOfCommands.of(pattern, [where]) for pattern in patterns])

    @property
    def refused(self) -> int:
        """How many asks were denied or declined."""
        return sum(1 for judged in self.judged if not judged.approved)

    def decide(self, ask: Ask) -> Decision:
        """The answer to ``ask`` (see the module doc); recorded in `judged`."""
        decision, note = self._judge(ask)
        self.judged.append(Judged(approved=decision.approve is True, note=note))
        return decision

    def _judge(self, ask: Ask) -> tuple[Decision, str]:
        match ask.kind:
            case "ask_user":
                asked = "; ".join(q.text for q in ask.questions) or "a question"
                return _deny(NO_QUESTIONS), f"declined a question: {asked}"
            case "secret":
                key = ask.tool_args.get("key", "")
                return _deny(NO_SECRETS), f"declined a secret ask: {key}"
        found = confirmed_command(ask)
        shown = f"{found[0]} (in {found[1]})" if found else ask.tool_name
        if ask.restricted or ask.need_password:
            return _deny(NO_PASSWORD), f"denied (restricted path): {shown}"
        if found is not None and any(rule.allows(ask) for rule in self.rules):
            return Decision.allow(), f"allowed by --allow: {shown}"
        return _deny(NOT_ALLOWED), f"denied (no --allow rule covers it): {shown}"


def _deny(reason: str) -> Decision:
    """A denial by ``exec``'s policy, not by a person: the model is told so."""
    return Decision.deny(reason, denied_by="policy")
