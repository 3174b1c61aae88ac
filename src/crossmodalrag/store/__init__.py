"""The store: one SQLite file by default, or a PostgreSQL server (CMRAG_DB_URL): one interface."""

from __future__ import annotations

from typing import TYPE_CHECKING

from crossmodalrag.store.connection import Store, open_store

if TYPE_CHECKING:
    from crossmodalrag.config import Settings
    from crossmodalrag.store.migrations import Progress

__all__ = ["Store", "open_store", "open_configured_store"]


def open_configured_store(settings: "Settings", create: bool = True, progress: "Progress | None" = None) -> Store:
    """The configured backend: PostgreSQL when settings.db_url is set, else the SQLite file at db_path.
    Raises StoreError (see open_store / open_postgres_store), MissingExtraError without the postgres extra."""
    if settings.db_url:
        from crossmodalrag.store.postgres import open_postgres_store

        store = open_postgres_store(settings.db_url, settings.db_owner, create, settings.db_statement_timeout)
        store.local_path = settings.db_path
        return store
    return open_store(settings.db_path, create=create, progress=progress)
