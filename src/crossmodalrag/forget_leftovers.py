"""What a forget cannot erase, and so names in its report: the files an ingest would read again, backups
made since the text was stored, the copies a running backup or restore is writing, and eval queries
whose gold names a forgotten source. Shared by the SQLite forget (forget.py) and PostgreSQL's
(store/postgres/erase.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from crossmodalrag.file_moves import stored_path
from crossmodalrag.forget_targets import StoredSource
from crossmodalrag.store import Store
from crossmodalrag.store.params import in_batches


def eval_queries_naming(store: Store, uris: set[str]) -> int:
    rows = store.conn.execute("SELECT expected_source_uris FROM queries_eval").fetchall()
    return sum(1 for (gold,) in rows if uris.intersection(json.loads(gold)))


def existing_backups(store: Store, since: float = 0.0) -> list[str]:
    """Backup files in the default backups folder, and those `mem backup` wrote elsewhere (its record
    beside the database), written since `since` (unix seconds): made before this forget, and not
    before the forgotten text was stored (an older one cannot hold it); and the vector caches beside them."""
    from crossmodalrag.store.backup import backups_dir
    from crossmodalrag.store.backup_places import remembered_backups

    beside = backups_beside(store)
    if beside is None:
        return []
    folder = backups_dir(beside)
    found = [p for p in folder.iterdir() if p.suffix != ".sha256" and p.name[0] != "."] if folder.is_dir() else []
    found += remembered_backups(beside)
    backups = [p for p in found if p.is_file() and p.stat().st_mtime >= since]
    # A vector cache an older mem wrote beside a backup it read (`<backup>.vectors/`): the backup's vectors.
    caches = [cache for p in backups if (cache := p.with_name(p.name + ".vectors")).is_dir()]
    return sorted({str(p) for p in backups + caches})


def backups_beside(store: Store) -> Path | None:
    """The path `mem backup` keeps backups/ and its record of other places beside: the SQLite file, or
    on PostgreSQL this client's CMRAG_DB_PATH (store/postgres/dump.py); None when unknown."""
    return store.path if store.backend == "sqlite" else getattr(store, "local_path", None)


def first_stored(store: Store, uris: list[str]) -> float:
    """When the change log first recorded any of these sources; 0 (any backup may hold them) when it
    lacks one of them (stored with versioning off), or has them only since versioning began (a
    genesis record: stored before that)."""
    first = None
    for part in in_batches(uris):
        at, genesis, recorded = store.conn.execute(
            # CASE, not MAX(op = 'genesis'): PostgreSQL has no MAX of a boolean
            "SELECT MIN(at), MAX(CASE WHEN op = 'genesis' THEN 1 ELSE 0 END), COUNT(DISTINCT target) FROM change_log"
            " WHERE kind = 'source'"
            f" AND target IN ({','.join('?' * len(part))})",
            part,
        ).fetchone()
        if genesis or recorded < len(set(part)):  # one stored unrecorded (versioning off): whenever
            return 0.0
        first = at if first is None else min(first, at)
    return first or 0.0


def unfinished_copies(store: Store) -> list[str]:
    """Hidden whole copies of the database that backups and restores write before renaming them into
    place (`backups/.memory-….db.PID.….partial`, `.memory.db.PID.….partial` beside the database, and
    beside each backup `mem backup` wrote elsewhere). A killed one's copy is deleted now (it would hold
    the forgotten text); one a backup or restore still running writes is named instead."""
    from crossmodalrag.store.backup import backups_dir
    from crossmodalrag.store.backup_places import remembered_backups
    from crossmodalrag.store.copies import unfinished_copies as staging_copies

    beside = backups_beside(store)
    if beside is None:
        return []
    elsewhere = [path.parent for path in remembered_backups(beside)]
    folders = dict.fromkeys([backups_dir(beside), beside.parent, *elsewhere])
    return [str(path) for folder in folders for path in staging_copies(folder)]


def still_on_disk(sources: list[StoredSource]) -> list[str]:
    """Files (a chat session's too), and repositories of commits, that still exist: the next ingest or
    sync reads them again."""
    paths = [stored_path(s.uri, s.source_type) for s in sources]
    return [path for path in dict.fromkeys(paths) if os.path.lexists(path)]
