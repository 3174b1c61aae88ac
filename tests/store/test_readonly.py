"""The read-only opener `mem stats`, `sources`, `source` and `serve` use."""

from __future__ import annotations

import sqlite3

import pytest

from crossmodalrag.errors import StoreError
from crossmodalrag.store import open_store
from crossmodalrag.store.readonly import open_reader


def test_a_database_another_process_holds_exclusively_is_locked_not_foreign(tmp_path):
    db = tmp_path / "m.db"
    open_store(db).close()
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("PRAGMA locking_mode = EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")
    holder.execute(
        "INSERT INTO queries_eval (query_text, expected_source_uris, created_at, updated_at) VALUES ('q', '[]', 0, 0)"
    )
    try:
        with pytest.raises(StoreError, match="stayed locked by another process"):  # not "run `mem init-db`"
            open_reader(db, busy_timeout=0.1)
    finally:
        holder.close()
