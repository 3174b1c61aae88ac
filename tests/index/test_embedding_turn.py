"""Two processes embedding one database take turns: the second embeds what the first left, not all of it again."""

from __future__ import annotations

import fcntl
import os
import threading

from crossmodalrag.index.embeddings import _embed_backlog, embed_missing, vector_status
from crossmodalrag.store import open_store
from tests.fakes import HashingEmbedder
from tests.retrieval.helpers import add_docs, note


def test_a_second_embedder_waits_for_the_first_and_embeds_only_what_it_left(store, db_path) -> None:
    """`mem sync --watch` and an ingest both embedded the whole backlog, the same work twice on 2 cores."""
    embedder = HashingEmbedder()
    add_docs(store, note("alpha", "# Alpha\n\nLighthouses."), note("beta", "# Beta\n\nHarbours."))
    lock = os.open(f"{db_path}-embedding", os.O_RDWR | os.O_CREAT)  # another process embedding now
    fcntl.flock(lock, fcntl.LOCK_EX)
    waiting, reports = threading.Event(), []

    def second() -> None:
        with open_store(db_path) as other:
            reports.append(embed_missing(other, embedder, on_wait=waiting.set))

    thread = threading.Thread(target=second)
    thread.start()
    assert waiting.wait(10) and thread.is_alive()
    assert vector_status(store, embedder.identity)["embedded"] == 0  # it waits; it does not embed beside it
    with open_store(db_path) as theirs:  # the other process embeds its backlog...
        assert _embed_backlog(theirs, embedder, 32, None).chunks == 2
    add_docs(store, note("gamma", "# Gamma\n\nPiers."))  # ...and a chunk arrives after it read its last batch
    os.close(lock)  # the other process ends: its lock goes with it
    thread.join(10)
    assert reports[0].chunks == 1  # the waiter embeds only what was left
    assert vector_status(store, embedder.identity)["missing"] == 0


def test_with_no_one_else_embedding_nothing_waits(store) -> None:
    embedder = HashingEmbedder()
    add_docs(store, note("alpha", "# Alpha\n\nLighthouses."))
    waited = []
    assert embed_missing(store, embedder, on_wait=lambda: waited.append(1)).chunks == 1
    assert embed_missing(store, embedder, on_wait=lambda: waited.append(1)).chunks == 0 and not waited
