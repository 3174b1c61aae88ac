"""The memory-mapped copy of the vectors beside the database: updated, not rebuilt, when vectors change."""

from __future__ import annotations

import numpy as np

from crossmodalrag.index import embeddings
from crossmodalrag.index.embeddings import cached_vectors, embed_missing, load_vectors, vectors_stamp
from tests.fakes import HashingEmbedder
from tests.retrieval.helpers import add_docs, note


def cached(store, embedder):
    return cached_vectors(store, embedder.identity, vectors_stamp(store, embedder.identity))


def test_a_stale_copy_is_updated_with_only_the_rows_written_since(store, monkeypatch) -> None:
    """One note saved under `mem sync --watch` made the next question read every vector out of SQLite
    again (16 s and 1.3 GB at 335k chunks): the copy keeps its rows still stored and reads the new ones."""
    embedder = HashingEmbedder()
    add_docs(store, note("alpha", "# Alpha\n\nFirst note about lighthouses."), note("beta", "# Beta\n\nSecond one."))
    embed_missing(store, embedder)
    cached(store, embedder)
    add_docs(store, note("gamma", "# Gamma\n\nA third note, new."))  # new rows only
    add_docs(store, note("alpha", "# Alpha\n\nRewritten: its old vector is gone."))  # a row deleted, one added
    embed_missing(store, embedder)

    def no_full_read(*args):
        raise AssertionError("read every vector again")

    monkeypatch.setattr(embeddings, "load_vectors", no_full_read)
    ids, chunks, matrix = cached(store, embedder)
    monkeypatch.undo()
    want_ids, want_chunks, want_matrix = load_vectors(store, embedder.identity)
    assert ids.tolist() == want_ids.tolist() and chunks.tolist() == want_chunks.tolist()
    assert np.array_equal(np.asarray(matrix), want_matrix)
    folders = list(store.path.with_name(store.path.name + ".vectors").iterdir())
    assert [f.name for f in folders] == [vectors_stamp(store, embedder.identity)]  # the stale copy is gone


def test_a_copy_missing_rows_it_should_hold_is_rebuilt(store) -> None:
    embedder = HashingEmbedder()
    add_docs(store, note("alpha", "# Alpha\n\nFirst note about lighthouses."), note("beta", "# Beta\n\nSecond one."))
    embed_missing(store, embedder)
    ids, chunks, matrix = cached(store, embedder)
    folder = store.path.with_name(store.path.name + ".vectors") / vectors_stamp(store, embedder.identity)
    np.save(folder / "keys.npy", np.stack([ids[1:], chunks[1:]]))  # damaged: a row lost
    np.save(folder / "matrix.npy", np.asarray(matrix)[1:])
    add_docs(store, note("gamma", "# Gamma\n\nA third note, new."))
    embed_missing(store, embedder)
    got_ids, _, got_matrix = cached(store, embedder)
    want_ids, _, want_matrix = load_vectors(store, embedder.identity)
    assert got_ids.tolist() == want_ids.tolist() and np.array_equal(np.asarray(got_matrix), want_matrix)
