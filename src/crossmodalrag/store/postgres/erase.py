"""`mem forget` on PostgreSQL: delete the rows, then (with --vacuum) rewrite the tables.

A DELETE leaves the old row versions in the table files until VACUUM reclaims them, and a plain
VACUUM only marks the space reusable; `VACUUM (FULL)` rewrites the tables that hold the text, its
tokens and vectors, the change log's kept versions and what the memory hierarchy and agent memory
derived from it (and their indexes) without the dead rows, so the bytes are gone from the data
files. It needs the tables' owner (or the MAINTAIN privilege). What no client can reach: WAL
segments not yet recycled, WAL archives and base backups (PITR), streaming replicas (they replay the
DELETE and the rewrite, so they end clean once caught up) and pg_dump files; docs/scaling.md says
what a DBA must do about each.
"""

from __future__ import annotations

from crossmodalrag import versioning
from crossmodalrag.agent.supersession import keep_updates_linked
from crossmodalrag.errors import StoreError
from crossmodalrag.memory.stats import forget_derived
from crossmodalrag.store.writers import lock_source, retrying

# Every table whose rows forget deletes and that can hold the forgotten text or what came of it: its
# tokens and vectors, the log's stored versions, the hierarchy's titles, statements, people and uris,
# recall cards, an extraction's failure reason (a model's reply), a remembered memory's tags. The other
# tables hold ids, scores and counts, or what forget keeps on SQLite too: eval queries
# (tests/store/test_postgres.py classifies each).
TEXT_TABLES = (
    "sources",
    "chunks",
    "chunk_terms",
    "chunk_postings",
    "chunk_vectors",
    "owner_change_states",
    "owner_change_log",  # the erased versions' hashes, rewritten by the forget (old row versions stay)
    "memory_nodes",
    "memory_cards",
    "memory_extractions",
    "agent_memories",
)


def forget_sources(store, sources, vacuum: bool = False, stage=lambda _: None):
    """Delete the sources and everything derived from them in one transaction (only rows this client
    may see: row-level security applies to DELETE too); `stage` hears each long step as it starts, as
    on SQLite. A role that may not VACUUM (FULL) gets the report all the same: the rows are deleted, and
    `vacuum_by_owner` says what the tables' owner runs to wipe their bytes."""
    from crossmodalrag.forget import WIPING_FREE_SPACE, ForgetReport, deleting_rows, erasing_versions
    from crossmodalrag.forget_leftovers import (
        eval_queries_naming,
        existing_backups,
        first_stored,
        still_on_disk,
        unfinished_copies,
    )

    report = ForgetReport(sources=list(sources))
    ids = [s.id for s in sources if s.id is not None]  # the rest live only in the change log
    chunk_ids = "SELECT id FROM chunks WHERE source_id = ANY(?)"

    def forget() -> None:
        with store.transaction() as conn:
            for uri in sorted({s.uri for s in sources}):  # a writer of one of them finishes first
                lock_source(conn, uri)
            stage(erasing_versions(len(sources)))
            erasure = versioning.Erasure(conn)
            for source in sources:  # the change log's copies of the text and their hashes go too
                erasure.forget("source", source.uri, "mem forget")
            report.vectors = conn.execute(
                f"SELECT COUNT(*) FROM chunk_vectors WHERE chunk_id IN ({chunk_ids})", (ids,)
            ).fetchone()[0]
            report.chunks = conn.execute(f"SELECT COUNT(*) FROM ({chunk_ids}) AS gone", (ids,)).fetchone()[0]
            stage(deleting_rows(report.chunks))
            conn.execute(f"DELETE FROM chunk_vectors WHERE chunk_id IN ({chunk_ids})", (ids,))
            # Their usage rows ("chunk:<id>"; on SQLite a trigger, migration 9)
            conn.execute(
                f"DELETE FROM memory_usage WHERE target_id IN (SELECT 'chunk:' || id FROM ({chunk_ids}) AS c)", (ids,)
            )
            keep_updates_linked(conn, ids)
            conn.execute("DELETE FROM chunks WHERE source_id = ANY(?)", (ids,))  # chunk_terms: ON DELETE CASCADE
            conn.execute("DELETE FROM sources WHERE id = ANY(?)", (ids,))
            report.memory_nodes, report.stranded_events = forget_derived(conn, erasure)
            erasure.finish()

    retrying(forget)  # a collision the server aborted (serializable, deadlock) is run again whole
    report.eval_queries = eval_queries_naming(store, {s.uri for s in sources})
    report.still_on_disk = still_on_disk(sources)
    report.backups = existing_backups(store, first_stored(store, [s.uri for s in sources]))
    report.unfinished_copies = unfinished_copies(store)
    allowed = may_rewrite_tables(store.conn)
    if vacuum and allowed:
        stage(WIPING_FREE_SPACE)
        wipe_free_space(store)
        report.vacuumed = True
    report.bytes_may_remain = not report.vacuumed  # dead row versions stay in the table files until then
    if not allowed:  # every client, as docs/scaling.md sets them up: the report (the erasure happened) says who
        report.vacuum_by_owner = VACUUM_STATEMENT
    return report


VACUUM_STATEMENT = f"VACUUM (FULL) {', '.join(TEXT_TABLES)}"


def may_rewrite_tables(conn) -> bool:
    """Whether this role may VACUUM (FULL) the tables holding text: their owner, or MAINTAIN granted."""
    return conn.execute(
        "SELECT bool_and(pg_has_role(c.relowner, 'USAGE') OR has_table_privilege(c.oid, 'MAINTAIN')) "
        "FROM pg_class c WHERE c.oid = ANY(?::regclass[])",
        (list(TEXT_TABLES),),
    ).fetchone()[0]


def wipe_free_space(store) -> None:
    """VACUUM (FULL) the tables holding text, then CHECKPOINT when allowed (old WAL segments are
    recycled sooner): run by a forget that may, or alone (`mem forget --vacuum` wipes what earlier
    forgets left). Raises StoreError if this role may not rewrite the tables."""
    conn = store.conn
    if not may_rewrite_tables(conn):
        raise StoreError(
            "cannot wipe the table files: the bytes of rows forgotten earlier stay there until VACUUM (FULL),"
            " which needs the tables' owner",
            f"ask the database owner to run `{VACUUM_STATEMENT}` (docs/scaling.md)",
        )
    conn.raw.execute(VACUUM_STATEMENT)
    if conn.execute("SELECT pg_has_role('pg_checkpoint', 'USAGE')").fetchone()[0]:
        conn.raw.execute("CHECKPOINT")
