"""Forgetting a source completely: its row, chunks, FTS entries, vectors and derived caches.

What goes, and why nothing is left behind:
  - `chunk_vectors`, `chunks` and `sources` rows are deleted explicitly (not only through ON DELETE
    CASCADE, which needs `PRAGMA foreign_keys`); any other table that points at a source or chunk
    must declare ON DELETE CASCADE (a test checks every foreign key in the schema);
  - the chunks trigger removes the FTS rows, and an FTS5 'optimize' merges the index segments,
    which otherwise keep the deleted tokens until some later merge;
  - `PRAGMA secure_delete` zeroes the freed space as it is freed; with `vacuum`, the WAL is
    checkpointed and truncated and the file rebuilt, so the bytes are gone from the disk files too;
  - the change log (versioning/) loses every stored state of the sources, and the hashes naming them
    (and those of the memory nodes derived from them) become random markers: a hash would confirm a
    guessed secret. It keeps a tombstone (uri, time, reason) and is re-chained, so `mem verify` passes;
  - the vector cache beside the database (`<db>.vectors/`: memory-mapped copies and the ANN file)
    is deleted: it is derived, and it would keep the forgotten vectors on disk until the next query.
Eval queries are kept even when their gold names a forgotten source: they are the user's own
labels, not derived data, and `mem eval` already warns about gold that matches no source.
Backups (`mem backup`) are copies the user chose to keep: forget names them, and leaves them alone.
Finding the sources is forget_targets.py's; what a forget leaves behind and names, forget_leftovers.py's.
"""

from __future__ import annotations

import shutil
import sqlite3
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from crossmodalrag import versioning
from crossmodalrag.agent.supersession import keep_updates_linked
from crossmodalrag.errors import StoreError
from crossmodalrag.forget_leftovers import (
    eval_queries_naming,
    existing_backups,
    first_stored,
    still_on_disk,
    unfinished_copies,
)
from crossmodalrag.forget_targets import StoredSource, find_sources, still_in_memory
from crossmodalrag.memory.stats import forget_derived
from crossmodalrag.store import Store
from crossmodalrag.wording import counted

# Imported from here by the CLI, agents' edits and tests: found by forget_targets.py.
__all__ = [
    "ForgetReport",
    "StoredSource",
    "empty_write_ahead_log",
    "find_sources",
    "forget_sources",
    "still_in_memory",
    "wipe_free_space",
]

PURGING_TEXT_INDEX = "purging the forgotten words from the text index (it is rewritten whole)"
WIPING_FREE_SPACE = "wiping the freed space from the database files"


def erasing_versions(sources: int) -> str:
    return f"erasing the stored versions of {counted(sources, 'source')}"


def deleting_rows(chunks: int) -> str:
    return f"deleting {counted(chunks, 'chunk')}, their vectors and what was derived from them"


# A checkpoint waits for readers through the busy handler; readers here are short queries, so a
# reader still there after this long is a session (a server, `sync --watch`) that will not end soon.
WIPE_WAIT_SECONDS = 5.0
# How long memory_forget waits for other readers (a `mem serve`, a sync) to leave the write-ahead log:
# an agent's call must not hang on them; the log is emptied on a later checkpoint anyway.
CHECKPOINT_WAIT_SECONDS = 1.0
Stage = Callable[[str], None]  # told what a forget is doing now: its long steps cannot count their work


def _quiet(stage: str) -> None:
    pass


@dataclass
class ForgetReport:
    """What one `forget` removed, and what the user should know afterwards."""

    sources: list[StoredSource] = field(default_factory=list)
    chunks: int = 0
    vectors: int = 0
    memory_nodes: int = 0  # events, episodes and concepts derived from the forgotten text
    stranded_events: int = 0  # remaining events whose episode or concept went: `mem build-memory` re-derives it
    vacuumed: bool = False
    # Copies of its pages may still be in the files: PostgreSQL's dead rows until VACUUM (FULL); on SQLite
    # only while another process keeps the write-ahead log in use (freed space is zeroed as it is freed).
    bytes_may_remain: bool = True
    # PostgreSQL, a role that may not rewrite the tables: the statement their owner runs to wipe those bytes
    vacuum_by_owner: str = ""
    eval_queries: int = 0  # stored eval queries whose gold names a forgotten source (kept)
    still_on_disk: list[str] = field(default_factory=list)  # files or repositories an ingest would re-read
    backups: list[str] = field(default_factory=list)  # backups made before: they may still hold the text
    unfinished_copies: list[str] = field(default_factory=list)  # a running backup's or restore's copy: likewise
    live_copies: list[str] = field(default_factory=list)  # the same note in memory under its newer path (kept)

    @property
    def named(self) -> list[StoredSource]:
        """The sources asked for, without the earlier paths found for them."""
        return [source for source in self.sources if source.earlier_path_of is None]

    @property
    def earlier_paths(self) -> list[StoredSource]:
        return [source for source in self.sources if source.earlier_path_of is not None]

    @property
    def sub_agents(self) -> list[StoredSource]:
        return [source for source in self.sources if source.sub_agent_of is not None]

    def to_dict(self) -> dict[str, Any]:
        return {
            "forgotten": [
                {
                    "uri": s.uri,
                    "source_type": s.source_type,
                    "chunks": s.chunks,
                    "earlier_path_of": s.earlier_path_of,
                    "sub_agent_of": s.sub_agent_of,
                }
                for s in self.sources
            ],
            "sources": len(self.named),
            "earlier_paths": [s.uri for s in self.earlier_paths],
            "sub_agent_sessions": [s.uri for s in self.sub_agents],
            "chunks": self.chunks,
            "vectors": self.vectors,
            "memory_nodes": self.memory_nodes,
            "stranded_events": self.stranded_events,
            "vacuumed": self.vacuumed,
            "bytes_may_remain": self.bytes_may_remain,
            "vacuum_by_owner": self.vacuum_by_owner or None,
            "eval_queries_naming_them": self.eval_queries,
            "still_on_disk": self.still_on_disk,
            "backups": len(self.backups),
            "backup_paths": self.backups,
            "unfinished_copies": self.unfinished_copies,
            "live_copies": self.live_copies,
        }


def forget_sources(
    store: Store, sources: list[StoredSource], vacuum: bool = False, stage: Stage = _quiet
) -> ForgetReport:
    """Delete the sources and everything derived from them, in one transaction; with vacuum, also
    wipe the freed space from the database files. `stage` hears each step as it starts. Raises
    StoreError if the database stays locked or the space cannot be wiped (the sources are forgotten by then);
    on PostgreSQL a role that may not rewrite the tables gets the report, saying what their owner runs."""
    if store.backend == "postgresql":
        from crossmodalrag.store.postgres import erase

        return erase.forget_sources(store, sources, vacuum, stage)
    report = ForgetReport(sources=list(sources))
    conn = store.conn
    secure_before = conn.execute("PRAGMA secure_delete").fetchone()[0]
    conn.execute("PRAGMA secure_delete = ON")  # zero freed pages and cells as they are freed
    try:
        with store.transaction():
            conn.execute("CREATE TEMP TABLE IF NOT EXISTS forget_ids (id INTEGER PRIMARY KEY)")
            conn.execute("DELETE FROM temp.forget_ids")
            live = [(s.id,) for s in sources if s.id is not None]
            conn.executemany("INSERT OR IGNORE INTO temp.forget_ids VALUES (?)", live)
            stage(erasing_versions(len(sources)))
            erasure = versioning.Erasure(conn)
            for source in sources:  # the change log's copies of the text and their hashes go too
                erasure.forget("source", source.uri, "mem forget")
            chunk_ids = "SELECT id FROM chunks WHERE source_id IN (SELECT id FROM temp.forget_ids)"
            report.vectors = conn.execute(
                f"SELECT COUNT(*) FROM chunk_vectors WHERE chunk_id IN ({chunk_ids})"
            ).fetchone()[0]
            report.chunks = conn.execute(f"SELECT COUNT(*) FROM ({chunk_ids})").fetchone()[0]
            stage(deleting_rows(report.chunks))
            conn.execute(f"DELETE FROM chunk_vectors WHERE chunk_id IN ({chunk_ids})")
            keep_updates_linked(conn, [row[0] for row in live])
            conn.execute("DELETE FROM chunks WHERE source_id IN (SELECT id FROM temp.forget_ids)")  # FTS: trigger
            conn.execute("DELETE FROM sources WHERE id IN (SELECT id FROM temp.forget_ids)")
            # a forgotten source never comes back by rollback: nothing needs to know its id by uri
            conn.executemany("DELETE FROM deleted_source_ids WHERE uri = ?", [(s.uri,) for s in sources])
            report.memory_nodes, report.stranded_events = forget_derived(conn, erasure)
            erasure.finish()
            conn.execute("DELETE FROM temp.forget_ids")
            stage(PURGING_TEXT_INDEX)
            _merge_fts(conn)
    except sqlite3.IntegrityError as error:
        raise StoreError(
            f"cannot forget: a table still points at these sources ({error})",
            "a table referencing sources or chunks needs ON DELETE CASCADE; report this",
        ) from error
    finally:
        conn.execute(f"PRAGMA secure_delete = {int(secure_before)}")
    report.eval_queries = eval_queries_naming(store, {s.uri for s in sources})
    report.still_on_disk = still_on_disk(sources)
    report.backups = existing_backups(store, first_stored(store, [s.uri for s in sources]))
    report.unfinished_copies = unfinished_copies(store)
    drop_vector_cache(store)
    if vacuum:
        stage(WIPING_FREE_SPACE)
        wipe_free_space(store)
        report.vacuumed = True
    # secure_delete zeroed the freed space; the write-ahead log may still hold the pages as they were
    # before, text included: emptied now, unless another process reads it (then --vacuum is needed).
    report.bytes_may_remain = not (report.vacuumed or empty_write_ahead_log(store))
    return report


def _merge_fts(conn: sqlite3.Connection) -> None:
    """Merge the FTS5 index into one segment: deleted rows' tokens stay in older segments until
    their next merge, which may never come.

    This rewrites the whole index however little was forgotten (at 335k chunks ~10 s and ~450 MB
    written), so the CLI says what it is doing. FTS5's 'secure-delete' option (SQLite 3.42+) would
    purge only the deleted rows, but only of deletes made while it is on: the tokens of a note's
    earlier versions, which ingest deleted before, stay until a merge, and forget promises those
    are gone too. It also makes the index unreadable by an SQLite older than 3.42 (a copy of the
    database opened elsewhere). Merging an index already in one segment costs nothing."""
    conn.execute("INSERT INTO chunks_fts (chunks_fts) VALUES ('optimize')")


def wipe_free_space(store: Store) -> None:
    """Make deleted text unrecoverable from the database files: merge the FTS index, checkpoint and
    truncate the WAL, rebuild the file (VACUUM), truncate the WAL again. Raises StoreError if another
    connection keeps part of the WAL in use."""
    if store.backend == "postgresql":
        from crossmodalrag.store.postgres import erase

        return erase.wipe_free_space(store)
    conn = store.conn
    with store.transaction():
        _merge_fts(conn)
    try:
        with _waiting(conn, WIPE_WAIT_SECONDS):
            _checkpoint(store)
            conn.execute("VACUUM")
            _checkpoint(store)
    except sqlite3.OperationalError as error:
        raise _still_in_use(store, str(error)) from error
    drop_vector_cache(store)


def empty_write_ahead_log(store: Store) -> bool:
    """After one memory's forget (memory_forget): copy the log into the database file and truncate it,
    whether it did. The forget zeroed the memory's bytes (secure_delete) in the pages it wrote, but
    the log still held the pages as they were, text included, until a checkpoint that an always-on
    server may not see for hours. Cheap (the pages written since the last checkpoint), unlike
    wipe_free_space's VACUUM, which rewrites the whole file. PostgreSQL's log is the server's: False."""
    if store.backend != "sqlite":
        return False
    try:
        with _waiting(store.conn, CHECKPOINT_WAIT_SECONDS):
            return _log_truncated(store.conn)
    except sqlite3.OperationalError:  # locked: as busy
        return False


@contextmanager
def _waiting(conn: sqlite3.Connection, seconds: float) -> Iterator[None]:
    """The connection's busy timeout set to `seconds` while inside, then as it was."""
    waited = conn.execute("PRAGMA busy_timeout").fetchone()[0]
    conn.execute(f"PRAGMA busy_timeout = {int(seconds * 1000)}")
    try:
        yield
    finally:
        conn.execute(f"PRAGMA busy_timeout = {int(waited)}")


def _log_truncated(conn: sqlite3.Connection) -> bool:
    """Checkpoint the write-ahead log and truncate it; False when a reader kept part of it in use."""
    busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    return not busy


def _checkpoint(store: Store) -> None:
    if not _log_truncated(store.conn):
        raise _still_in_use(store, "a reader kept the write-ahead log in use")


def _still_in_use(store: Store, why: str) -> StoreError:
    return StoreError(
        f"could not wipe the freed space of {store.path}: {why}; forgotten data is no longer searchable,"
        " but its bytes may remain in the database files",
        "stop other mem processes (sync --watch, servers) and run `mem forget --vacuum`",
    )


def drop_vector_cache(store: Store) -> None:
    """Delete `<db>.vectors/`: derived copies of the vectors, rebuilt from SQLite on the next query."""
    shutil.rmtree(store.path.with_name(store.path.name + ".vectors"), ignore_errors=True)
