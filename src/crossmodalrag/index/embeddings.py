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
from crossmodalrag.store.turns import embedding_turn
from crossmodalrag.store.writers import retrying
from crossmodalrag.wording import counted

GROUP_BATCHES = 8  # batches fetched, length-sorted and committed together


@dataclass
class EmbedReport:
    chunks: int = 0
    pieces: int = 0
    seconds: float = 0.0

    def summary(self) -> str:
        rate = self.chunks / self.seconds if self.seconds else 0.0
        made = f"{counted(self.chunks, 'chunk')} embedded as {counted(self.pieces, 'vector')}"
        return f"{made} in {self.seconds:.1f} s ({rate:.1f} chunks/s)"


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


def unembedded_count(store: Store) -> int:
    """How many chunks have no vector of any model."""
    return store.conn.execute(
        "SELECT COUNT(*) FROM chunks c WHERE NOT EXISTS (SELECT 1 FROM chunk_vectors v WHERE v.chunk_id = c.id)"
    ).fetchone()[0]


def registered_model(store: Store, identity: ModelIdentity) -> int | None:
    """The id of this model identity in `embedding_models`, or None while no vector was stored for it."""
    row = store.conn.execute(
        "SELECT id FROM embedding_models WHERE name = ? AND sha256 = ? AND dim = ?",
        (identity.name, identity.sha256, identity.dim),
    ).fetchone()
    return row[0] if row else None


def model_row(store: Store, identity: ModelIdentity) -> int:
    """The id of this model identity in `embedding_models`, registering it on first use."""
    key = (identity.name, identity.sha256, identity.dim)
    if (known := registered_model(store, identity)) is not None:
        return known
    with store.transaction() as conn:
        conn.execute(
            "INSERT OR IGNORE INTO embedding_models (name, sha256, dim, max_tokens, created_at) VALUES (?, ?, ?, ?, ?)",
            (*key, identity.max_tokens, time.time()),
        )
    return registered_model(store, identity)


def vector_status(store: Store, identity: ModelIdentity) -> dict[str, int]:
    """Chunks in memory, chunks with vectors for this model, and vectors stored for other models."""
    conn = store.conn
    model_id = registered_model(store, identity) or -1
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
    on_wait: Callable[[], None] | None = None,
) -> EmbedReport:
    """Embed every chunk that has no vector for the active model; each batch commits on its own,
    so an interrupted run resumes where it stopped and a finished one is a no-op. Another process
    embedding the same database goes first (`on_wait` is told), and this one embeds what it left."""
    local = getattr(store, "backend", "sqlite") == "sqlite"
    with embedding_turn(store.path if local else None, on_wait):
        return _embed_backlog(store, embedder, batch_size, progress)


def _embed_backlog(store: Store, embedder: Embedder, batch_size: int, progress) -> EmbedReport:
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
        vectors = embed_by_length(embedder, [part for *_, part in split], max(1, batch_size))
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


def embed_by_length(embedder: Embedder, texts: list[str], batch_size: int):
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

    model_id = registered_model(store, identity)
    if model_id is None:
        return np.empty(0, np.int64), np.empty(0, np.int64), np.empty((0, identity.dim), np.float32)
    return _read_rows(store, model_id, identity.dim)


def _read_rows(store: Store, model_id: int, dim: int, after: int = 0):
    """(row ids, chunk ids, matrix) of the model's rows with an id above `after`, streamed into arrays
    sized first: fetching every blob, then joining them, held the vectors three times over (1.3 GB
    at 335k chunks)."""
    import numpy as np

    where = "WHERE model_id = ? AND id > ?"
    count = store.conn.execute(f"SELECT COUNT(*) FROM chunk_vectors {where}", (model_id, after)).fetchone()[0]
    ids, chunks = np.empty(count, np.int64), np.empty(count, np.int64)
    matrix = np.empty((count, dim), np.float32)
    rows = store.conn.execute(f"SELECT id, chunk_id, vector FROM chunk_vectors {where} ORDER BY id", (model_id, after))
    filled = 0
    for filled, (row_id, chunk_id, blob) in enumerate(rows, start=1):
        if filled > count:  # written meanwhile (another connection): read again next time
            filled = count
            break
        ids[filled - 1], chunks[filled - 1] = row_id, chunk_id
        matrix[filled - 1] = np.frombuffer(blob, dtype=np.float32)
    return ids[:filled], chunks[:filled], matrix[:filled]


def vectors_stamp(store: Store, identity: ModelIdentity) -> str:
    """Changes whenever this model's vectors change (count and newest row id)."""
    count, newest = store.conn.execute(
        "SELECT COUNT(*), MAX(v.id) FROM chunk_vectors v JOIN embedding_models m ON m.id = v.model_id "
        "WHERE m.name = ? AND m.sha256 = ? AND m.dim = ?",
        (identity.name, identity.sha256, identity.dim),
    ).fetchone()
    return f"{identity.sha256[:16]}-{identity.dim}-{count}-{newest}"


def vector_cache_dir(store: Store) -> Path | None:
    """Where the derived copies of the vectors go: `<db>.vectors/` beside the database; None beside a
    backup (`mem backup` wrote a `.sha256` beside it), which reading with mem leaves as it found it:
    with nothing beside it (it may be on a read-only stick, and forget would not know the copy)."""
    from crossmodalrag.store.copies import checksum_path

    if checksum_path(store.path).is_file():
        return None
    return store.path.with_name(store.path.name + ".vectors")


def cached_vectors(store: Store, identity: ModelIdentity, stamp: str):
    """load_vectors through a derived on-disk copy beside the database, memory-mapped.

    Reading 100k vectors out of SQLite takes over a second; the copy loads in milliseconds. It
    lives in `<db>.vectors/<stamp>/`, is written to a temporary folder and renamed into place
    (readers never see half of it), and any copy with another stamp is stale and removed. A stale
    copy is updated rather than rebuilt: its rows still stored are kept and only newer ones read
    (one note saved under `mem sync --watch` re-read all 335k vectors before the next question, 16 s).
    """
    import numpy as np

    root = vector_cache_dir(store)
    if root is None:
        return load_vectors(store, identity)
    current = root / stamp
    try:
        return _load_copy(current)
    except (OSError, ValueError, IndexError):
        pass  # missing, stale or damaged: rebuild from the source of truth
    ids, chunks, parts = _updated_copy(store, identity, root, stamp) or _whole(load_vectors(store, identity))
    try:
        root.mkdir(exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".tmp-", dir=root))
        np.save(staging / "keys.npy", np.stack([ids, chunks]))
        matrix = np.lib.format.open_memmap(staging / "matrix.npy", "w+", np.float32, (len(ids), identity.dim))
        done = 0
        for rows in _rows(parts):  # written block by block: the stale copy is read as a map, not loaded
            matrix[done : done + len(rows)] = rows
            done += len(rows)
        matrix.flush()
        del matrix
        os.replace(staging, current)
        for old in root.iterdir():
            if old.is_dir() and old.name != stamp and not old.name.startswith(".tmp-"):
                shutil.rmtree(old, ignore_errors=True)
        return _load_copy(current)
    except OSError:
        pass  # a read-only folder only costs speed
    return ids, chunks, np.concatenate(list(_rows(parts))) if ids.size else np.empty((0, identity.dim), np.float32)


def _whole(vectors):
    ids, chunks, matrix = vectors
    return ids, chunks, [(matrix, None)]


def _rows(parts, block: int = 16_384):
    """The rows of (matrix, kept rows or None) parts, in order, a block at a time."""
    for matrix, kept in parts:
        for start in range(0, len(matrix), block):
            rows = matrix[start : start + block]
            yield rows if kept is None else rows[kept[start : start + block]]


def _load_copy(folder: Path):
    import numpy as np

    keys = np.load(folder / "keys.npy")
    return keys[0], keys[1], np.load(folder / "matrix.npy", mmap_mode="r")


def _updated_copy(store: Store, identity: ModelIdentity, root: Path, stamp: str):
    """The newest stale copy of this model's vectors brought up to date, as (row ids, chunk ids, parts
    of the matrix to write): its rows the database still holds (a row's vector never changes: a new
    one gets a new id, AUTOINCREMENT), then the rows written after it. None without a usable copy."""
    import numpy as np

    model = stamp.rsplit("-", 2)[0]  # "<sha>-<dim>": the stamp's count and newest id follow
    copies = []
    for folder in root.glob(f"{model}-*-*") if root.is_dir() else []:
        count, newest = folder.name.rsplit("-", 2)[1:]
        if count.isdigit() and newest.isdigit():
            copies.append((int(newest), folder))
    if not copies:
        return None
    newest, folder = max(copies)
    try:
        ids, chunks, matrix = _load_copy(folder)
    except (OSError, ValueError, IndexError):
        return None
    model_id = registered_model(store, identity)
    if model_id is None or matrix.shape[1:] != (identity.dim,):
        return None
    query = "SELECT id FROM chunk_vectors WHERE model_id = ? AND id <= ?"
    still = np.fromiter((r[0] for r in store.conn.execute(query, (model_id, newest))), np.int64)
    kept = np.isin(ids, still, assume_unique=True)
    if int(kept.sum()) != len(still):
        return None  # the copy misses rows it should hold: rebuild
    new_ids, new_chunks, new_matrix = _read_rows(store, model_id, identity.dim, after=newest)
    parts = [(matrix, kept), (new_matrix, None)]
    return np.concatenate([ids[kept], new_ids]), np.concatenate([chunks[kept], new_chunks]), parts
