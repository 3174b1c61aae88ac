"""Sources as a versioned kind: a source's state is its row and its chunks, keyed by uri.

The state leaves out what is bookkeeping, not content: ids (a rewrite renumbers chunks), `ingested_at`
and the file stamp and hash (a touched but unchanged file). Vectors are derived: a restored source is embedded
again by the next `mem reindex-embeddings` or ingest.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from contextlib import contextmanager
from typing import Iterable, Iterator

from crossmodalrag.index import fts
from crossmodalrag.versioning.log import Kind, State, canonical, changing, own_rows, register_kind

SOURCE_COLUMNS = "id, uri, source_type, title, timestamp, metadata, fingerprint"
CHUNK_COLUMNS = "text, locator, char_start, char_end, metadata, modality, byte_start, byte_end"
BOOKKEEPING = ("file_stamp", "file_sha256", "raw_sha256")  # raw_sha256: a chat session's, conversations.py


def source_state(
    uri: str, source_type: str, title: str, timestamp: float | None, metadata: str, fingerprint: str, chunks: list
) -> State:
    """A source's state from its column values (`metadata` as stored: a JSON string) and its chunks'
    values in CHUNK_COLUMNS order: what the log hashes, from the database or from the writer."""
    meta = json.loads(metadata)
    for key in BOOKKEEPING:
        meta.pop(key, None)
    return {
        "uri": uri,
        "source_type": source_type,
        "title": title,
        "timestamp": None if timestamp is None else float(timestamp),  # a REAL column reads back as float
        "metadata": meta,
        "fingerprint": fingerprint,
        "chunks": [list(chunk) for chunk in chunks],
    }


def _state(row: sqlite3.Row | tuple, chunks: list[list]) -> State:
    return source_state(*list(row)[1:], chunks)


def read_source(conn: sqlite3.Connection, uri: str) -> State | None:
    row = conn.execute(f"SELECT {SOURCE_COLUMNS} FROM sources WHERE uri = ?{own_rows(conn, 'AND')}", (uri,)).fetchone()
    if row is None:
        return None
    chunks = conn.execute(
        f"SELECT {CHUNK_COLUMNS} FROM chunks WHERE source_id = ? ORDER BY chunk_index", (row[0],)
    ).fetchall()
    return _state(row, [list(chunk) for chunk in chunks])


def read_all_sources(conn: sqlite3.Connection) -> Iterator[tuple[str, State]]:
    """Every source's state, in two ordered scans (not one query per source)."""
    sources = conn.execute(f"SELECT {SOURCE_COLUMNS} FROM sources{own_rows(conn)} ORDER BY id").fetchall()
    chunks = iter(
        conn.execute(f"SELECT source_id, {CHUNK_COLUMNS} FROM chunks{own_rows(conn)} ORDER BY source_id, chunk_index")
    )
    pending = next(chunks, None)
    for row in sources:
        own = []
        while pending is not None and pending[0] < row[0]:
            pending = next(chunks, None)  # a chunk whose source is gone: verify sees it through its source
        while pending is not None and pending[0] == row[0]:
            own.append(list(pending)[1:])
            pending = next(chunks, None)
        yield row[1], _state(row, own)


def restore_source(conn: sqlite3.Connection, uri: str, state: State | None) -> None:
    """Make the stored source equal to `state` (None removes it), keeping its id when it exists, and
    giving it back the id it had when it was deleted."""
    row = conn.execute(f"SELECT id FROM sources WHERE uri = ?{own_rows(conn, 'AND')}", (uri,)).fetchone()
    if state is None:
        if row:
            conn.execute("DELETE FROM chunk_vectors WHERE chunk_id IN (SELECT id FROM chunks WHERE source_id = ?)", row)
            conn.execute("DELETE FROM chunks WHERE source_id = ?", row)
            conn.execute("DELETE FROM sources WHERE id = ?", row)
        return
    values = (
        state["source_type"],
        state["fingerprint"],
        state["timestamp"],
        state["title"],
        json.dumps(state["metadata"], ensure_ascii=False),
        time.time(),
    )
    if row:
        source_id = row[0]
        conn.execute("DELETE FROM chunks WHERE source_id = ?", (source_id,))
        conn.execute(
            "UPDATE sources SET source_type = ?, fingerprint = ?, timestamp = ?, title = ?, metadata = ?,"
            " ingested_at = ? WHERE id = ?",
            (*values, source_id),
        )
    else:
        source_id = _former_id(conn, uri)
        conn.execute(
            "INSERT INTO sources (source_type, fingerprint, timestamp, title, metadata, ingested_at, uri, id)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (*values, uri, source_id),
        )
    _insert_chunks(conn, source_id, state)
    if state["source_type"] == "memory":  # an agent's memory keeps its attributes in a row of its own too
        from crossmodalrag.agent.memories import restore_memory_row

        restore_memory_row(conn, source_id, state)


def make_way(conn: sqlite3.Connection, uri: str, since: int, reason: str) -> None:
    """Before a rollback restores `uri` to its state at seq `since`: when the source there now is another
    one, which took the uri after the one there then left (deleted, or moved away), remove it (logged, its
    id retired), so the earlier one comes back as itself, under its former id (SQLite). Updated in place,
    the newer source's id would open the older text, and the older one's id nothing."""
    former = _former_id_if_taken(conn, uri, since)
    if former is None:
        return
    with changing(conn, "source", uri, reason):
        restore_source(conn, uri, None)
    if former:  # the delete trigger just recorded the newer id there: the restore must take the former one
        conn.execute("INSERT OR REPLACE INTO deleted_source_ids (uri, id) VALUES (?, ?)", (uri, former))


def _former_id_if_taken(conn: sqlite3.Connection, uri: str, since: int) -> int | None:
    """None when the source at `uri` now is the one there at seq `since` (no source was inserted there
    since: every write since updated it). Else the id the earlier one left behind (SQLite), or 0 for a new
    one (PostgreSQL, which keeps none). A source inserted since without a former id left behind is the
    earlier one itself, given back its id by an earlier rollback (which took the record): it stays."""
    taken = conn.execute(
        "SELECT 1 FROM change_log WHERE kind = 'source' AND target = ? AND op = 'insert' AND seq > ? LIMIT 1",
        (uri, since),
    ).fetchone()
    if not taken:
        return None
    if fts.on_postgres(conn):
        return 0
    row = conn.execute(
        "SELECT id FROM deleted_source_ids d WHERE uri = ? AND NOT EXISTS (SELECT 1 FROM sources WHERE id = d.id)",
        (uri,),
    ).fetchone()
    return row[0] if row else None


def _former_id(conn: sqlite3.Connection, uri: str) -> int:
    """The id a source deleted from `uri` (or moved away from it) had, when no row holds it (on SQLite
    none can: ids are never handed out twice), so that its citations open it again; else a new one.
    PostgreSQL's ids come from sequences and keep no such record: a new one there."""
    from crossmodalrag.store.documents import new_source_id

    if not fts.on_postgres(conn):
        row = conn.execute(
            "SELECT id FROM deleted_source_ids d WHERE uri = ? AND NOT EXISTS (SELECT 1 FROM sources WHERE id = d.id)",
            (uri,),
        ).fetchone()
        if row:
            conn.execute("DELETE FROM deleted_source_ids WHERE uri = ?", (uri,))
            return row[0]
    return new_source_id(conn)


def _insert_chunks(conn: sqlite3.Connection, source_id: int, state: State) -> None:
    from crossmodalrag.store.documents import new_chunk_ids, said_at

    ids = new_chunk_ids(conn, len(state["chunks"]))
    # A chunk's own time is derived from its metadata (index 4), so the state need not hold it.
    rows: Iterable = (
        (ids[i], source_id, i, *chunk, said_at(json.loads(chunk[4] or "{}"))) for i, chunk in enumerate(state["chunks"])
    )
    conn.executemany(
        f"INSERT INTO chunks (id, source_id, chunk_index, {CHUNK_COLUMNS}, said_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        rows,
    )
    fts.insert_rows(conn, [(ids[i], state["title"], chunk[0]) for i, chunk in enumerate(state["chunks"])])


@contextmanager
def changing_source(conn: sqlite3.Connection, source_id: int, reason: str = "") -> Iterator[None]:
    """Wrap a direct update of a source's row or chunks (by id), inside its transaction (see changing)."""
    row = conn.execute("SELECT uri FROM sources WHERE id = ?", (source_id,)).fetchone()
    if row is None:
        yield
        return
    with changing(conn, "source", row[0], reason):
        yield


def source_digest(state: State) -> str:
    """sha256 of the state's canonical JSON without chunk texts, then each text's UTF-8 bytes with its
    length: the texts are most of a state, and escaping them into JSON doubled the cost of a write."""
    texts = [chunk[0] for chunk in state["chunks"]]
    digest = hashlib.sha256(canonical({**state, "chunks": [chunk[1:] for chunk in state["chunks"]]}))
    for text in texts:
        data = text.encode("utf-8", "surrogatepass")
        digest.update(b"%d:" % len(data))
        digest.update(data)
    return digest.hexdigest()


register_kind(Kind("source", read_source, read_all_sources, restore_source, digest=source_digest))
