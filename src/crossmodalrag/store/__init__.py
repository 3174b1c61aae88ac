"""The store: one SQLite file, the single source of truth."""

from crossmodalrag.store.connection import Store, open_store

__all__ = ["Store", "open_store"]
