"""Vectors in SQLite, the source of truth: which chunks lack one for the active model, filling
them in resumable batches, and reading them back for the in-memory index.

Each row is one piece of a chunk (see index/embed.py); a chunk is covered when all of its pieces
are stored. Vectors are tagged with the model identity, so a changed model never mixes with them.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Callable

from crossmodalrag.chunking.turns import semantic_text
from crossmodalrag.index.embed import Embedder, ModelIdentity, pieces
from crossmodalrag.store import Store
from crossmodalrag.store.writers import retrying

GROUP_BATCHES = 8  # batches fetched, length-sorted and committed together


@dataclass
class EmbedReport:
    chunks: int = 0
    pieces: int = 0
    seconds: float = 0.0

    def summary(self) -> str:
        rate = self.chunks / self.seconds if self.seconds else 0.0
        return f"{self.chunks} chunks embedded as {self.pieces} vectors in {self.seconds:.1f} s ({rate:.1f} chunks/s)"


def store_vectors(store: Store, rows: list[tuple]) -> int:
    """Write (chunk id, model id, piece, pieces, encoded vector) rows, replacing what was there; returns
    how many chunks got them. A chunk deleted since it was read (a forget or re-ingest ran while it was
    embedded) is skipped: its vectors would have nothing to describe, and the write would fail."""
    with store.transaction() as conn:
        present = _existing_chunks(conn, sorted({row[0] for row in rows}))
        kept = [row for row in rows if row[0] in present]
        if kept:
            conn.executemany(
                "INSERT OR REPLACE INTO chunk_vectors (chunk_id, model_id, piece, pieces, vector)"
                " VALUES (?, ?, ?, ?, ?)",
                kept,
            )
    return len(present)


def _existing_chunks(conn, chunk_ids: list[int], per_query: int = 500) -> set[int]:
    """Which of these chunk ids still exist; read inside the write transaction, so on SQLite no delete
    can come between (on PostgreSQL one that does makes the write collide, and `retrying` reruns it)."""
    present: set[int] = set()
    for start in range(0, len(chunk_ids), per_query):
        part = chunk_ids[start : start + per_query]
        marks = ", ".join("?" * len(part))
        present.update(r[0] for r in conn.execute(f"SELECT id FROM chunks WHERE id IN ({marks})", part))
    return present


def has_unembedded(store: Store) -> bool:
    """Whether this memory uses vectors and some chunk has none yet (an embedding run interrupted):
    a sync then embeds them even when no file changed."""
    return store.conn.execute(
        "SELECT EXISTS (SELECT 1 FROM embedding_models) AND EXISTS (SELECT 1 FROM chunks c"
        " WHERE NOT EXISTS (SELECT 1 FROM chunk_vectors v WHERE v.chunk_id = c.id))"
    ).fetchone()[0]


def model_row(store: Store, identity: ModelIdentity) -> int:
    """The id of this model identity in `embedding_models`, registering it on first use."""
    key = (identity.name, identity.sha256, identity.dim)
    row = store.conn.execute(
        "SELECT id FROM embedding_models WHERE name = ? AND sha256 = ? AND dim = ?", key
    ).fetchone()
    if row:
        return row[0]
    with store.transaction() as conn:
        conn.execute(
            "INSERT OR IGNORE INTO embedding_models (name, sha256, dim, max_tokens, created_at) VALUES (?, ?, ?, ?, ?)",
            (*key, identity.max_tokens, time.time()),
        )
    return store.conn.execute(
        "SELECT id FROM embedding_models WHERE name = ? AND sha256 = ? AND dim = ?", key
    ).fetchone()[0]


def vector_status(store: Store, identity: ModelIdentity) -> dict[str, int]:
    """Chunks in memory, chunks with vectors for this model, and vectors stored for other models."""
    conn = store.conn
    row = conn.execute(
        "SELECT id FROM embedding_models WHERE name = ? AND sha256 = ? AND dim = ?",
        (identity.name, identity.sha256, identity.dim),
    ).fetchone()
    model_id = row[0] if row else -1
    total = conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
    covered = conn.execute(
        "SELECT COUNT(DISTINCT chunk_id) FROM chunk_vectors WHERE model_id = ?", (model_id,)
    ).fetchone()[0]
    others = conn.execute("SELECT COUNT(*) FROM chunk_vectors WHERE model_id != ?", (model_id,)).fetchone()[0]
    return {"chunks": total, "embedded": covered, "missing": total - covered, "other_model_vectors": others}


def _missing(store: Store, model_id: int, after_id: int, limit: int) -> list[tuple[int, str]]:
    return store.conn.execute(
        "SELECT c.id, c.text FROM chunks c WHERE c.id > ? AND NOT EXISTS "
        "(SELECT 1 FROM chunk_vectors v WHERE v.model_id = ? AND v.chunk_id = c.id) ORDER BY c.id LIMIT ?",
        (after_id, model_id, limit),
    ).fetchall()


def embed_missing(
    store: Store,
    embedder: Embedder,
    batch_size: int = 32,
    progress: Callable[[EmbedReport, int], None] | None = None,
) -> EmbedReport:
    """Embed every chunk that has no vector for the active model; each batch commits on its own,
    so an interrupted run resumes where it stopped and a finished one is a no-op."""
    report = EmbedReport()
    started = time.perf_counter()
    model_id = model_row(store, embedder.identity)
    remaining = vector_status(store, embedder.identity)["missing"]
    after_id = 0
    while rows := _missing(store, model_id, after_id, max(1, batch_size) * GROUP_BATCHES):
        after_id = rows[-1][0]
        split = [
            (chunk_id, index, len(parts), part)
            for chunk_id, text in rows
            for parts in [pieces(embedder, semantic_text(text))]
            for index, part in enumerate(parts)
        ]
        vectors = _embed_by_length(embedder, [part for *_, part in split], max(1, batch_size))
        stored = [
            (chunk_id, model_id, index, count, store.encode_vector(vector))
            for (chunk_id, index, count, _), vector in zip(split, vectors, strict=True)
        ]
        # PostgreSQL may abort a colliding write: run it again
        report.chunks += retrying(partial(store_vectors, store, stored))
        report.pieces += len(split)
        report.seconds = time.perf_counter() - started
        if progress:
            progress(report, remaining)
    return report


def _embed_by_length(embedder: Embedder, texts: list[str], batch_size: int):
    """Embed in batches of similar length: a batch is padded to its longest text, so mixing a
    short commit message with a full-window note wastes most of the work."""
    import numpy as np

    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    out = np.empty((len(texts), embedder.identity.dim), dtype=np.float32)
    for start in range(0, len(order), batch_size):
        batch = order[start : start + batch_size]
        out[batch] = embedder.embed([texts[i] for i in batch])
    return out


def load_vectors(store: Store, identity: ModelIdentity):
    """(piece row ids, chunk id of each row, float32 matrix) of the model's stored vectors."""
    import numpy as np

    row = store.conn.execute(
        "SELECT id FROM embedding_models WHERE name = ? AND sha256 = ? AND dim = ?",
        (identity.name, identity.sha256, identity.dim),
    ).fetchone()
    if row is None:
        return np.empty(0, np.int64), np.empty(0, np.int64), np.empty((0, identity.dim), np.float32)
    rows = store.conn.execute(
        "SELECT id, chunk_id, vector FROM chunk_vectors WHERE model_id = ? ORDER BY id", (row[0],)
    ).fetchall()
    ids = np.fromiter((r[0] for r in rows), np.int64, len(rows))
    chunks = np.fromiter((r[1] for r in rows), np.int64, len(rows))
    matrix = np.frombuffer(b"".join(r[2] for r in rows), dtype=np.float32).reshape(len(rows), identity.dim)
    return ids, chunks, matrix


def vectors_stamp(store: Store, identity: ModelIdentity) -> str:
    """Changes whenever this model's vectors change (count and newest row id)."""
    count, newest = store.conn.execute(
        "SELECT COUNT(*), MAX(v.id) FROM chunk_vectors v JOIN embedding_models m ON m.id = v.model_id "
        "WHERE m.name = ? AND m.sha256 = ? AND m.dim = ?",
        (identity.name, identity.sha256, identity.dim),
    ).fetchone()
    return f"{identity.sha256[:16]}-{identity.dim}-{count}-{newest}"


def cached_vectors(store: Store, identity: ModelIdentity, stamp: str):
    """load_vectors through a derived on-disk copy beside the database, memory-mapped.

    Reading 100k vectors out of SQLite takes over a second; the copy loads in milliseconds. It
    lives in `<db>.vectors/<stamp>/`, is written to a temporary folder and renamed into place
    (readers never see half of it), and any copy with another stamp is stale and removed.
    """
    import numpy as np

    root = store.path.with_name(store.path.name + ".vectors")
    current = root / stamp
    try:
        keys = np.load(current / "keys.npy")
        return keys[0], keys[1], np.load(current / "matrix.npy", mmap_mode="r")
    except (OSError, ValueError, IndexError):
        pass  # missing, stale or damaged: rebuild from the source of truth
    ids, chunks, matrix = load_vectors(store, identity)
    try:
        root.mkdir(exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".tmp-", dir=root))
        np.save(staging / "keys.npy", np.stack([ids, chunks]))
        np.save(staging / "matrix.npy", matrix)
        os.replace(staging, current)
        for old in root.iterdir():
            if old.is_dir() and old.name != stamp and not old.name.startswith(".tmp-"):
                shutil.rmtree(old, ignore_errors=True)
    except OSError:
        pass  # a read-only folder only costs speed
    return ids, chunks, matrix
