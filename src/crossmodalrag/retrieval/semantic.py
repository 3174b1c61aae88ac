"""The semantic side of retrieval: the active model plus an index over its stored vectors.

Loaded once per process and per database; the index is rebuilt only when the model's vectors
change (their stamp), so an API server sees new chunks without paying a rebuild per request.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from crossmodalrag.config import Settings
from crossmodalrag.store import Store
from crossmodalrag.wording import counted

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
        self._matrix = None  # one row per stored piece; the index's keys are row positions
        self._chunks = None  # chunk id of each row
        self._by_chunk = None  # row positions sorted by chunk id, for chunk -> rows lookups
        self._seen: tuple[int, int] | None = None  # the database's version when the stamp was last read

    def refresh(self) -> None:
        """Rebuild the in-memory index if the stored vectors changed since the last build."""
        from crossmodalrag.index.embeddings import vectors_stamp

        # The stamp counts the model's vectors (~1 ms at 10k, more as memory grows) and a search asks
        # here up to a dozen times: SQLite's data_version (commits by other connections) and this
        # connection's total_changes (its own) say for free whether anything could have changed.
        conn = self.store.conn
        seen = (conn.execute("PRAGMA data_version").fetchone()[0], conn.total_changes)
        if seen == self._seen:
            return
        stamp = vectors_stamp(self.store, self.embedder.identity)
        if stamp != self.stamp:
            self._load(stamp)
        self._seen = seen

    def _load(self, stamp: str) -> None:
        key = (str(self.store.path), self.embedder.identity)
        loaded = _LOADED.get(key)
        if loaded is None or loaded.stamp != stamp:
            loaded = _LOADED[key] = _load_vectors(self.store, self.embedder, self.settings, stamp)
        self._index, self._matrix, self._chunks, self._by_chunk = (
            loaded.index,
            loaded.matrix,
            loaded.chunks,
            loaded.by_chunk,
        )
        self.stamp = stamp

    def query_vector(self, text: str) -> "np.ndarray":
        from crossmodalrag.index.embed import embed_queries

        return embed_queries(self.embedder, [text])[0]

    def nearest(self, query: "np.ndarray", n: int) -> dict[int, float]:
        """Up to n chunks, best first, each with its best piece's cosine similarity."""
        self.refresh()
        keys, scores = self._index.search(query, n * 2)  # pieces of one chunk share the result list
        best: dict[int, float] = {}
        for chunk, score in zip(self._chunks[keys].tolist(), scores.tolist(), strict=True):
            if chunk not in best:
                best[chunk] = float(score)
        return dict(list(best.items())[:n])

    def _rows(self, chunk_ids: list[int]) -> list[tuple[int, "np.ndarray"]]:
        import numpy as np

        sorted_chunks = self._chunks[self._by_chunk]
        wanted = np.asarray(chunk_ids, dtype=np.int64)
        low = np.searchsorted(sorted_chunks, wanted, "left")
        high = np.searchsorted(sorted_chunks, wanted, "right")
        return [(c, self._by_chunk[lo:hi]) for c, lo, hi in zip(chunk_ids, low, high, strict=True) if hi > lo]

    def scores_for(self, query: "np.ndarray", chunk_ids: list[int]) -> dict[int, float]:
        """Exact cosine of each given chunk (best piece); chunks without vectors are left out."""
        self.refresh()
        return {chunk: float((self._matrix[rows] @ query).max()) for chunk, rows in self._rows(chunk_ids)}

    def representative_vectors(self, chunk_ids: list[int]) -> dict[int, "np.ndarray"]:
        """The first piece's vector of each chunk that has one (for near-duplicate checks)."""
        self.refresh()
        return {chunk: self._matrix[rows[0]] for chunk, rows in self._rows(chunk_ids)}


@dataclass(frozen=True)
class _Vectors:
    """One build of a model's stored vectors, read-only once made."""

    stamp: str
    index: object
    matrix: "np.ndarray"
    chunks: "np.ndarray"
    by_chunk: "np.ndarray"


# The latest build per database file and model, shared by every connection to that file: the console
# serves requests from a pool of read-only connections, and an index bound to one connection was built
# again whenever another asked (a /health beside an /ask swapped the cached index out and back).
_LOADED: dict[tuple, _Vectors] = {}


def _load_vectors(store: Store, embedder: "Embedder", settings: Settings, stamp: str) -> _Vectors:
    import numpy as np

    from crossmodalrag.index.embeddings import cached_vectors, vector_cache_dir
    from crossmodalrag.index.vectors import build_index

    _, chunks, matrix = cached_vectors(store, embedder.identity, stamp)
    folder = vector_cache_dir(store)  # None beside a backup: built in memory, not kept
    cache = folder / f"ann-{embedder.identity.sha256[:12]}.usearch" if folder else None
    positions = np.arange(len(chunks), dtype=np.int64)
    index = build_index(positions, matrix, settings.ann_min_vectors, cache, stamp)
    chunks = np.asarray(chunks)
    return _Vectors(stamp, index, matrix, chunks, np.argsort(chunks, kind="stable"))


def semantic_index(store: Store, embedder: "Embedder", settings: Settings) -> SemanticIndex:
    """In-process vectors (numpy / usearch) for SQLite; the server's pgvector index for PostgreSQL."""
    if getattr(store, "backend", "sqlite") == "postgresql":
        from crossmodalrag.store.postgres.vectors import PgSemanticIndex

        return PgSemanticIndex(store, embedder, settings)
    return SemanticIndex(store, embedder, settings)


@dataclass
class SemanticStatus:
    """Why semantic retrieval is or is not in use, in words a user can act on."""

    index: SemanticIndex | None
    notice: str | None = None


_OPEN: dict[tuple, SemanticIndex] = {}


def embeddings_installed() -> bool:
    from importlib.util import find_spec

    return find_spec("fastembed") is not None and find_spec("numpy") is not None


def _vectors_model(store: Store) -> str | None:
    """The name of the model that made the latest stored vectors."""
    row = store.conn.execute(
        "SELECT m.name FROM embedding_models m WHERE EXISTS (SELECT 1 FROM chunk_vectors v WHERE v.model_id = m.id)"
        " ORDER BY m.id DESC LIMIT 1"
    ).fetchone()
    return None if row is None else row[0]


def _made_by(store: Store, settings: Settings, active: str | None = None) -> str | None:
    """Why no model reads the stored vectors, when the model that made them is not the one in use:
    the offline model not beside this database (a copy of it moved elsewhere), or another model
    installed here but not selected (`multilingual-e5-small` installed and embedded with, then
    CMRAG_EMBED_MODEL unset). The default model's "not cached, hub unreachable", or "run `mem
    reindex-embeddings`" (every chunk embedded again), named a model the memory never used."""
    from crossmodalrag.index.models import OFFLINE_NAME, installed_models

    made_by = _vectors_model(store)
    if made_by is None or made_by == active:
        return None
    if made_by != OFFLINE_NAME:
        if any(model.name == made_by for model in installed_models(settings)):
            return (
                f"the stored vectors were made by {made_by}, installed in {settings.models_dir} but not selected"
                f" (hint: set CMRAG_EMBED_MODEL={made_by} to use it)"
            )
        return None
    if any(model.name == OFFLINE_NAME for model in installed_models(settings)):
        return None
    fix = _install_or_move(settings, "run `mem models install --offline` to install it there")
    return (
        f"the stored vectors were made by {OFFLINE_NAME}, the offline model, which is not in"
        f" {settings.models_dir} (hint: {fix})"
    )


def model_missing(store: Store, settings: Settings, error: Exception) -> str:
    """Why no model embeds here, in words about this memory: with no model asked for by name, the one
    that made the stored vectors (the default's "bge-small is not cached" named a model the memory never
    used); a model asked for says why in its own error."""
    named = settings.embed_model or settings.embed_model_path
    return (not named and _made_by(store, settings)) or str(error)


def _no_vectors(settings: Settings) -> str:
    """Why nothing is embedded yet, and the step that works: `mem reindex-embeddings` fails while no
    model is installed (it was the only hint, and the first thing a lexical-only user ran)."""
    from crossmodalrag.index.embed import model_on_disk

    if model_on_disk(settings):
        return "no vectors yet; run `mem reindex-embeddings`"
    first = _install_or_move(settings, "run `mem models install --offline`")
    return f"no vectors yet and no embedding model installed (hint: {first}, then `mem reindex-embeddings`)"


def _install_or_move(settings: Settings, install: str) -> str:
    """`install`, or moving the models a moved database left behind (models.left_behind)."""
    from crossmodalrag.index.models import left_behind, move_hint

    found = left_behind(settings)
    return move_hint(settings, found) if found else install


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
        return SemanticStatus(None, f"lexical retrieval only: {_no_vectors(settings)}" if has_chunks else None)
    try:
        embedder = load_embedder(settings)
    except ModelUnavailable as error:
        return SemanticStatus(None, f"lexical retrieval only: {model_missing(store, settings, error)}")
    status = vector_status(store, embedder.identity)
    if status["embedded"] == 0:
        if status["chunks"] == 0:
            return SemanticStatus(None)
        if status["other_model_vectors"] and (selectable := _made_by(store, settings, embedder.identity.name)):
            return SemanticStatus(None, f"lexical retrieval only: {selectable}")
        why = "vectors were made by another model" if status["other_model_vectors"] else "no vectors yet"
        return SemanticStatus(
            None,
            f"lexical retrieval only: {why} for {embedder.identity.name}; run `mem reindex-embeddings`",
        )
    key = (str(store.path), embedder.identity)
    index = _OPEN.get(key)
    if index is None or index.store is not store:
        index = _OPEN[key] = semantic_index(store, embedder, settings)
    notice = None
    if status["missing"]:
        have = "has" if status["missing"] == 1 else "have"
        notice = f"{counted(status['missing'], 'chunk')} {have} no vectors yet; run `mem reindex-embeddings`"
    return SemanticStatus(index, notice)
