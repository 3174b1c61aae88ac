"""The CLI's side of the PostgreSQL backend: which commands run there so far."""

from __future__ import annotations

import os

from crossmodalrag.errors import StoreError

# Commands whose whole code path runs on PostgreSQL (tests/store/test_postgres_cli.py). The others
# (sync/watch, serve, mcp, chat, backup/restore, the hierarchy, agent memory and versioning commands)
# still use SQLite-only SQL: they are refused rather than silently run against the SQLite file.
PORTED = {"init-db", "ingest-notes", "ingest-git", "ask", "reindex-embeddings", "forget", "doctor"}


def refuse_unported(command: str) -> None:
    """Raise StoreError if CMRAG_DB_URL selects PostgreSQL and `command` does not run there yet."""
    if command in PORTED or not _postgres_selected():
        return
    raise StoreError(
        f"`mem {command}` does not run on PostgreSQL yet (CMRAG_DB_URL is set)",
        "unset CMRAG_DB_URL to use the SQLite memory; docs/scaling.md lists what PostgreSQL runs so far",
    )


def _postgres_selected() -> bool:
    from crossmodalrag.config import load_settings

    return bool(os.environ.get("CMRAG_DB_URL") or load_settings().db_url)
