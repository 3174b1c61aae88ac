"""Which retrieval a question gets right now: hybrid with the embedding model in use, or lexical only and why.

`mem stats`, `/stats`, `/health` and the console's Stats page listed the stored vectors per model as if
they were used, while every answer was lexical (the model that made them could not be loaded) and,
with two models' vectors stored, none was marked as the one in use. This asks what an ask asks
(retrieval/semantic.py open_semantic), so the words are the ones the answer's notice carries.
"""

from __future__ import annotations

from typing import Any

from crossmodalrag.config import Settings
from crossmodalrag.sources import store_stats
from crossmodalrag.store import Store

NO_EXTRA = 'lexical retrieval only: the embeddings extra is not installed (pip install -e ".[embeddings]")'


def retrieval_mode(store: Store, settings: Settings) -> dict[str, Any]:
    """{"mode": "hybrid" | "lexical", "embedding_model": the model whose vectors are searched (None when
    lexical), "notice": why lexical, or what is missing (None when nothing is)}."""
    from crossmodalrag.retrieval.semantic import embeddings_installed, open_semantic

    status = open_semantic(store, settings)
    if status.index is None:
        notice = status.notice if status.notice or embeddings_installed() else NO_EXTRA
        return {"mode": "lexical", "embedding_model": None, "notice": notice}
    return {"mode": "hybrid", "embedding_model": status.index.embedder.identity.name, "notice": status.notice}


def stats_report(store: Store, settings: Settings) -> dict[str, Any]:
    """What `mem stats --json` prints and `/stats` returns: the store's counts and the retrieval in use."""
    return {**store_stats(store), "retrieval": retrieval_mode(store, settings)}
