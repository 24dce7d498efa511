"""The session's lists as the REPL keeps and shows them: pending tasks, background legs,
remembered commands and the task history.

`SessionLists` is a part of `agentrio.repl.state.ReplState`, split out because these lists
change on their own schedule (a ``pending_list``, ``leg_list`` or ``allowed`` frame, an
HTTP answer) and are printed only when the person asked (``/pending``, ``/legs``,
``/allowed``, ``/history``): a list arriving for the toolbar prints nothing. It keeps
the last list of each kind, so ``/pending N`` and ``/allowed forget N`` index what was
shown. Like the state it imports no prompt_toolkit and does no I/O: it acts through its
`ListsHost` (the state).
"""

from __future__ import annotations

import re
import time
from typing import Final, Protocol

from agentrio.protocol.codec import structure
from agentrio.protocol.errors import FrameDecodeError
from agentrio.protocol.faithful import one_line
from agentrio.protocol.frames import (
    AllowedList,
    AllowedRule,
    ForgetAllowed,
    LegInfo,
    LegList,
    ListAllowed,
    ListLegs,
    ListPending,
    PendingList,
    PendingTaskInfo,
)
from agentrio.protocol.http import ErrorBody, HistoryList, HistoryRecord
from agentrio.protocol.wording import plural
from agentrio.repl import recent
from agentrio.repl.messages import HttpCall, HttpResult, Outgoing
from agentrio.repl.render import clip

#: A ``/history`` word that may be (the start of) a task id: it finds that task too.
_TASK_ID_PREFIX: Final = re.compile(r"[0-9a-fA-F]{6,32}")

__all__ = ["ListsHost", "SessionLists", "age_text", "covered", "origin_of"]


def origin_of(session_id: str) -> str:
    """The origin prefix of a session id (``cli-`` of ``cli-3f2a…``), or "" for an id
    with none (then pending work is listed for that session alone)."""
    head, dash, _ = session_id.partition("-")
    return head + dash if dash and head else ""


def age_text(seconds: float) -> str:
    """How long ago, as a person reads it: ``40s``, ``12m``, ``3h``, ``2d``."""
    seconds = max(0, int(seconds))
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def covered(rule: AllowedRule) -> str:
    """What ``rule`` covers, in one faithful line: its ``covers`` words, or for an
    older daemon's rule its command and directory."""
    text = rule.covers or (
        f"exactly `{rule.command}` in {rule.cwd}"
        if rule.cwd
        else f"`{rule.command}` (no directory: covers nothing)"
    )
    return one_line(text)


class ListsHost(Protocol):
    """What the lists need of the state that owns them."""

    @property
    def session_id(self) -> str: ...

    def send(self, item: Outgoing) -> bool: ...

    def write(self, text: str, style: str = "") -> None: ...

    def set_notice(self, text: str) -> None: ...


class SessionLists:
    """The last pending, leg and allowed lists of the host's session (module doc)."""

    def __init__(self, host: ListsHost) -> None:
        self._host = host
        #: The last ``pending_list``; ``/pending N`` indexes it.
        self.pending_tasks: list[PendingTaskInfo] = []
        self.legs: dict[str, LegInfo] = {}
        #: The last ``allowed`` list; ``/allowed forget N`` indexes it.
        self.allowed_rules: list[AllowedRule] = []
        #: The task ids of the last ``/history`` list; ``/history show N`` indexes it.
        self.history_tasks: list[str] = []
        self._show_pending = False
        #: Say how many tasks wait when the next pending list arrives (at start).
        self._announce_pending = False
        self._show_legs = False
        self._show_allowed = False
        #: The rules known before a ``/allowed forget`` and what it named, until the
        #: answer says which went (issue 33: the person is told what was removed).
        self._forgetting: tuple[list[AllowedRule], str] | None = None

    def clear(self) -> None:
        """A new session, or the connection lost: nothing listed is known any more."""
        self.pending_tasks = []
        self.legs.clear()
        self.allowed_rules = []
        self._forgetting = None

    # ------------------------------------------------------------ requests

    def pending_query(self) -> ListPending:
        """The pending work of every session of this one's origin: each REPL start is a
        new ``cli-`` session, and the work earlier ones left must stay in sight."""
        origin = origin_of(self._host.session_id)
        if origin:
            return ListPending(origin=origin)
        return ListPending(session_id=self._host.session_id)

    def ask_pending(self) -> None:
        self._show_pending = self._host.send(self.pending_query())

    def announce_pending(self) -> ListPending:
        """The query whose answer says, once, how many tasks wait (the REPL's start)."""
        self._announce_pending = True
        return self.pending_query()

    def ask_legs(self) -> None:
        self._show_legs = self._host.send(ListLegs(session_id=self._host.session_id))

    def ask_allowed(self) -> None:
        self._show_allowed = self._host.send(ListAllowed(session_id=self._host.session_id))

    def ask_history(self, keyword: str) -> None:
        """``/history [WORD]``; a WORD that could be a task id (hex) also finds the task
        whose id starts with it (issue 33), so the list is filtered here."""
        params = {"limit": "20"}
        if _TASK_ID_PREFIX.fullmatch(keyword):
            params["limit"] = "500"
        elif keyword:
            params["keyword"] = keyword
        path = f"/v1/session/{self._host.session_id}/task/history"
        self._host.send(
            HttpCall(method="GET", path=path, params=params, purpose="history", ref=keyword)
        )

    def ask_record(self, ref: str) -> None:
        """``/history show N|ID``: the whole record of task N of the last ``/history``
        list, or of the listed task whose id starts with ID."""
        if ref.isdigit() and 0 < int(ref) <= len(self.history_tasks):
            task_hash = self.history_tasks[int(ref) - 1]
        else:
            found = [h for h in self.history_tasks if ref and h.startswith(ref)]
            if len(found) != 1:
                self._host.set_notice(f"no listed task {ref!r}: type /history (or /history ID)")
                return
            task_hash = found[0]
        path = f"/v1/session/{self._host.session_id}/task/{task_hash}/history"
        self._host.send(HttpCall(method="GET", path=path, purpose="record", ref=task_hash))

    def forget_allowed(self, ref: str) -> None:
        """``/allowed forget N``: N of the last ``/allowed`` list, a rule id, or all."""
        rule_id = ref
        if ref.isdigit():
            index = int(ref) - 1
            if not 0 <= index < len(self.allowed_rules):
                self._host.set_notice(f"no remembered rule {ref}: see /allowed")
                return
            rule_id = self.allowed_rules[index].id
        frame = ForgetAllowed(session_id=self._host.session_id, rule_id=rule_id)
        self._show_allowed = self._host.send(frame)
        if self._show_allowed:
            self._forgetting = (list(self.allowed_rules), ref)

    def find_pending(self, ref: str) -> PendingTaskInfo | None:
        """The listed pending task ``ref`` names: a 1-based index or a hash prefix."""
        notice = self._host.set_notice
        if not self.pending_tasks:
            notice("no pending tasks listed: type /pending first")
            return None
        if ref.isdigit():
            index = int(ref) - 1
            if 0 <= index < len(self.pending_tasks):
                return self.pending_tasks[index]
            notice(f"no pending task {ref}: choose 1-{len(self.pending_tasks)}")
            return None
        matches = [t for t in self.pending_tasks if t.task_hash.startswith(ref.lower())]
        if len(matches) == 1:
            return matches[0]
        notice(f"{'no' if not matches else 'more than one'} pending task matches {ref}")
        return None

    def drop_pending(self, ref: str) -> None:
        task = self.find_pending(ref)
        if task is None:
            return
        session_id = task.session_id or self._host.session_id
        path = f"/v1/session/{session_id}/task/{task.task_hash}"
        self._host.send(HttpCall(method="DELETE", path=path, purpose="drop", ref=task.task_hash))

    def forget_pending(self, task: PendingTaskInfo) -> None:
        """``task`` is being resumed: it is no longer pending."""
        self.pending_tasks = [t for t in self.pending_tasks if t is not task]

    # ------------------------------------------------------------ answers

    def pending_list(self, frame: PendingList) -> None:
        """A pending list of this session, or of its origin (every session of it)."""
        origin = origin_of(self._host.session_id)
        if frame.origin:
            if frame.origin != origin:
                return
        elif frame.session_id != self._host.session_id:
            return
        self.pending_tasks = list(frame.tasks)
        where = f"your {origin} sessions" if frame.origin else "this session"
        if self._announce_pending:
            self._announce_pending = False
            if frame.tasks:
                waits = "waits" if len(frame.tasks) == 1 else "wait"
                self._host.write(
                    f"{plural(len(frame.tasks), 'paused task')} {waits} in {where} — "
                    "/pending lists them, /pending N resumes one",
                    "class:warn",
                )
        if not self._show_pending:
            return
        self._show_pending = False
        write = self._host.write
        if not frame.tasks:
            write(f"no pending tasks in {where}", "class:dim")
            return
        write("pending tasks (/pending N resumes, /pending drop N drops):", "class:dim")
        now = time.time()
        for number, task in enumerate(frame.tasks, 1):
            flags = " [question]" if task.has_questions else ""
            flags += " [background]" if task.has_jobs else ""
            place = ""
            if task.session_id:
                here = task.session_id == self._host.session_id
                session = "this session" if here else task.session_id
                place = f"{session}  {age_text(now - task.updated_at)} ago  "
            write(f"  {number}. {task.task_hash[:8]}  {place}{clip(task.objective, 80)}{flags}")
            if task.failure:
                write(f"     stopped: {clip(task.failure, 100)}", "class:error")

    def allowed_list(self, frame: AllowedList) -> None:
        """The home's remembered rules (R76, R92), each by what it covers (its
        ``covers`` line, the words its confirmation offered) and since when; shown
        faithfully: newlines and invisible characters escaped
        (`agentrio.protocol.faithful`)."""
        if frame.session_id != self._host.session_id:
            return
        self.allowed_rules = list(frame.rules)
        if not self._show_allowed:
            return
        self._show_allowed = False
        write = self._host.write
        if self._forgetting is not None:
            self._forgot(frame.rules, frame.removed)
        if not frame.rules:
            write("no remembered rules: every command that needs one asks", "class:dim")
            return
        write(
            "always allowed in this home, kept across restarts (each rule covers only what "
            "it says; /allowed forget N removes one, /allowed forget all every one):",
            "class:dim",
        )
        for number, rule in enumerate(frame.rules, 1):
            write(f"  {number}. {covered(rule)}")
            write(f"       since {time.strftime('%Y-%m-%d %H:%M', time.localtime(rule.added_at))}")

    def _forgot(self, left: list[AllowedRule], removed: list[AllowedRule]) -> None:
        """Say which remembered rules a ``/allowed forget`` removed (they ask again):
        the daemon's ``removed``, or (an older daemon) those no longer listed."""
        assert self._forgetting is not None
        (before, ref), self._forgetting = self._forgetting, None
        kept = {rule.id for rule in left}
        gone = removed or [rule for rule in before if rule.id not in kept]
        write = self._host.write
        if not gone and ref != "all":
            write(f"nothing removed: no remembered rule {ref}", "class:warn")
        elif not gone:
            write("forgot every remembered rule: each command asks again", "class:dim")
        for rule in gone:
            write(f"forgot {covered(rule)} — it asks again from now on", "class:dim")

    def leg_list(self, frame: LegList) -> None:
        if frame.session_id != self._host.session_id:
            return
        self.legs = {leg.leg_id: leg for leg in frame.legs}
        if not self._show_legs:
            return
        self._show_legs = False
        write = self._host.write
        if not frame.legs:
            write("no background legs running", "class:dim")
            return
        write("background legs (Esc on an empty line opens the cancel menu):", "class:dim")
        now = time.time()
        for leg in frame.legs:
            age = max(0, int(now - leg.started_at))
            write(f"  {leg.leg_id}  {leg.state:<7} {age:>5}s  {clip(leg.label, 80)}")

    def http_result(self, result: HttpResult) -> None:
        """The answer to an HTTP call of these lists (drop, history), or its error."""
        if result.call.purpose == recent.PURPOSE:  # asked for at start, not by the person
            if result.status == 200:
                recent.show_recent(self._host.write, result)
            return
        if result.status == 0:
            self._host.set_notice(f"request failed: {result.error}")
            return
        if result.status >= 400:
            try:
                body: ErrorBody = structure(result.body, ErrorBody)
                message = body.error.message
            except FrameDecodeError:
                message = f"HTTP {result.status}"
            self._host.set_notice(message)
            return
        match result.call.purpose:
            case "drop":
                ref = result.call.ref
                self.pending_tasks = [t for t in self.pending_tasks if t.task_hash != ref]
                self._host.write(f"dropped pending task {ref[:8]}", "class:dim")
            case "history":
                self._history(result)
            case "record":
                self._record(result)

    def _history(self, result: HttpResult) -> None:
        try:
            history: HistoryList = structure(result.body, HistoryList)
        except FrameDecodeError as exc:
            self._host.set_notice(f"unexpected history reply: {exc}")
            return
        ref = result.call.ref
        keyword = f" matching {ref!r}" if ref else ""
        tasks = history.tasks
        if _TASK_ID_PREFIX.fullmatch(ref):
            word = ref.lower()
            tasks = [
                t for t in tasks if t.task_hash.startswith(word) or word in t.objective.lower()
            ]
            tasks = tasks[:20]
        self.history_tasks = [entry.task_hash for entry in tasks]
        write = self._host.write
        if not tasks:
            write(f"no finished tasks{keyword}", "class:dim")
            return
        write(f"recent tasks{keyword} (/history show N opens one's record):", "class:dim")
        for number, entry in enumerate(tasks, 1):
            when = time.strftime("%m-%d %H:%M", time.localtime(entry.end_at))
            objective = clip(entry.objective, 80)
            write(f"  {number}. {when}  {entry.task_hash[:8]}  {entry.status:<8} {objective}")

    def _record(self, result: HttpResult) -> None:
        try:
            record: HistoryRecord = structure(result.body, HistoryRecord)
        except FrameDecodeError as exc:
            self._host.set_notice(f"unexpected record reply: {exc}")
            return
        write = self._host.write
        write(f"record of task {record.task_hash[:8]}:", "class:dim")
        for line in record.content.splitlines():
            write(f"  {line}")
