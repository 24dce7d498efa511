"""The values the store keeps and the `Store` protocol every backend implements.

The store is the only place state outlives a process (DESIGN "store"): pending tasks
with their snapshots, online markers (R50, R51), task history, secrets and the home's
remembered rules (R92). Every method
is async and never blocks the Trio thread (SQLite works in a worker thread, Redis over
non-blocking sockets); every write is one transaction (a Lua script on Redis), so a
``kill -9`` at any moment leaves a store that loads (R72).

Time is never read inside the store: callers pass ``now`` (wall-clock seconds) so that
marker expiry follows whatever clock the caller trusts, and tests can use a mock one.
(The Redis store reads the wall clock only to give marker keys a Redis TTL, which
collects them; whether a marker is live never depends on it.)
"""

from __future__ import annotations

from typing import Any, Literal, Protocol

import attrs

from agentrio.engine.conversation import StoredConversation, Summary
from agentrio.engine.errors import AgentrioError
from agentrio.protocol.errors import ErrorCode
from agentrio.protocol.events import Question
from agentrio.protocol.frames import PendingTaskInfo
from agentrio.protocol.rules import AllowedRule

__all__ = [
    "HistoryRow",
    "Store",
    "StoreError",
    "StoreFull",
    "StoreStatistics",
    "StoreUnavailable",
    "StoreUnreadable",
    "TaskRow",
    "failure_of",
    "marker_key",
]

TaskState = Literal["running", "parked", "interrupted"]
HistoryStatus = Literal["finished", "failed", "canceled"]


class StoreError(AgentrioError):
    """The backend failed underneath (disk full, corrupt file, newer schema).

    The message names the operation and the backend's own words, never a value that
    was being written: a secret cannot leak through it (R73).
    """


class StoreFull(StoreError):
    """The disk holding the store is full: nothing of the write was kept.

    A 503, not a 500: the daemon is sound and recovers by itself once space returns
    (SQLite rolls the transaction back and the next write simply succeeds), so a client
    may retry later (issue 18).
    """

    code = ErrorCode.UNAVAILABLE
    status = 503


class StoreUnavailable(StoreError):
    """The store's server cannot be reached (the Redis backend, issue 21): nothing of
    the write was kept.

    A 503 like `StoreFull`: the daemon keeps running and recovers by itself when the
    server returns, so a client may retry later.
    """

    code = ErrorCode.UNAVAILABLE
    status = 503


class StoreUnreadable(StoreError):
    """The store file is not a database SQLite can read (corrupt, or another file):
    a start-up error whose message names the file and the fix."""


def marker_key(session_id: str, task_hash: str) -> str:
    """The online marker of a task: ``action:<session_id>:<task_hash>`` (R51)."""
    return f"action:{session_id}:{task_hash}"


def failure_of(snapshot: dict[str, Any] | None) -> str:
    """A stored snapshot's ``failure`` (`agentrio.engine.snapshot.Snapshot`)."""
    return str((snapshot or {}).get("failure", ""))


@attrs.frozen(kw_only=True)
class TaskRow:
    """A pending task: one that stopped before finishing, or one that runs now.

    ``state`` is what the task last said about itself; whether it *is* running is
    decided by its marker, not by ``state``: a ``running`` row whose marker expired
    belongs to a daemon that died, and is resumable (R51, R72).

    ``snapshot`` is the JSON form of `agentrio.engine.snapshot.Snapshot` (or ``None`` before
    the first one is written); ``questions`` are the saved questions of a parked task;
    ``ask_id`` names the registry entry that offers them to listeners (R11);
    ``resumed_from`` is the hash this task was moved from on resume (R36).
    """

    session_id: str
    task_hash: str
    state: TaskState = attrs.field(
        validator=attrs.validators.in_(("running", "parked", "interrupted"))
    )
    objective: str
    origin: str
    model: str
    created_at: float
    updated_at: float
    snapshot: dict[str, Any] | None
    questions: list[Question]
    has_jobs: bool = False
    ask_id: str | None = None
    resumed_from: str | None = None
    #: A listing's copy of the snapshot's ``failure``: listings leave the snapshot out
    #: (`failure`).
    listed_failure: str = ""

    @property
    def failure(self) -> str:
        """Why a task whose model kept failing was kept (issue 31 item 6), empty for
        any other: its snapshot's ``failure``, or a listing's copy of it."""
        return failure_of(self.snapshot) if self.snapshot is not None else self.listed_failure

    def info(self, *, with_session: bool = False) -> PendingTaskInfo:
        """The row as ``GET /v1/pending`` lists it (``session_id`` only across sessions)."""
        return PendingTaskInfo(
            session_id=self.session_id if with_session else "",
            task_hash=self.task_hash,
            objective=self.objective,
            has_questions=bool(self.questions),
            questions=list(self.questions),
            updated_at=self.updated_at,
            has_jobs=self.has_jobs,
            failure=self.failure,
        )


@attrs.frozen(kw_only=True)
class HistoryRow:
    """One ended run, as ``chat_history`` and ``GET …/task/history`` show it.

    ``content`` is the run's full action record; it never holds a secret (R73).
    """

    session_id: str
    task_hash: str
    end_at: float
    objective: str
    model: str
    reasoning: str
    status: HistoryStatus = attrs.field(
        validator=attrs.validators.in_(("finished", "failed", "canceled"))
    )
    content: str
    #: The run's part of the session's conversation (`agentrio.engine.conversation`,
    #: `exchange_json`), stored with the row; empty: none. Rows read back from
    #: `Store.list_history` may come without it.
    exchange: str = ""


@attrs.frozen(kw_only=True)
class StoreStatistics:
    """Counts for ``/v1/health`` and the REPL toolbar.

    ``markers_live`` counts markers not expired at the time asked about;
    ``writes_total`` counts the writes this store object committed since it was opened
    (not persisted); a group commit of several writes counts each of them, and
    ``write_batches`` counts the transactions they took.
    """

    tasks: int
    history: int
    markers_live: int
    secrets: int
    writes_total: int
    write_batches: int


class Store(Protocol):
    """What the engine needs from a store; `agentrio.engine.store.sqlite.SqliteStore` is the
    embedded default, `agentrio.engine.store.redis_store.RedisStore` the one several daemons can
    share (``[store] backend = "redis"``, docs/deployment.md).

    Errors: `agentrio.engine.errors.NotFound` and `agentrio.engine.errors.Conflict` where
    documented,
    `StoreError` when the backend fails, `trio.ClosedResourceError` after `aclose`.
    """

    # -- pending tasks -------------------------------------------------------------

    async def put_task(
        self, row: TaskRow, *, marker_expires_at: float | None = None, latest: bool = False
    ) -> None:
        """Insert or replace the row named by ``(row.session_id, row.task_hash)``.

        With ``marker_expires_at``, the task's online marker is set to expire then, in
        the same transaction (a run starting: stored and alive in one write). With
        ``latest``, the task becomes its session's latest task (`latest_task`), in the
        same transaction too."""
        ...

    async def get_task(self, session_id: str, task_hash: str) -> TaskRow | None: ...

    async def latest_task(self, session_id: str) -> str | None:
        """The task most recently started in the session, or None before its first.

        R36 decides with it whether a resume moves to a new hash. It is kept here, not
        only in the session's memory, because a session with nothing to do is dropped
        from memory (`agentrio.engine.sessions.SessionRegistry`) and rebuilt on its next use."""
        ...

    async def session_ids(self, prefix: str, *, limit: int) -> list[str]:
        """The sessions whose id starts with ``prefix`` that ever started a task (those
        with a `latest_task`), sorted, at most ``limit``: the web page's session list
        (``GET /v1/sessions``, issue 33 item 11)."""
        ...

    async def delete_task(self, session_id: str, task_hash: str) -> bool:
        """Drop a pending task; ``False`` when there was none. Its marker is left alone."""
        ...

    async def list_tasks(self, session_id: str) -> list[TaskRow]:
        """Every row of the session, running or not, oldest created first."""
        ...

    async def list_parked(self) -> list[TaskRow]:
        """Every parked row of every session, oldest created first (a restarted engine
        offers their questions to listeners again, R11)."""
        ...

    async def list_resumable(self, session_id: str, *, now: float) -> list[TaskRow]:
        """Rows whose marker is not live at ``now``, newest ``updated_at`` first.

        A row in state ``running`` whose marker expired is included: its daemon died
        without saying so (R45, R51, R72). The rows come without their ``snapshot``
        (``None``): listing never needs it, and it is most of a row's size; `get_task`
        and `claim` return it.
        """
        ...

    async def list_resumable_by_origin(
        self, origin: str, *, now: float, limit: int
    ) -> list[TaskRow]:
        """`list_resumable` across every session whose origin is ``origin`` (a reopened
        REPL's ``cli-`` sessions), newest ``updated_at`` first, at most ``limit``."""
        ...

    async def claim(
        self,
        session_id: str,
        task_hash: str,
        *,
        now: float,
        ttl: float,
        new_task_hash: str | None = None,
    ) -> TaskRow:
        """Take a pending task for one run: the atomic compare-and-set of R37.

        In one transaction: the row must exist (else `NotFound`), its marker must not
        be live at ``now`` (else `Conflict` ``[Conflict] pending task: running``); then
        the row becomes ``running`` with ``updated_at = now`` and its marker is set to
        expire at ``now + ttl``. With ``new_task_hash`` the row moves to that hash with
        ``resumed_from`` set to the old one (R36), and both hashes get a live marker so
        that a concurrent resume of the old hash also sees the conflict.

        Exactly one of any number of concurrent claims wins, across processes sharing
        the store. Returns the claimed row under its final hash.
        """
        ...

    # -- markers (R50, R51) --------------------------------------------------------

    async def set_marker(self, key: str, *, expires_at: float) -> None: ...

    async def delete_marker(self, key: str) -> None: ...

    async def marker_alive(self, key: str, *, now: float) -> bool:
        """True when ``key`` exists and expires strictly after ``now``."""
        ...

    async def purge_expired_markers(self, *, now: float) -> int:
        """Delete markers that are not alive at ``now``; return how many."""
        ...

    # -- history -------------------------------------------------------------------

    async def add_history(self, row: HistoryRow) -> None:
        """Record an ended run; a second record for the same task replaces the first.

        The task's pending row, if any, is deleted in the same transaction: an ended
        task is never both in history and resumable, even when the process is killed
        between the two writes (R72)."""
        ...

    async def end_run(
        self, session_id: str, task_hash: str, *, history: HistoryRow | None, keep: TaskRow | None
    ) -> None:
        """The one write of a run's exit path, in one transaction: record ``history``
        (which drops the pending row, as `add_history`) or store ``keep`` (a parked or
        interrupted task stays resumable), and delete the task's online marker. With
        neither, only the marker is deleted."""
        ...

    async def list_history(
        self, session_id: str, *, keyword: str = "", limit: int = 50
    ) -> list[HistoryRow]:
        """Newest ``end_at`` first, at most ``limit`` rows; a non-empty ``keyword``
        keeps rows whose objective or content contains it, ignoring case."""
        ...

    async def get_history(self, session_id: str, task_hash: str) -> HistoryRow | None: ...

    # -- conversation (issue 31) -------------------------------------------------------

    async def conversation(
        self, session_id: str, *, limit: int, folded: bool = False
    ) -> StoredConversation:
        """The session's summary and the exchanges that ended after it, oldest first:
        the newest ``limit`` of them only (never the whole history). With ``folded``
        the exchanges the summary covers count too: what a reopened window shows of
        the session's last exchanges (`agentrio.engine.recent`), compacted or not."""
        ...

    async def put_summary(self, session_id: str, summary: Summary) -> None:
        """Replace the session's summary."""
        ...

    # -- working directories (R86) -------------------------------------------------

    async def session_workdir(self, session_id: str) -> str | None:
        """The session's working directory (a real path, as last stored), or None for
        a session that never had one (`agentrio.engine.workdirs`)."""
        ...

    async def put_session_workdir(self, session_id: str, path: str) -> None:
        """Replace the session's working directory."""
        ...

    # -- secrets (R60, R73) ----------------------------------------------------------

    async def put_secret(self, session_id: str, key: str, value: str) -> None: ...

    async def get_secret(self, session_id: str, key: str) -> str | None: ...

    async def secret_keys(self, session_id: str) -> list[str]:
        """The names of a session's secrets, sorted; never their values."""
        ...

    # -- remembered rules (R76, R92) --------------------------------------------------

    async def put_rule(self, rule: AllowedRule) -> None:
        """Keep ``rule`` (replacing one with its id): the home's, for every session and
        every later daemon of this store."""
        ...

    async def list_rules(self) -> list[AllowedRule]:
        """Every kept rule, oldest first (``added_at``, then id)."""
        ...

    async def delete_rules(self, rule_id: str) -> list[AllowedRule]:
        """Remove the rule ``rule_id``, or every rule for ``"all"``, in one write; the
        rules removed (none for an unknown id), oldest first."""
        ...

    # -- lifecycle -----------------------------------------------------------------

    async def statistics(self, *, now: float | None = None) -> StoreStatistics:
        """Counts; ``now`` (default: wall clock) decides which markers are live."""
        ...

    async def maintain(self) -> None:
        """Background upkeep off the write path, until cancelled (the engine's nursery
        runs it); a store that needs none returns at once."""
        ...

    async def aclose(self) -> None:
        """Close the store; idempotent, and it completes even when cancelled."""
        ...
