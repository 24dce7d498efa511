"""The store: the one place state outlives a process (pending tasks, markers, history,
secrets). `Store` is the protocol; `SqliteStore` the embedded default."""

from __future__ import annotations

from agentrio.engine.store.base import HistoryRow as HistoryRow
from agentrio.engine.store.base import Store as Store
from agentrio.engine.store.base import StoreError as StoreError
from agentrio.engine.store.base import StoreFull as StoreFull
from agentrio.engine.store.base import StoreStatistics as StoreStatistics
from agentrio.engine.store.base import StoreUnavailable as StoreUnavailable
from agentrio.engine.store.base import TaskRow as TaskRow
from agentrio.engine.store.base import marker_key as marker_key
from agentrio.engine.store.sqlite import SqliteStore as SqliteStore
from agentrio.engine.store.sqlite import open_sqlite_store as open_sqlite_store
from agentrio.engine.store.sqlite import open_store as open_store

__all__ = [
    "HistoryRow",
    "SqliteStore",
    "Store",
    "StoreError",
    "StoreFull",
    "StoreStatistics",
    "StoreUnavailable",
    "TaskRow",
    "marker_key",
    "open_sqlite_store",
    "open_store",
]
