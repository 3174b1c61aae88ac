"""Writing a read document into the store: its source row and chunks, as one all-or-nothing unit of
a write batch, with the lexical index rows deferred to the batch's commit and the change logged
(versioning). Ingest, agent memories, chat sessions and restores all write through here."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from collections import deque

from crossmodalrag import versioning
from crossmodalrag.chunking import CHUNKER_VERSION, chunk_document
from crossmodalrag.index import fts
from crossmodalrag.store import Store
from crossmodalrag.store.batch import WriteBatch
from crossmodalrag.types import Document
from crossmodalrag.versioning.sources import source_state


def fingerprint(doc: Document) -> str:
    """What decides whether a stored source is still current (the locator too: chunks carry it)."""
    digest = hashlib.sha256()
    for part in (CHUNKER_VERSION, doc.extractor, doc.format, doc.modality, doc.locator, doc.title, doc.text):
        digest.update(part.encode("utf-8", "surrogatepass"))
        digest.update(b"\x00")
    return digest.hexdigest()


def known_fingerprints(store: Store, uri_prefix: str, source_type: str | None = None) -> dict[str, str]:
    """uri → fingerprint of stored sources whose uri starts with the prefix, of one kind when given.
    An ingest passes its own kind: what it did not find is removed, and a folder holds notes, PDFs,
    images and repositories side by side (ingesting ~/Documents as notes must not drop its PDFs)."""
    sql, params = (
        "SELECT uri, fingerprint FROM sources WHERE uri >= ? AND uri < ?",
        [uri_prefix, uri_prefix + "\U0010ffff"],
    )
    if source_type:
        sql, params = sql + " AND source_type = ?", [*params, source_type]
    return {uri: digest for uri, digest in store.conn.execute(sql, params)}


def write_document(
    batch: WriteBatch, doc: Document, digest: str, unless_stored: bool = False, moved_from: str | None = None
) -> tuple[bool | None, int]:
    """Store one source and its chunks as one all-or-nothing unit; returns (was it new, chunks written).
    `unless_stored`: nothing is written, and (None, 0) returned, when the source as stored has this
    fingerprint already (two syncs at once: the one that waited for the other's write finds it done).
    `moved_from`: the source was just given this uri (move_document): its chunks whose text is unchanged
    are kept, with their vectors, and the log says where it came from."""
    chunks = chunk_document(doc)
    metadata = stored_metadata(doc)
    batch.writes(doc.uri)
    with batch.unit() as conn:
        row = conn.execute("SELECT id, fingerprint, title FROM sources WHERE uri = ?", (doc.uri,)).fetchone()
        if row and unless_stored and row[1] == digest:
            return None, 0
        if row:
            source_id = row[0]
            versioning.before_change(conn, "source", doc.uri)
            conn.execute(
                "UPDATE sources SET source_type = ?, fingerprint = ?, timestamp = ?, title = ?, metadata = ?,"
                " ingested_at = ? WHERE id = ?",
                (doc.source_type, digest, doc.timestamp, doc.title, metadata, time.time(), source_id),
            )
            written, count = _replace_chunks(batch, conn, source_id, doc, chunks, row[2], moved_from is not None)
        else:
            source_id = new_source_id(conn)
            conn.execute(
                "INSERT INTO sources (id, source_type, uri, fingerprint, timestamp, title, metadata, ingested_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (source_id, doc.source_type, doc.uri, digest, doc.timestamp, doc.title, metadata, time.time()),
            )
            written, count = _insert_chunks(batch, conn, source_id, doc, chunks, 0), len(chunks)
        if versioning.enabled(conn):  # the state just written: the log need not read it back
            state = source_state(doc.uri, doc.source_type, doc.title, doc.timestamp, metadata, digest, written)
            reason = f"{versioning.MOVED_FROM}{moved_from}" if moved_from else ""
            versioning.changed(conn, "source", doc.uri, state=state, new=row is None, reason=reason)
    return row is None, count


def chunked_as_stored(batch: WriteBatch, doc: Document) -> bool:
    """Whether `doc` chunks into what is stored of it (text, locator, span and metadata of each chunk)."""
    stored = batch.conn.execute(
        "SELECT c.text, c.locator, c.char_start, c.char_end, c.metadata FROM chunks c"
        " JOIN sources s ON s.id = c.source_id WHERE s.uri = ? ORDER BY c.chunk_index",
        (doc.uri,),
    ).fetchall()
    return [tuple(row) for row in stored] == [
        (v[1], v[2], v[3], v[4], v[5]) for v in _chunk_values(doc, chunk_document(doc), 0)
    ]


def move_document(batch: WriteBatch, old_uri: str, doc: Document, digest: str) -> int | None:
    """Give the stored source at `old_uri` the uri of the file it was renamed to, then rewrite it there
    (its chunks carry the new locator), in one unit; returns the count of chunks written (those whose
    text changed: the others keep their rows and vectors, a renamed file is not embedded again), or
    None when there was nothing to move (the old one is gone or the new uri is taken: the caller
    writes it as new). The source keeps its id, so a mem://source/<id> citation and the events read
    from it stay valid."""
    batch.writes(old_uri)
    with batch.unit() as conn:
        rows = conn.execute("SELECT uri, id FROM sources WHERE uri IN (?, ?)", (old_uri, doc.uri)).fetchall()
        if [row[0] for row in rows] != [old_uri]:
            return None
        # the log: deleted there, inserted here, each record naming the other path (mem history follows it)
        with versioning.changing(conn, "source", old_uri, reason=f"{versioning.MOVED_TO}{doc.uri}"):
            conn.execute("UPDATE sources SET uri = ? WHERE uri = ?", (doc.uri, old_uri))
        remember_former_id(conn, old_uri, rows[0][1])
        return write_document(batch, doc, digest, moved_from=old_uri)[1]


def remember_former_id(conn: sqlite3.Connection, uri: str, source_id: int) -> None:
    """Record the id of a source that left `uri` by a move, as the delete trigger records a deleted
    one's: the log holds the move as a delete there, so a rollback to before it brings the source back
    at `uri`, and it must come back with this id (versioning/sources.py `_former_id`). On PostgreSQL a
    restored source gets a new id: nothing to record."""
    if not fts.on_postgres(conn):
        conn.execute("INSERT OR REPLACE INTO deleted_source_ids (uri, id) VALUES (?, ?)", (uri, source_id))


def extend_document(batch: WriteBatch, source_id: int, doc: Document, digest: str, keep: int, chunks: list) -> int:
    """Update a stored source in place: keep its first `keep` chunks, replace the rest by `chunks`
    (offsets into doc.text). A growing transcript thus writes, and embeds, only its new turns."""
    batch.writes(doc.uri)
    with batch.unit() as conn:
        versioning.before_change(conn, "source", doc.uri)
        conn.execute("DELETE FROM chunks WHERE source_id = ? AND chunk_index >= ?", (source_id, keep))
        conn.execute(
            "UPDATE sources SET fingerprint = ?, timestamp = ?, title = ?, metadata = ?, ingested_at = ? WHERE id = ?",
            (digest, doc.timestamp, doc.title, stored_metadata(doc), time.time(), source_id),
        )
        _insert_chunks(batch, conn, source_id, doc, chunks, keep)
        versioning.changed(conn, "source", doc.uri)
    return len(chunks)


def stored_metadata(doc: Document) -> str:
    """The metadata column: keys starting with `_` are for the chunker only (e.g. turn spans)."""
    return json.dumps({k: v for k, v in doc.metadata.items() if not k.startswith("_")}, ensure_ascii=False)


def _insert_chunks(
    batch: WriteBatch, conn: sqlite3.Connection, source_id: int, doc: Document, chunks: list, first_index: int
) -> list[tuple]:
    """Insert the chunks and defer their index rows; returns their values in CHUNK_COLUMNS order."""
    values = _chunk_values(doc, chunks, first_index)
    _insert_values(batch, conn, source_id, doc.title, values)
    return [value[1:-1] for value in values]  # said_at is derived from the metadata: not in the state


def _replace_chunks(
    batch: WriteBatch,
    conn: sqlite3.Connection,
    source_id: int,
    doc: Document,
    chunks: list,
    former_title: str,
    moved: bool,
) -> tuple[list[tuple], int]:
    """Replace a source's chunks by `chunks`, keeping the row (its id, vectors and memory evidence) of
    each stored chunk whose text a new chunk repeats, wherever it now falls: editing one section of
    a long journal note writes, and embeds, that section only, not the thousands after it that
    shifted. A kept chunk's index, span, byte offsets, locator and metadata are updated; its index
    row is rewritten only when what it holds (title, text) changed. For a moved source the text
    below the first line is compared: that heading line names the source (a PDF's file, a commit's
    repository), and the vector, made with the former name, still holds the same body (cosine
    0.92-0.98 to one made anew, for a 1,200-character page chunk), while the name is found by
    keyword under its new spelling. Returns the values in CHUNK_COLUMNS order and how many chunks
    were written anew."""
    values = _chunk_values(doc, chunks, 0)
    compared = _below_heading if moved else str  # str: the whole text
    unclaimed: dict[tuple[str, str], deque] = {}  # in chunk order: repeated text pairs up in order
    for chunk_id, text, modality in conn.execute(
        "SELECT id, text, modality FROM chunks WHERE source_id = ? ORDER BY chunk_index", (source_id,)
    ).fetchall():
        unclaimed.setdefault((compared(text), modality), deque()).append((chunk_id, text))
    kept: dict[int, tuple[int, str]] = {}  # new chunk_index → (id, text as stored)
    for value in values:
        candidates = unclaimed.get((compared(value[1]), value[6]))
        if candidates:
            kept[value[0]] = candidates.popleft()
    dropped = [(chunk_id,) for rest in unclaimed.values() for chunk_id, _ in rest]
    if dropped:
        conn.executemany("DELETE FROM chunks WHERE id = ?", dropped)
    if kept:
        # (source_id, chunk_index) is unique and kept chunks may trade places: park them at negative
        # indices, insert the new ones, then turn the parked indices positive in one statement
        conn.executemany(
            "UPDATE chunks SET chunk_index = ?, text = ?, locator = ?, char_start = ?, char_end = ?, metadata = ?,"
            " byte_start = ?, byte_end = ?, said_at = ? WHERE id = ?",
            [(-1 - v[0], *v[1:5], v[5], v[7], v[8], v[9], kept[v[0]][0]) for v in values if v[0] in kept],
        )
        relabelled = [
            (kept[v[0]][0], doc.title, v[1])
            for v in values
            if v[0] in kept and (former_title != doc.title or kept[v[0]][1] != v[1])
        ]
        if relabelled:  # the index row holds the title and the text: rewritten as the batch commits
            fts.delete_rows(conn, [r[0] for r in relabelled])
            batch.collect(index_chunks, relabelled)
    fresh = [value for value in values if value[0] not in kept]
    _insert_values(batch, conn, source_id, doc.title, fresh)
    if kept:
        conn.execute(
            "UPDATE chunks SET chunk_index = -1 - chunk_index WHERE source_id = ? AND chunk_index < 0", (source_id,)
        )
    return [value[1:-1] for value in values], len(fresh)


def _below_heading(text: str) -> str:
    """A chunk's text below its first line, the heading that names its source (title, file, repository)."""
    return text.partition("\n")[2]


def _chunk_values(doc: Document, chunks: list, first_index: int) -> list[tuple]:
    """Each chunk's (chunk_index, CHUNK_COLUMNS..., said_at)."""
    spans = utf8_offsets(doc.text, [offset for c in chunks for offset in (c.char_start, c.char_end)])
    return [
        (
            first_index + i,
            c.text,
            c.locator,
            c.char_start,
            c.char_end,
            json.dumps(c.metadata, ensure_ascii=False) if c.metadata else "{}",
            doc.modality,
            spans[c.char_start],
            spans[c.char_end],
            said_at(c.metadata),
        )
        for i, c in enumerate(chunks)
    ]


def _insert_values(
    batch: WriteBatch, conn: sqlite3.Connection, source_id: int, title: str, values: list[tuple]
) -> None:
    """Insert chunk rows (as _chunk_values gives them) under new ids and defer their index rows."""
    if not values:
        return
    ids = new_chunk_ids(conn, len(values))
    conn.executemany(
        "INSERT INTO chunks (id, source_id, chunk_index, text, locator, char_start, char_end, metadata, modality,"
        " byte_start, byte_end, said_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [(ids[i], source_id, *value) for i, value in enumerate(values)],
    )
    batch.collect(index_chunks, [(ids[i], title, value[1]) for i, value in enumerate(values)])


def said_at(metadata: dict) -> float | None:
    """A chunk's own time when it is not its source's (the chunks.said_at column): a chat turn's
    `time`, when it was said, which in a conversation continued later is long after the start."""
    value = metadata.get("time")
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def index_chunks(conn: sqlite3.Connection, units: list[list[tuple]]) -> None:
    """The lexical index rows of a batch's units, in order, written as the batch commits (one
    statement per index table for the whole batch)."""
    fts.insert_rows(conn, [row for rows in units for row in rows])


def new_source_id(conn: sqlite3.Connection) -> int:
    """A new source's id (see new_ids)."""
    return new_ids(conn, "sources", 1)[0]


def new_chunk_ids(conn: sqlite3.Connection, count: int) -> list[int]:
    """Ids for `count` new chunks, increasing (see new_ids)."""
    return new_ids(conn, "chunks", count)


def new_ids(conn: sqlite3.Connection, table: str, count: int) -> list[int]:
    """`count` new ids for `table` (sources or chunks), increasing, none ever given before: a citation
    or a chunk id an agent kept must not open other text once its row is gone. On SQLite we hold the
    write lock, so the ids above both the current maximum and the highest deleted id (id_marks, kept
    by a trigger: SQLite alone would give that one again) are ours; on PostgreSQL writers run side by
    side and row-level security hides other owners' rows from MAX(id), so the ids come from the
    table's sequence (no wait for an insert's reply either)."""
    if fts.on_postgres(conn):
        return conn.new_ids(table, count)
    first = conn.execute(
        f"SELECT MAX(COALESCE((SELECT MAX(id) FROM {table}), 0),"
        " COALESCE((SELECT high FROM id_marks WHERE name = ?), 0)) + 1",
        (table,),
    ).fetchone()[0]
    return list(range(first, first + count))


def utf8_offsets(text: str, positions: list[int]) -> dict[int, int]:
    """The UTF-8 byte offset of each character offset into text, in one pass over it."""
    offsets, done, consumed = {}, 0, 0
    for position in sorted(set(positions)):
        consumed += len(text[done:position].encode("utf-8", "surrogatepass"))
        offsets[position], done = consumed, position
    return offsets
