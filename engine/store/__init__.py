"""The store: the one place state outlives a process (pending tasks, markers, history,
secrets). `Store` is the protocol; `SqliteStore` the embedded default."""

from __future__ import annotations

from engine.store.base import HistoryRow as HistoryRow
from engine.store.base import Store as Store
from engine.store.base import StoreError as StoreError
from engine.store.base import StoreFull as StoreFull
from engine.store.base import StoreStatistics as StoreStatistics
from engine.store.base import StoreUnavailable as StoreUnavailable
from engine.store.base import TaskRow as TaskRow
from engine.store.base import marker_key as marker_key
from engine.store.sqlite import SqliteStore as SqliteStore
from engine.store.sqlite import open_sqlite_store as open_sqlite_store
from engine.store.sqlite import open_store as open_store

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
