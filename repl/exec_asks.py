"""How ``agentrio exec`` answers its task's asks when nobody else is there to.

``exec`` starts its task with ``share_asks`` (R99): each ask goes first to whoever
else listens to the session -- a REPL window open on it (``agentrio --session ID``),
a script that sent ``listen`` for a prefix of its id (``cli-``, ``""``), a subscriber
of the session (the page, ``POST …/confirm``) -- and that front-end's answer is the
answer: ``exec`` notes it on stderr (`ExecAsks.heard`, from the task's ``confirm``
and ``ask_state`` events) and counts a denial or a declined question in its exit
status. Only an ask nobody else can take (or whose front-end went away before
answering) comes to ``exec`` itself, and is judged here.

Every confirmation ``exec`` judges is denied, with a reason the model reads as ``denied
by the exec policy: <reason>`` (``denied_by`` ``policy``: no person denied it), unless
an ``--allow REGEX`` rule covers it: a ``run_command`` confirmation whose command -- the
whole text that will run, an argv as ``shlex.join`` of it, ``;`` and ``&&`` and all --
fully matches the pattern, and whose real working directory (the one the confirmation
shows, which the daemon resolved and runs the command in) is the real directory
``agentrio exec`` was started in (`agentrio.approvals.RuleOfCommands`, as a remembered
"Always allow" is bound to its command and directory, R76). A pattern never matches a
prefix: ``--allow 'touch [a-z.]+'`` does not cover ``touch a; rm -rf b``. A command
touching a restricted path is denied whatever the rules say: it needs the system
password (R7), which a non-interactive run has no one to type. Questions (``ask_user``)
and secrets are declined with a reason, so the model goes on without them.

While another front-end listens it decides every ask, those an ``--allow`` rule
would cover too: a person who is there is asked.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Final

import attrs

from agentrio.approvals import RuleOfCommands, confirmed_command
from agentrio.handles import Decision
from agentrio.protocol.asks import frontend_name
from agentrio.protocol.events import AskState, Confirm, Event
from agentrio.protocol.frames import Ask

__all__ = [
    "EXEC_CLIENT",
    "NOT_ALLOWED",
    "NO_PASSWORD",
    "NO_QUESTIONS",
    "NO_SECRETS",
    "ExecAsks",
    "Judged",
]

#: The ``client`` of ``exec``'s ``hello``: the front-end its own answers come from.
EXEC_CLIENT: Final = "agentrio-exec/0.1.0"
#: The answers of another front-end (an ``ask_state`` ``answer``) that refuse nothing.
_GRANTED: Final = frozenset({"approved", "answered"})

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
    #: Every ask answered, in order, by ``exec`` or by another front-end.
    judged: list[Judged] = attrs.field(factory=list)
    #: Ask id -> what its ``confirm`` event showed (the command and where).
    _shown: dict[str, str] = attrs.field(factory=dict)
    #: Asks said to be shown on another front-end (said once, not at each ack).
    _elsewhere: set[str] = attrs.field(factory=set)

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

    def heard(self, event: Event) -> str | None:
        """What the task's ``event`` says of an ask another front-end holds (R99): the
        line to note on stderr, or None. An answer there is recorded in `judged`, so a
        denial or a declined question counts in the exit status as ``exec``'s own."""
        if isinstance(event, Confirm):
            command, cwd = event.args.get("command"), event.args.get("cwd")
            shown = f"{command} (in {cwd})" if command and cwd else event.tool_name
            self._shown[event.confirm_hash] = str(shown)
            return None
        if not isinstance(event, AskState) or event.frontend in ("", frontend_name(EXEC_CLIENT)):
            return None
        what = self._shown.get(event.ask_id, "a question")
        if event.state == "shown":
            if event.ask_id in self._elsewhere:
                return None
            self._elsewhere.add(event.ask_id)
            return f"asked on {event.frontend}, waiting for its answer: {what}"
        if event.state != "answered":
            return None
        note = f"{event.answer} on {event.frontend}: {what}"
        self.judged.append(Judged(approved=event.answer in _GRANTED, note=note))
        return note

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
