"""The Redis store: the `agentrio.engine.store.base.Store` interface on a Redis server, for
several daemons sharing one state (issue 21, docs/deployment.md).

Why this shape:

- **coredis on Trio.** coredis is built on anyio, so it runs inside the daemon's Trio
  loop as is: no thread, no asyncio bridge. Its connection pool keeps its connections
  in an anyio task group, which is why the store is opened as an async context
  (`open_redis_store`, `agentrio.engine.store.redis_client`): the pool lives as long as the
  store.
- **One write, one Lua script** (`agentrio.engine.store.redis_lua`). Redis runs a script with
  nothing interleaved, so each write is all or nothing, and the claim of R37 (read the
  marker, take the task, optionally move it to a new hash, set the markers) is one
  atomic step across every daemon sharing the server: of N concurrent claims exactly
  one wins.
- **Markers keep the interface's clock.** The caller passes ``now`` and
  ``expires_at`` (`agentrio.engine.markers`, R51); liveness is decided by comparing them, like
  SQLite's ``markers`` table, here a sorted set scored by ``expires_at``. Each marker is
  also a Redis key ``<prefix>m:action:<session>:<hash>`` holding its ``expires_at``,
  with a Redis TTL ``MARKER_GC_GRACE_S`` past it: ``redis-cli TTL`` shows a daemon's
  live tasks, and a marker nobody deletes disappears by itself. The grace keeps a small
  clock skew between a daemon and the Redis server from ending a marker early.
- **Same rows, same order, same search** as SQLite: the listings sort the same way,
  and the history keyword search folds case with Python's ``str.casefold`` (Unicode
  aware), done here rather than in Lua, page by page, newest first. Like SQLite, the
  store keeps every history row (there is no cap); a session's pending rows are few.
- **Redis unavailable** is `agentrio.engine.store.base.StoreUnavailable` (a 503 ``unavailable``,
  the shape of `StoreFull`); Redis out of memory (``maxmemory``) is `StoreFull`. Calls
  are not retried by the client: a claim whose reply was lost must not be sent twice
  (the second would see the first's marker and report a conflict to the winner).
- **No secret in an error or a log** (R73): errors carry the operation's name and
  Redis's own message, which never quotes arguments; ``put_secret`` carries neither.

Keys are under a configurable prefix (``[store] prefix``), so several independent
deployments can share one server. Supported URLs: ``redis://``, ``rediss://`` (TLS),
``unix://`` and ``redis+sentinel://`` (`agentrio.engine.store.redis_client`). The scripts build
key names from the prefix, so Redis Cluster is not supported (docs/deployment.md).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any, Final

import attrs
import coredis
import coredis.exceptions
import trio

from agentrio.engine.conversation import StoredConversation, Summary, exchange_of
from agentrio.engine.errors import BadRequest, Conflict, NotFound
from agentrio.engine.messages import CONFLICT_RUNNING
from agentrio.engine.store import redis_lua as lua
from agentrio.engine.store.base import (
    HistoryRow,
    StoreError,
    StoreFull,
    StoreStatistics,
    StoreUnavailable,
    TaskRow,
)
from agentrio.engine.store.redis_client import open_client
from agentrio.protocol.codec import structure, unstructure
from agentrio.protocol.events import Question
from agentrio.protocol.rules import AllowedRule

__all__ = ["DEFAULT_PREFIX", "MARKER_GC_GRACE_S", "RedisStore", "open_redis_store"]

log = logging.getLogger(__name__)

#: The key prefix when ``[store] prefix`` is not set.
DEFAULT_PREFIX: Final = "agentrio:"
#: Seconds a marker key outlives its ``expires_at`` in Redis (clock-skew margin).
MARKER_GC_GRACE_S: Final = 60.0
#: Seconds between `RedisStore.maintain`'s purges of expired markers.
PURGE_INTERVAL_S: Final = 60.0
#: History rows read per round trip by a keyword search.
HISTORY_PAGE: Final = 200
#: Seconds to connect, and to wait for one reply, before Redis counts as unavailable.
CONNECT_TIMEOUT_S: Final = 5.0
REPLY_TIMEOUT_S: Final = 10.0


def _num(value: float) -> str:
    """A float as Redis and Lua read it back exactly."""
    return repr(float(value))


def _gc_at_ms(expires_at: float) -> str:
    """The Redis expiry (Unix ms) of a marker key, or '' (no Redis TTL) when
    ``expires_at`` is not a wall-clock time still ahead (a test's mock clock)."""
    gc = expires_at + MARKER_GC_GRACE_S
    return str(int(gc * 1000)) if gc > time.time() else ""


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _task_args(row: TaskRow) -> list[str]:
    """The fields of ``row`` as `redis_lua` ``put`` takes them (from ``body`` on)."""
    body = {
        "objective": row.objective,
        "model": row.model,
        "questions": unstructure(row.questions),
        "has_jobs": row.has_jobs,
        "ask_id": row.ask_id,
        # Listings leave the snapshot out; they show why a failed task was kept.
        "failure": row.failure,
    }
    return [
        _dumps(body),
        "" if row.snapshot is None else _dumps(row.snapshot),
        row.state,
        _num(row.created_at),
        _num(row.updated_at),
        row.origin,
        row.resumed_from or "",
    ]


def _task_row(fields: Sequence[str]) -> tuple[TaskRow, bool]:
    """A row of `redis_lua` ``row`` as a `TaskRow`, and whether its marker is live."""
    sid, task_hash, body_json, state, created, updated, resumed, snap, live, origin = fields
    body = json.loads(body_json)
    questions: list[Question] = structure(body["questions"], list[Question])
    row = TaskRow(
        session_id=sid,
        task_hash=task_hash,
        state=state,  # type: ignore[arg-type]  # validated by TaskRow
        objective=body["objective"],
        origin=origin,
        model=body["model"],
        created_at=float(created),
        updated_at=float(updated),
        snapshot=json.loads(snap) if snap else None,
        questions=questions,
        has_jobs=bool(body["has_jobs"]),
        ask_id=body["ask_id"],
        resumed_from=resumed or None,
        listed_failure=body.get("failure", ""),
    )
    return row, live == "1"


def _history_json(row: HistoryRow) -> str:
    return _dumps(attrs.asdict(row))


def _history_row(text: str) -> HistoryRow:
    return HistoryRow(**json.loads(text))


@asynccontextmanager
async def open_redis_store(
    url: str,
    *,
    prefix: str = DEFAULT_PREFIX,
    connect_timeout_s: float | None = CONNECT_TIMEOUT_S,
    reply_timeout_s: float | None = REPLY_TIMEOUT_S,
) -> AsyncIterator[RedisStore]:
    """``async with open_redis_store(url) as store:`` — the pool lives inside.

    Opening does not need Redis to answer: a daemon starts with Redis down, reports it
    in ``/v1/health`` and answers 503 until it returns. ``None`` timeouts wait forever
    (tests under a mock clock, whose autojump would otherwise fire them).
    """
    async with open_client(
        url, connect_timeout_s=connect_timeout_s, reply_timeout_s=reply_timeout_s
    ) as client:
        store = RedisStore(client, prefix=prefix)
        try:
            yield store
        finally:
            store.mark_closed()


class RedisStore:
    """The Redis implementation of `agentrio.engine.store.base.Store`; open it with
    `open_redis_store`. Several daemons may share one (same URL and prefix)."""

    #: The ``[store] backend`` name (``/v1/health``).
    backend: Final = "redis"

    def __init__(self, client: coredis.Redis[str], *, prefix: str) -> None:
        self._client = client
        self._prefix = prefix
        self._closed = False
        self._writes = 0
        self._batches = 0
        self._scripts = {
            name: client.register_script(getattr(lua, name))
            for name in lua.__all__  # every script of the module
        }

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<RedisStore prefix={self._prefix!r} {state}>"

    @property
    def client(self) -> coredis.Redis[str]:
        """The coredis client: the daemons' message bus (`agentrio.engine.server.peers`) runs
        on the store's own pool."""
        return self._client

    async def request(self, op: str, request: Callable[[], Awaitable[Any]]) -> Any:
        """Await one Redis request of someone else's (the message bus); its failures
        become `StoreError`, like the store's own."""
        return await self._call(op, request)

    @property
    def prefix(self) -> str:
        return self._prefix

    def mark_closed(self) -> None:
        self._closed = True

    async def _script(self, op: str, name: str, *args: str, write: bool = True) -> Any:
        """Run script ``name`` with ``args`` after the prefix; errors become
        `StoreError` (see the module docstring)."""
        result = await self._call(op, lambda: self._scripts[name](args=[self._prefix, *args]))
        if write:
            self._batches += 1
            self._writes += 1
        return result

    async def _call(self, op: str, request: Callable[[], Awaitable[Any]]) -> Any:
        """Make and await one Redis request; its failures become `StoreError` (see the
        module docstring)."""
        if self._closed:
            raise trio.ClosedResourceError("the store is closed")
        try:
            return await request()
        except (coredis.exceptions.ConnectionError, TimeoutError, OSError) as exc:
            raise StoreUnavailable(f"redis store unavailable ({op}): {_why(exc)}") from None
        except coredis.exceptions.RedisError as exc:
            words = "" if op == "put_secret" else f": {_why(exc)}"
            if str(exc).startswith("OOM"):
                raise StoreFull(f"redis store is full ({op}){words}") from None
            raise StoreError(f"redis store failed ({op}){words}") from None

    async def ping(self) -> None:
        """Raise `StoreUnavailable` unless Redis answers now (``/v1/health``)."""
        try:
            await self._call("ping", lambda: self._client.ping())
        except StoreUnavailable:
            raise
        except StoreError as exc:  # e.g. a wrong password
            raise StoreUnavailable(str(exc)) from None

    # -- pending tasks -------------------------------------------------------------

    async def put_task(
        self, row: TaskRow, *, marker_expires_at: float | None = None, latest: bool = False
    ) -> None:
        marker = (
            ("", "")
            if marker_expires_at is None
            else (
                _num(marker_expires_at),
                _gc_at_ms(marker_expires_at),
            )
        )
        await self._script(
            "put_task",
            "PUT_TASK",
            row.session_id,
            row.task_hash,
            *_task_args(row),
            *marker,
            "1" if latest else "0",
        )

    async def get_task(self, session_id: str, task_hash: str) -> TaskRow | None:
        rows = await self._rows("get_task", "task", session_id, snapshot=True, task_hash=task_hash)
        return rows[0] if rows else None

    async def latest_task(self, session_id: str) -> str | None:
        found = await self._call(
            "latest_task", lambda: self._client.hget(self._prefix + "latest", session_id)
        )
        return None if found is None else str(found)

    async def session_ids(self, prefix: str, *, limit: int) -> list[str]:
        """See `agentrio.engine.store.base.Store.session_ids`."""
        found = await self._call("session_ids", lambda: self._client.hkeys(self._prefix + "latest"))
        return sorted(str(k) for k in found if str(k).startswith(prefix))[:limit]

    async def delete_task(self, session_id: str, task_hash: str) -> bool:
        return bool(await self._script("delete_task", "DELETE_TASK", session_id, task_hash))

    async def list_tasks(self, session_id: str) -> list[TaskRow]:
        return await self._rows("list_tasks", "session", session_id, snapshot=True)

    async def list_parked(self) -> list[TaskRow]:
        return await self._rows("list_parked", "parked", "", snapshot=True)

    async def list_resumable(self, session_id: str, *, now: float) -> list[TaskRow]:
        rows = await self._rows("list_resumable", "session", session_id, now=now)
        return _newest_updated_first(rows)

    async def list_resumable_by_origin(
        self, origin: str, *, now: float, limit: int
    ) -> list[TaskRow]:
        """See `agentrio.engine.store.base.Store.list_resumable_by_origin`."""
        rows = await self._rows("list_resumable_by_origin", "origin", origin, now=now)
        return _newest_updated_first(rows)[: max(limit, 0)]

    async def _rows(
        self,
        op: str,
        mode: str,
        name: str,
        *,
        snapshot: bool = False,
        now: float | None = None,
        task_hash: str = "",
    ) -> list[TaskRow]:
        """Rows of one listing (`redis_lua.LIST_ROWS`), oldest created first; with
        ``now``, only those whose marker is not live then."""
        raw = await self._script(
            op,
            "LIST_ROWS",
            mode,
            name,
            "1" if snapshot else "0",
            "" if now is None else _num(now),
            task_hash,
            write=False,
        )
        rows = []
        for fields in raw:
            row, live = _task_row(fields)
            if now is None or not live:
                rows.append(row)
        return rows

    async def claim(
        self,
        session_id: str,
        task_hash: str,
        *,
        now: float,
        ttl: float,
        new_task_hash: str | None = None,
    ) -> TaskRow:
        """See `agentrio.engine.store.base.Store.claim` (R36, R37): one Lua script, which Redis
        runs with nothing interleaved, decides and writes."""
        expires_at = now + ttl
        result = await self._script(
            "claim",
            "CLAIM",
            session_id,
            task_hash,
            _num(now),
            _num(expires_at),
            _gc_at_ms(expires_at),
            new_task_hash or "",
            write=False,
        )
        status = result[0]
        self._batches += 1  # like SQLite: a refused claim took a transaction, wrote nothing
        if status == "ok":
            self._writes += 1
        if status == "conflict":
            raise Conflict(CONFLICT_RUNNING)
        if status == "notfound":
            raise NotFound(f"unknown pending task {task_hash}")
        if status == "taken":
            raise Conflict(f"task hash {new_task_hash} is already in use")
        row, _ = _task_row(result[1:])
        return row

    # -- markers -------------------------------------------------------------------

    async def set_marker(self, key: str, *, expires_at: float) -> None:
        await self._script("set_marker", "SET_MARKER", key, _num(expires_at), _gc_at_ms(expires_at))

    async def delete_marker(self, key: str) -> None:
        await self._script("delete_marker", "DELETE_MARKER", key)

    async def marker_alive(self, key: str, *, now: float) -> bool:
        score = await self._call(
            "marker_alive", lambda: self._client.zscore(self._prefix + "markers", key)
        )
        return score is not None and float(score) > now

    async def purge_expired_markers(self, *, now: float) -> int:
        return int(await self._script("purge_expired_markers", "PURGE_MARKERS", _num(now)))

    # -- history -------------------------------------------------------------------

    async def add_history(self, row: HistoryRow) -> None:
        await self._script(
            "add_history",
            "ADD_HISTORY",
            row.session_id,
            row.task_hash,
            _history_json(row),
            _num(row.end_at),
        )

    async def end_run(
        self, session_id: str, task_hash: str, *, history: HistoryRow | None, keep: TaskRow | None
    ) -> None:
        history_args = ["0", *[""] * 4]
        if history is not None:
            history_args = [
                "1",
                history.session_id,
                history.task_hash,
                _history_json(history),
                _num(history.end_at),
            ]
        keep_args = ["0", *[""] * 9]
        if keep is not None:
            keep_args = ["1", keep.session_id, keep.task_hash, *_task_args(keep)]
        await self._script("end_run", "END_RUN", session_id, task_hash, *history_args, *keep_args)

    async def list_history(
        self, session_id: str, *, keyword: str = "", limit: int = 50
    ) -> list[HistoryRow]:
        """Newest ``end_at`` first (ties: the later written first); a negative
        ``limit`` is a `BadRequest`, ``0`` gives an empty list."""
        if limit < 0:
            raise BadRequest(f"limit must be 0 or more, got {limit}")
        needle = keyword.casefold()
        found: list[HistoryRow] = []
        start = 0
        page = limit if not keyword else max(limit, HISTORY_PAGE)
        while len(found) < limit:
            texts = await self._script(
                "list_history",
                "HISTORY_PAGE",
                session_id,
                str(start),
                str(start + page - 1),
                write=False,
            )
            for text in texts:
                if text is None:
                    continue
                row = _history_row(text)
                if (
                    not keyword
                    or needle in row.objective.casefold()
                    or (needle in row.content.casefold())
                ):
                    found.append(row)
            if len(texts) < page:
                break
            start += page
        return found[:limit]

    async def get_history(self, session_id: str, task_hash: str) -> HistoryRow | None:
        text = await self._call(
            "get_history", lambda: self._client.hget(self._prefix + "hrow:" + session_id, task_hash)
        )
        return None if text is None else _history_row(str(text))

    # -- conversation ------------------------------------------------------------------
    # The exchange rides in the history row's JSON: the newest rows are the tail.

    async def conversation(
        self, session_id: str, *, limit: int, folded: bool = False
    ) -> StoredConversation:
        text = await self._call(
            "conversation", lambda: self._client.get(self._prefix + "summary:" + session_id)
        )
        summary = None if text is None else Summary(**json.loads(text))
        after = -1.0 if summary is None or folded else summary.upto
        exchanges = [
            exchange_of(row.task_hash, row.end_at, row.exchange)
            for row in await self.list_history(session_id, limit=limit)
            if row.exchange and row.end_at > after
        ]
        return StoredConversation(summary=summary, exchanges=exchanges[::-1])

    async def put_summary(self, session_id: str, summary: Summary) -> None:
        key = self._prefix + "summary:" + session_id
        await self._call(
            "put_summary", lambda: self._client.set(key, _dumps(attrs.asdict(summary)))
        )
        self._writes += 1
        self._batches += 1

    # -- working directories (R86) -------------------------------------------------

    async def session_workdir(self, session_id: str) -> str | None:
        key = self._prefix + "workdir"
        found = await self._call("session_workdir", lambda: self._client.hget(key, session_id))
        return None if found is None else str(found)

    async def put_session_workdir(self, session_id: str, path: str) -> None:
        key = self._prefix + "workdir"
        await self._call("put_session_workdir", lambda: self._client.hset(key, {session_id: path}))
        self._writes += 1
        self._batches += 1

    # -- secrets -------------------------------------------------------------------

    async def put_secret(self, session_id: str, key: str, value: str) -> None:
        await self._script("put_secret", "PUT_SECRET", session_id, key, value)

    async def get_secret(self, session_id: str, key: str) -> str | None:
        value = await self._call(
            "get_secret", lambda: self._client.hget(self._prefix + "s:" + session_id, key)
        )
        return None if value is None else str(value)

    async def secret_keys(self, session_id: str) -> list[str]:
        keys = await self._call(
            "secret_keys", lambda: self._client.hkeys(self._prefix + "s:" + session_id)
        )
        return sorted(str(k) for k in keys)

    # -- remembered rules (R92) -----------------------------------------------------

    async def put_rule(self, rule: AllowedRule) -> None:
        body = _dumps(unstructure(rule))
        await self._call(
            "put_rule", lambda: self._client.hset(self._prefix + "rules", {rule.id: body})
        )
        self._writes += 1
        self._batches += 1

    async def list_rules(self) -> list[AllowedRule]:
        found = await self._call("list_rules", lambda: self._client.hvals(self._prefix + "rules"))
        return _oldest_rules_first(found)

    async def delete_rules(self, rule_id: str) -> list[AllowedRule]:
        return _oldest_rules_first(await self._script("delete_rules", "DELETE_RULES", rule_id))

    # -- lifecycle -----------------------------------------------------------------

    async def statistics(self, *, now: float | None = None) -> StoreStatistics:
        at = time.time() if now is None else now
        tasks, history, markers, secrets = await self._script(
            "statistics", "STATISTICS", _num(at), write=False
        )
        return StoreStatistics(
            tasks=int(tasks),
            history=int(history),
            markers_live=int(markers),
            secrets=int(secrets),
            writes_total=self._writes,
            write_batches=self._batches,
        )

    async def maintain(self, *, interval_s: float = PURGE_INTERVAL_S) -> None:
        """Every ``interval_s``, drop the markers that expired by the wall clock from
        the markers index, until cancelled: their Redis keys vanish by their TTL, and
        this keeps the index bounded too. A failure (Redis down) is logged and the
        next pass tries again."""
        while True:
            await trio.sleep(interval_s)
            try:
                purged = await self.purge_expired_markers(now=time.time())
            except StoreError as exc:
                log.warning("redis store: purging expired markers failed: %s", exc)
            else:
                if purged:
                    log.debug("redis store: purged %d expired marker(s)", purged)

    async def aclose(self) -> None:
        """Mark the store closed (idempotent); the pool itself closes when
        `open_redis_store`'s context ends."""
        self._closed = True


def _oldest_rules_first(bodies: Sequence[Any]) -> list[AllowedRule]:
    rules: list[AllowedRule] = [structure(json.loads(str(b)), AllowedRule) for b in bodies]
    return sorted(rules, key=lambda r: (r.added_at, r.id))


def _newest_updated_first(rows: list[TaskRow]) -> list[TaskRow]:
    return sorted(rows, key=lambda r: (-r.updated_at, r.task_hash))


def _why(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
