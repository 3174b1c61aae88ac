"""Nearest-neighbour search over chunk embeddings: exact (numpy) or approximate (usearch HNSW).

The float32 vectors in SQLite are the source of truth; everything here is derived and rebuildable.
Scores are inner products of L2-normalised vectors (= cosine), best first. Keys are the caller's
non-negative int64 ids (usearch stores unsigned keys and reserves the all-ones value).
"""

from __future__ import annotations

import contextlib
import json
import os
import warnings
from pathlib import Path
from typing import Protocol

import numpy as np

INSTALL_HINT = "pip install 'crossmodalrag[embeddings]'"
SIDECAR_FORMAT = 1
# HNSW graph: degree 16, build beam 128 (usearch defaults, measured recall@10 0.97 at 1M x 384);
# the search beam is doubled over usearch's 64 because ~0.1 ms buys margin over the 0.95 target.
CONNECTIVITY = 16
EXPANSION_ADD = 128
EXPANSION_SEARCH = 128
# search_batch computes at most this many scores at a time (256 MB of float32).
BATCH_SCORE_BUDGET = 64 * 1024 * 1024


class VectorIndex(Protocol):
    dim: int

    def search(self, query: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]: ...

    def search_batch(self, queries: np.ndarray, k: int) -> list[tuple[np.ndarray, np.ndarray]]: ...

    def __len__(self) -> int: ...


def _check_keys_vectors(keys: np.ndarray, vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Coerce to int64 keys and a 2-D float32 matrix; raises ValueError on mismatched or bad ids."""
    keys = np.asarray(keys, dtype=np.int64).reshape(-1)
    vectors = np.asarray(vectors, dtype=np.float32)
    if vectors.ndim != 2 and vectors.size == 0:
        vectors = vectors.reshape(0, 0)
    if vectors.ndim != 2 or vectors.shape[0] != keys.shape[0]:
        raise ValueError(f"need vectors of shape ({keys.shape[0]}, dim), got {vectors.shape}")
    if keys.size and vectors.shape[1] == 0:
        raise ValueError("vectors have no dimensions")
    if keys.size and keys.min() < 0:
        raise ValueError("vector keys must be non-negative ids")
    if keys.size > 1 and np.any(np.diff(np.sort(keys)) == 0):
        raise ValueError("vector keys must be unique")
    return keys, vectors


def _normalized_rows(vectors: np.ndarray) -> np.ndarray:
    """Return rows scaled to unit length, copying only when some row is off by more than 1e-3."""
    norms = np.sqrt(np.einsum("ij,ij->i", vectors, vectors))
    if vectors.size == 0 or np.all(np.abs(norms - 1.0) <= 1e-3):
        return np.ascontiguousarray(vectors)
    norms[norms == 0] = 1.0  # an all-zero row stays zero and scores 0 against everything
    return np.ascontiguousarray(vectors / norms[:, None], dtype=np.float32)


def _check_queries(queries: np.ndarray, dim: int) -> np.ndarray:
    """Return unit-length float32 queries shaped (m, dim); raises ValueError on a wrong dimension."""
    queries = np.asarray(queries, dtype=np.float32)
    queries = queries.reshape(1, -1) if queries.ndim == 1 else queries
    if queries.ndim != 2 or (queries.shape[1] != dim and dim):  # dim 0: an empty index of unknown width
        raise ValueError(f"query has dimension {queries.shape[-1]}, the index has {dim}")
    return _normalized_rows(queries)


def _nothing(queries: np.ndarray, k: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Empty results, one per query row; raises ValueError on a negative k."""
    if k < 0:
        raise ValueError(f"k must be >= 0, got {k}")
    return [(np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)) for _ in range(len(queries))]


class ExactIndex:
    """Brute-force inner product over an in-memory matrix (rows are renormalised if they are not unit length)."""

    def __init__(self, keys: np.ndarray, vectors: np.ndarray) -> None:
        """Wrap keys (n,) and vectors (n, d), sharing (not copying) unit float32 input; raises ValueError."""
        self.keys, vectors = _check_keys_vectors(keys, vectors)
        self.matrix = _normalized_rows(vectors)
        self.dim = self.matrix.shape[1]
        # Sorted keys let scores_for map ids to rows with searchsorted instead of a dict of n ints.
        self._key_order = np.argsort(self.keys, kind="stable")
        self._sorted_keys = self.keys[self._key_order]

    def __len__(self) -> int:
        return int(self.keys.shape[0])

    def search(self, query: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-k (keys, scores) best first; raises ValueError on a wrong dimension or negative k."""
        return self.search_batch(query, k)[0]

    def search_batch(self, queries: np.ndarray, k: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """Top-k per query row via chunked matrix products; raises ValueError like `search`."""
        queries = _check_queries(queries, self.dim)
        if len(self) == 0 or k <= 0:
            return _nothing(queries, k)
        step = max(1, BATCH_SCORE_BUDGET // len(self))
        results: list[tuple[np.ndarray, np.ndarray]] = []
        for start in range(0, queries.shape[0], step):
            block = queries[start : start + step] @ self.matrix.T
            results.extend(self._top(row, k) for row in block)
        return results

    def scores_for(self, query: np.ndarray, keys: np.ndarray) -> np.ndarray:
        """Exact cosine of the query with each given key (nan where the key is absent); raises ValueError."""
        keys = np.asarray(keys, dtype=np.int64).reshape(-1)
        scores = np.full(keys.shape[0], np.nan, dtype=np.float32)
        query = _check_queries(query, self.dim)[0]
        if len(self) == 0 or keys.size == 0:
            return scores
        slots = np.clip(np.searchsorted(self._sorted_keys, keys), 0, len(self) - 1)
        found = self._sorted_keys[slots] == keys
        scores[found] = self.matrix[self._key_order[slots[found]]] @ query
        return scores

    def _top(self, scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        if k < scores.shape[0]:
            candidates = np.argpartition(-scores, k - 1)[:k]
        else:
            candidates = np.arange(scores.shape[0])
        best = candidates[np.argsort(-scores[candidates], kind="stable")]
        return self.keys[best], scores[best].astype(np.float32, copy=False)


def _usearch():
    """Import usearch lazily so the core never needs it; raises ImportError naming the install."""
    # usearch 2.26 + onnxruntime 1.32: importing onnxruntime AFTER usearch segfaults the process
    # (their bundled SIMD libraries clash); the other order is fine, and the embedder needs it anyway.
    with contextlib.suppress(ImportError):
        import onnxruntime  # noqa: F401
    try:
        from usearch.index import Index
    except ImportError as error:
        raise ImportError(f"approximate vector search needs usearch: {INSTALL_HINT}") from error
    return Index


def usearch_available() -> bool:
    """True when the optional usearch package can be imported."""
    try:
        _usearch()
    except ImportError:
        return False
    return True


def sidecar_path(path: Path) -> Path:
    """Where the JSON description of an index file lives: `<name>.json` beside it."""
    return path.with_name(path.name + ".json")


class ApproximateIndex:
    """HNSW graph (usearch) with inner-product metric; serves searches from a memory-mapped file after load."""

    def __init__(self, index, dim: int, dtype: str) -> None:
        self._index = index
        self.dim = dim
        self.dtype = dtype

    @classmethod
    def build(cls, keys: np.ndarray, vectors: np.ndarray, dtype: str = "f16", threads: int = 0) -> ApproximateIndex:
        """Build the graph using `threads` workers (0 = all cores); raises ValueError, ImportError (no usearch)."""
        if dtype not in ("f16", "i8", "f32"):
            raise ValueError(f"dtype must be f16, i8 or f32, got {dtype!r}")
        keys, vectors = _check_keys_vectors(keys, vectors)
        index = _usearch()(
            ndim=vectors.shape[1], metric="ip", dtype=dtype, connectivity=CONNECTIVITY,
            expansion_add=EXPANSION_ADD, expansion_search=EXPANSION_SEARCH, enable_key_lookups=False,
        )  # fmt: skip
        if len(keys):
            index.add(keys.astype(np.uint64), _normalized_rows(vectors), threads=threads)
        return cls(index, vectors.shape[1], dtype)

    def __len__(self) -> int:
        return len(self._index)

    @property
    def expansion_search(self) -> int:
        """Search beam width: higher trades latency for recall (not safe to change while searching)."""
        return int(self._index.expansion_search)

    @expansion_search.setter
    def expansion_search(self, value: int) -> None:
        self._index.expansion_search = int(value)

    def search(self, query: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Approximate top-k (keys, scores) best first; raises ValueError on a wrong dimension or negative k."""
        # One query gains nothing from usearch's thread pool, and callers may already run in threads.
        return self.search_batch(query, k, threads=1)[0]

    def search_batch(self, queries: np.ndarray, k: int, threads: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
        """Approximate top-k per query row, spread over `threads` (0 = all cores); raises ValueError."""
        queries = _check_queries(queries, self.dim)
        if len(self) == 0 or k <= 0:
            return _nothing(queries, k)
        batch = self._index.search(queries, int(k), threads=threads)
        if queries.shape[0] == 1:  # usearch answers a one-row batch with a single (trimmed) Matches
            return [(batch.keys.astype(np.int64), (1.0 - batch.distances).astype(np.float32))]
        return [
            (batch.keys[i, :n].astype(np.int64), (1.0 - batch.distances[i, :n]).astype(np.float32))
            for i, n in enumerate(batch.counts)
        ]

    def save(self, path: Path, stamp: str = "") -> None:
        """Write the index file atomically, then its JSON sidecar; raises OSError."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        # Drop the old sidecar first: a crash mid-save then leaves "no cache", never a mismatched pair.
        sidecar_path(path).unlink(missing_ok=True)
        temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            self._index.save(str(temporary))
            os.replace(temporary, path)  # readers that mapped the old file keep their inode
        finally:
            temporary.unlink(missing_ok=True)
        meta = {
            "format": SIDECAR_FORMAT, "count": len(self), "dim": self.dim, "dtype": self.dtype,
            "stamp": stamp, "bytes": path.stat().st_size, "connectivity": CONNECTIVITY,
        }  # fmt: skip
        temporary_meta = sidecar_path(path).with_name(f".{sidecar_path(path).name}.{os.getpid()}.tmp")
        temporary_meta.write_text(json.dumps(meta), encoding="utf-8")
        os.replace(temporary_meta, sidecar_path(path))

    @classmethod
    def load(cls, path: Path, stamp: str, view: bool = True) -> ApproximateIndex | None:
        """Open a saved index (memory-mapped when view); None if missing, stale, corrupt or usearch is absent."""
        path = Path(path)
        try:
            meta = json.loads(sidecar_path(path).read_text(encoding="utf-8"))
            if meta.get("format") != SIDECAR_FORMAT or meta.get("stamp") != stamp:
                return None
            if path.stat().st_size != meta["bytes"]:
                return None  # truncated or replaced behind the sidecar's back
            header = _usearch().metadata(str(path))
            if not header or header["dimensions"] != meta["dim"] or header["count_present"] != meta["count"]:
                return None
            index = _usearch().restore(str(path), view=view, enable_key_lookups=False)
            if index is None or len(index) != meta["count"]:
                return None
            index.expansion_search = EXPANSION_SEARCH  # a runtime setting, not stored in the file
            return cls(index, int(meta["dim"]), str(meta["dtype"]))
        except (OSError, ValueError, KeyError, TypeError, RuntimeError, ImportError):
            return None


def build_index(
    keys: np.ndarray,
    vectors: np.ndarray,
    approximate_from: int = 500_000,
    cache_path: Path | None = None,
    stamp: str = "",
    dtype: str = "f16",
) -> VectorIndex:
    """Exact index below `approximate_from` vectors, else a cached or fresh ApproximateIndex; raises ValueError.

    Without usearch it returns an ExactIndex and warns (RuntimeWarning, shown once per call site by
    Python's default filter) instead of raising: the core must work without the extra.
    """
    keys, vectors = _check_keys_vectors(keys, vectors)
    if len(keys) < approximate_from:
        return ExactIndex(keys, vectors)
    if not usearch_available():
        warnings.warn(
            f"{len(keys)} vectors: using exact search (slower); for approximate search {INSTALL_HINT}",
            RuntimeWarning,
            stacklevel=2,
        )
        return ExactIndex(keys, vectors)
    if cache_path is not None:
        cached = ApproximateIndex.load(cache_path, stamp)
        if cached is not None and (len(cached), cached.dim, cached.dtype) == (len(keys), vectors.shape[1], dtype):
            return cached
    index = ApproximateIndex.build(keys, vectors, dtype=dtype)
    if cache_path is not None:
        index.save(cache_path, stamp)
        # Serve from the mapped file so the heap copy of the graph can be freed.
        return ApproximateIndex.load(cache_path, stamp) or index
    return index
