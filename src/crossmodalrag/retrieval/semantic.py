"""The semantic side of retrieval: the active model plus an index over its stored vectors.

Loaded once per process and per database; the index is rebuilt only when the model's vectors
change (their stamp), so an API server sees new chunks without paying a rebuild per request.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from crossmodalrag.config import Settings
from crossmodalrag.store import Store

if TYPE_CHECKING:
    import numpy as np

    from crossmodalrag.index.embed import Embedder


class SemanticIndex:
    """Nearest chunks to a query vector, by each chunk's best-matching piece."""

    def __init__(self, store: Store, embedder: "Embedder", settings: Settings) -> None:
        self.store = store
        self.embedder = embedder
        self.settings = settings
        self.stamp = ""
        self._index = None
        self._matrix = None
        self._chunk_of = None
        self._rows_of: dict[int, list[int]] = {}

    def refresh(self) -> None:
        """Rebuild the in-memory index if the stored vectors changed since the last build."""
        from crossmodalrag.index.embeddings import load_vectors, vectors_stamp
        from crossmodalrag.index.vectors import build_index

        stamp = vectors_stamp(self.store, self.embedder.identity)
        if stamp == self.stamp:
            return
        ids, chunks, matrix = load_vectors(self.store, self.embedder.identity)
        cache = self.store.path.with_name(f"{self.store.path.name}.{self.embedder.identity.sha256[:12]}.usearch")
        self._index = build_index(ids, matrix, self.settings.ann_min_vectors, cache, stamp)
        self._matrix = matrix
        self._chunk_of = dict(zip(ids.tolist(), chunks.tolist(), strict=True))
        self._rows_of = {}  # chunk id -> positions of its pieces in the matrix
        for position, chunk_id in enumerate(chunks.tolist()):
            self._rows_of.setdefault(chunk_id, []).append(position)
        self.stamp = stamp

    def query_vector(self, text: str) -> "np.ndarray":
        from crossmodalrag.index.embed import embed_queries

        return embed_queries(self.embedder, [text])[0]

    def nearest(self, query: "np.ndarray", n: int) -> dict[int, float]:
        """Up to n chunks, best first, each with its best piece's cosine similarity."""
        self.refresh()
        keys, scores = self._index.search(query, n * 2)  # pieces of one chunk share the result list
        best: dict[int, float] = {}
        for key, score in zip(keys.tolist(), scores.tolist(), strict=True):
            chunk = self._chunk_of[key]
            if chunk not in best:
                best[chunk] = float(score)
        return dict(list(best.items())[:n])

    def scores_for(self, query: "np.ndarray", chunk_ids: list[int]) -> dict[int, float]:
        """Exact cosine of each given chunk (best piece); chunks without vectors are left out."""
        self.refresh()
        best: dict[int, float] = {}
        for chunk in chunk_ids:
            positions = self._rows_of.get(chunk)
            if positions:
                best[chunk] = float((self._matrix[positions] @ query).max())
        return best

    def representative_vectors(self, chunk_ids: list[int]) -> dict[int, "np.ndarray"]:
        """The first piece's vector of each chunk that has one (for near-duplicate checks)."""
        self.refresh()
        return {c: self._matrix[self._rows_of[c][0]] for c in chunk_ids if c in self._rows_of}


@dataclass
class SemanticStatus:
    """Why semantic retrieval is or is not in use, in words a user can act on."""

    index: SemanticIndex | None
    notice: str | None = None


_OPEN: dict[tuple, SemanticIndex] = {}


def embeddings_installed() -> bool:
    from importlib.util import find_spec

    return find_spec("fastembed") is not None and find_spec("numpy") is not None


def open_semantic(store: Store, settings: Settings) -> SemanticStatus:
    """The semantic index for this store, or None with a one-line notice saying why and what to do.

    The core install (no embeddings extra) is lexical by design and gets no notice.
    """
    if not embeddings_installed():
        return SemanticStatus(None)
    from crossmodalrag.index.embed import load_embedder
    from crossmodalrag.index.embeddings import vector_status
    from crossmodalrag.index.models import ModelUnavailable

    if store.conn.execute("SELECT 1 FROM chunk_vectors LIMIT 1").fetchone() is None:
        # Checked before loading the model: no vectors at all means nothing to gain from it.
        has_chunks = store.conn.execute("SELECT 1 FROM chunks LIMIT 1").fetchone() is not None
        return SemanticStatus(
            None, "lexical retrieval only: no vectors yet; run `mem reindex-embeddings`" if has_chunks else None
        )
    try:
        embedder = load_embedder(settings)
    except ModelUnavailable as error:
        return SemanticStatus(None, f"lexical retrieval only: {error}")
    status = vector_status(store, embedder.identity)
    if status["embedded"] == 0:
        if status["chunks"] == 0:
            return SemanticStatus(None)
        why = "vectors were made by another model" if status["other_model_vectors"] else "no vectors yet"
        return SemanticStatus(
            None,
            f"lexical retrieval only: {why} for {embedder.identity.name}; run `mem reindex-embeddings`",
        )
    key = (str(store.path), embedder.identity)
    index = _OPEN.get(key)
    if index is None or index.store is not store:
        index = _OPEN[key] = SemanticIndex(store, embedder, settings)
    notice = None
    if status["missing"]:
        notice = f"{status['missing']} chunks have no vectors yet; run `mem reindex-embeddings`"
    return SemanticStatus(index, notice)
