"""`mem migrate`: copy a memory between backends (SQLite file <-> PostgreSQL), with proof.

What is copied: sources, chunks, the embedding models and every chunk vector, and the eval queries;
the lexical index is rebuilt by the target's own code (FTS5 rows or tsvector + postings), so it is
exactly what an ingest would have written. Sources and chunks keep their ids, so a citation
(mem://source/ID) or a chunk id kept from the source memory opens the same text in the copy, and the
target is marked to hand out only ids above the highest the source ever did (store/id_marks.py), so
one of a forgotten source finds nothing there either. A target that handed out ids before (a
PostgreSQL database another owner writes, a SQLite memory emptied) may hold or have given those ids:
the copy then gets the target's own ids (`ids_kept` false), still above all the source's.

The proof: for each copied table a count and a SHA-256 over its rows in a canonical order, with ids
replaced by natural keys (source uri, chunk index; sources and chunks with their ids too when kept)
and vectors compared as float32 bytes, computed on both sides after the copy. Equal checksums mean
the same content, whatever the engine. The source is read in one snapshot (Store.snapshot): rows and
checksums are of the memory as the copy began, whatever other clients store meanwhile.

Agent memories keep their attributes and links (source ids mapped by uri). Not copied (reported,
with row counts and what to do, when not empty): the memory hierarchy (nodes, their evidence and
edges, extraction states, recall cards: derived, `mem build-memory` rebuilds them), the usage log,
and the change log with its stored versions and checkpoints (versioning). The target starts its
change log with one genesis record per copied source, as a migrated database does (on PostgreSQL,
the owner's chain).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from crossmodalrag.errors import StoreError
from crossmodalrag.index import fts
from crossmodalrag.store.connection import Store, open_store
from crossmodalrag.store.copies import make_folder, remove, staging_file, sync_dir
from crossmodalrag.store.id_marks import highest_ids, raise_marks, reset_marks

BATCH = 500
SOURCE_COLUMNS = "uri, source_type, fingerprint, timestamp, title, metadata, ingested_at"
CHUNK_COLUMNS = "chunk_index, text, locator, char_start, char_end, metadata, modality, byte_start, byte_end, said_at"
MODEL_COLUMNS = "name, sha256, dim, max_tokens, created_at"
QUERY_COLUMNS = "query_text, expected_source_uris, created_at, updated_at"
# Canonical rows of each copied table: natural keys only, so ids may differ between the two memories.
CANONICAL = {
    "sources": f"SELECT {SOURCE_COLUMNS} FROM sources ORDER BY uri",
    "chunks": "SELECT s.uri, c.chunk_index, c.text, c.locator, c.char_start, c.char_end, c.metadata, c.modality,"
    " c.byte_start, c.byte_end, c.said_at FROM chunks c JOIN sources s ON s.id = c.source_id"
    " ORDER BY s.uri, c.chunk_index",
    "chunk_vectors": "SELECT m.name, m.sha256, s.uri, c.chunk_index, v.piece, v.pieces, v.vector FROM chunk_vectors v"
    " JOIN chunks c ON c.id = v.chunk_id JOIN sources s ON s.id = c.source_id JOIN embedding_models m"
    " ON m.id = v.model_id ORDER BY m.sha256, s.uri, c.chunk_index, v.piece",
    # The models the vectors use, without created_at: a PostgreSQL database shares one row per model among
    # its owners (kept, not copied over: INSERT OR IGNORE), so its time is whoever embedded first's, and
    # a model another owner uses is not this memory's. Both made a complete copy into a team's database
    # "differ" (exit 1, "empty that database").
    "embedding_models": "SELECT name, sha256, dim, max_tokens FROM embedding_models"
    " WHERE id IN (SELECT model_id FROM chunk_vectors) ORDER BY sha256, dim",
    "queries_eval": f"SELECT {QUERY_COLUMNS} FROM queries_eval ORDER BY query_text",
    "agent_memories": "SELECT s.uri, m.kind, m.importance, m.tags, m.session_id, m.agent_id, m.content_hash, m.times,"
    " newer.uri, m.created_at, m.updated_at FROM agent_memories m JOIN sources s ON s.id = m.source_id"
    " LEFT JOIN sources newer ON newer.id = m.superseded_by ORDER BY s.uri",
    "agent_memory_links": "SELECT a.uri, b.uri, l.relation, l.similarity FROM agent_memory_links l"
    " JOIN sources a ON a.id = l.source_id JOIN sources b ON b.id = l.target_id ORDER BY a.uri, b.uri, l.relation",
}
# The same rows with their ids, when the copy kept them: a citation then opens the same text in both.
WITH_IDS = {
    "sources": CANONICAL["sources"].replace("SELECT ", "SELECT id, ", 1),
    "chunks": CANONICAL["chunks"].replace("SELECT ", "SELECT c.id, c.source_id, ", 1),
}
MEMORY_COLUMNS = "kind, importance, tags, session_id, agent_id, content_hash, times, created_at, updated_at"
# Every other table holding data (the FTS tables are rebuilt, schema_migrations is the target's own),
# with what a user does about it: the hierarchy is derived and rebuilt; the change log starts anew.
NOT_COPIED = {
    "memory_nodes": "rebuild with `mem build-memory`",
    "memory_evidence": "rebuilt with the nodes",
    "memory_edges": "rebuilt with the nodes",
    "memory_extractions": "rebuilt with the nodes",
    "memory_cards": "`mem recall --regenerate`",
    "memory_usage": "the usage log starts anew",
    "change_log": "the change log starts anew: one genesis record per source",
    "change_states": "the change log starts anew",
    "checkpoints": "the change log starts anew",
}


@dataclass
class TransferReport:
    source: str
    target: str
    tables: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> counts and checksums
    left_behind: dict[str, int] = field(default_factory=dict)  # tables not copied, with their rows (NOT_COPIED)
    seconds: float = 0.0
    ids_kept: bool = True  # sources and chunks have their ids of the source memory

    @property
    def identical(self) -> bool:
        return all(t["source_checksum"] == t["target_checksum"] for t in self.tables.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "target": self.target,
            "identical": self.identical,
            "ids_kept": self.ids_kept,
            "tables": self.tables,
            "left_behind": self.left_behind,
            "seconds": round(self.seconds, 2),
        }


def copy_memory(source: Store, target: Store, progress: Callable[[int, int], None] | None = None) -> TransferReport:
    """Copy `source` into the empty `target`, under the same ids unless the target handed out ids before,
    and compare checksums. Raises StoreError if the target already holds sources (a copy never merges
    into, or overwrites, a memory)."""
    if target.conn.execute("SELECT 1 FROM sources LIMIT 1").fetchone():
        raise StoreError(f"{target.location} already holds a memory", "migrate into an empty database or a new file")
    started = time.perf_counter()
    # One read snapshot of the source for the rows, their checksums and the counts: an agent storing
    # meanwhile (an always-on MCP server) otherwise made a table read later hold memories whose
    # sources an earlier read had not copied, and the checksums of the live memory differ from the copy.
    with source.snapshot():
        keep_ids = _copy_tables(source, target, progress)
        sums = {table: checksum(source, table, keep_ids) for table in CANONICAL}
        left_behind = {t: n for t in NOT_COPIED if (n := _count(source, t))}
    from crossmodalrag import versioning

    with target.transaction() as conn:
        if versioning.enabled(conn):
            versioning.genesis(conn)
    report = TransferReport(source.location, target.location, seconds=time.perf_counter() - started, ids_kept=keep_ids)
    for table, (count, digest) in sums.items():
        copied, copied_digest = checksum(target, table, keep_ids)
        report.tables[table] = {
            "source_rows": count,
            "target_rows": copied,
            "source_checksum": digest,
            "target_checksum": copied_digest,
        }
    report.left_behind = left_behind
    return report


def _copy_tables(source: Store, target: Store, progress: Callable[[int, int], None] | None) -> bool:
    """Every copied table into the target, whose marks are raised first; whether the ids were kept.
    A failure takes what was copied out again."""
    highs = highest_ids(source.conn)
    with target.transaction() as conn:  # first: a writer beside the copy gets ids above the copied ones
        keep_ids = raise_marks(conn, highs)
    try:
        _copy_sources(source, target, progress, keep_ids)
        _copy_vectors(source, target)
        _copy_queries(source, target)
        _copy_agent_memories(source, target)
    except BaseException:
        _undo_sources(target, highs if keep_ids else None)
        raise
    return keep_ids


def _undo_sources(target: Store, claimed: dict[str, int] | None) -> None:
    """After a failed copy, take its sources (and with them their chunks, vectors and memories) out of
    the target, which held none before: a retry found it "already holds a memory", and what was left
    looked whole without its change log. `claimed`: the target had handed out no id and the copy kept
    its source's: its marks go back to none, so a retry keeps them again. Best effort: the error that
    stopped the copy is the one raised."""
    try:
        with target.transaction() as conn:
            conn.execute("DELETE FROM sources")
            if claimed:
                reset_marks(conn, claimed)
    except Exception:  # noqa: BLE001 - e.g. the server went away: the copy's own error says more
        pass


def copy_into_new_file(source: Store, path: Path, progress: Callable[[int, int], None] | None = None) -> TransferReport:
    """copy_memory into a SQLite file that does not exist yet: written beside it under a temporary
    name and renamed into place only when every table's checksum matches. A copy that failed midway
    left a file that looked whole (rows without their change log) and refused the next try."""
    make_folder(path.parent)  # as `mem backup` makes its folder
    staging = staging_file(path.parent, path.name)
    try:
        remove(staging)  # copy_memory makes a new SQLite memory there
        with open_store(staging) as target:
            report = copy_memory(source, target, progress)
        report.target = str(path)
        if report.identical:
            os.replace(staging, path)
            sync_dir(path.parent)
        return report
    finally:
        remove(staging)


def checksum(store: Store, table: str, with_ids: bool = False) -> tuple[int, str]:
    """(rows, sha256 of the canonical rows) of one copied table; `with_ids`: sources' and chunks' ids too."""
    digest, rows = hashlib.sha256(), 0
    for row in store.conn.execute(WITH_IDS.get(table, CANONICAL[table]) if with_ids else CANONICAL[table]):
        values = list(row)
        if table == "chunk_vectors":
            values[-1] = store.decode_vector(values[-1]).tobytes().hex()
        digest.update(json.dumps(values, ensure_ascii=False).encode("utf-8", "surrogatepass") + b"\n")
        rows += 1
    return rows, digest.hexdigest()


def _count(store: Store, table: str) -> int:
    try:
        return store.conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
    except Exception:  # noqa: BLE001 - a table this backend does not have holds nothing to leave behind
        return 0


def _batches(store: Store, sql: str) -> Iterator[list]:
    """Rows of `sql` (which selects an id first and takes `after` and a limit) in id order, BATCH at a time."""
    after = 0
    while rows := store.conn.execute(sql, (after, BATCH)).fetchall():
        yield rows
        after = rows[-1][0]


def _copy_sources(source: Store, target: Store, progress: Callable[[int, int], None] | None, keep_ids: bool) -> None:
    """Sources with their chunks, BATCH sources per transaction; the index rows through the target's code.
    `keep_ids`: under their own ids, else under the target's new ones."""
    from crossmodalrag.store.documents import new_chunk_ids, new_source_id

    total, done = source.conn.execute("SELECT COUNT(*) FROM sources").fetchone()[0], 0
    for rows in _batches(source, f"SELECT id, {SOURCE_COLUMNS} FROM sources WHERE id > ? ORDER BY id LIMIT ?"):
        with target.transaction() as conn:
            for old_id, *values in rows:
                new_id = old_id if keep_ids else new_source_id(conn)
                conn.execute(
                    f"INSERT INTO sources (id, {SOURCE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", [new_id, *values]
                )
                chunks = source.conn.execute(
                    f"SELECT id, {CHUNK_COLUMNS} FROM chunks WHERE source_id = ? ORDER BY chunk_index", (old_id,)
                ).fetchall()
                ids = [chunk[0] for chunk in chunks] if keep_ids else new_chunk_ids(conn, len(chunks))
                chunks = [chunk[1:] for chunk in chunks]
                conn.executemany(
                    f"INSERT INTO chunks (id, source_id, {CHUNK_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [(chunk_id, new_id, *chunk) for chunk_id, chunk in zip(ids, chunks, strict=True)],
                )
                fts.insert_rows(
                    conn, [(chunk_id, values[4], chunk[1]) for chunk_id, chunk in zip(ids, chunks, strict=True)]
                )
        done += len(rows)
        if progress:
            progress(done, total)


def _copy_vectors(source: Store, target: Store) -> None:
    """Every model and its vectors, chunks matched by (uri, chunk index)."""
    chunk_ids = {
        (uri, index): chunk_id
        for uri, index, chunk_id in target.conn.execute(
            "SELECT s.uri, c.chunk_index, c.id FROM chunks c JOIN sources s ON s.id = c.source_id"
        )
    }
    models = source.conn.execute(f"SELECT id, {MODEL_COLUMNS} FROM embedding_models")
    for old_model, *model in models.fetchall():
        with target.transaction() as conn:
            conn.execute(f"INSERT OR IGNORE INTO embedding_models ({MODEL_COLUMNS}) VALUES (?, ?, ?, ?, ?)", model)
        new_model = target.conn.execute(
            "SELECT id FROM embedding_models WHERE name = ? AND sha256 = ? AND dim = ?", model[:3]
        ).fetchone()[0]
        sql = (
            "SELECT v.id, s.uri, c.chunk_index, v.piece, v.pieces, v.vector FROM chunk_vectors v JOIN chunks c"
            f" ON c.id = v.chunk_id JOIN sources s ON s.id = c.source_id WHERE v.model_id = {int(old_model)}"
            " AND v.id > ? ORDER BY v.id LIMIT ?"
        )
        for rows in _batches(source, sql):
            with target.transaction() as conn:
                conn.executemany(
                    "INSERT INTO chunk_vectors (chunk_id, model_id, piece, pieces, vector) VALUES (?, ?, ?, ?, ?)",
                    [
                        (
                            chunk_ids[(uri, index)],
                            new_model,
                            piece,
                            pieces,
                            target.encode_vector(source.decode_vector(v)),
                        )
                        for _, uri, index, piece, pieces, v in rows
                    ],
                )


def _copy_agent_memories(source: Store, target: Store) -> None:
    """Agent memories' attributes and links, each source id mapped through its uri."""
    new_id = {uri: i for i, uri in target.conn.execute("SELECT id, uri FROM sources")}
    mapped = {old: new_id[uri] for old, uri in source.conn.execute("SELECT id, uri FROM sources") if uri in new_id}
    memories = source.conn.execute(f"SELECT source_id, superseded_by, {MEMORY_COLUMNS} FROM agent_memories").fetchall()
    links = source.conn.execute("SELECT source_id, target_id, relation, similarity FROM agent_memory_links").fetchall()
    with target.transaction() as conn:
        conn.executemany(
            f"INSERT INTO agent_memories (source_id, superseded_by, {MEMORY_COLUMNS})"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(mapped[old], mapped.get(newer), *rest) for old, newer, *rest in memories],
        )
        conn.executemany(
            "INSERT INTO agent_memory_links (source_id, target_id, relation, similarity) VALUES (?, ?, ?, ?)",
            [(mapped[a], mapped[b], relation, similarity) for a, b, relation, similarity in links],
        )


def _copy_queries(source: Store, target: Store) -> None:
    rows = source.conn.execute(f"SELECT {QUERY_COLUMNS} FROM queries_eval").fetchall()
    with target.transaction() as conn:
        conn.executemany(f"INSERT INTO queries_eval ({QUERY_COLUMNS}) VALUES (?, ?, ?, ?)", rows)
