"""Duplicate removal in a ranked pool (retrieval/ranking.py): a file stored under two paths is shown once."""

from __future__ import annotations

from crossmodalrag.config import Settings
from crossmodalrag.index.embeddings import embed_missing
from crossmodalrag.retrieval.search import SearchOptions, search
from crossmodalrag.retrieval.semantic import semantic_index
from tests.fakes import HashingEmbedder
from tests.retrieval.helpers import add_docs, note

BODY = "Rate limits: clients must back off after a 429 response. The limit is 60 requests per minute."


def test_the_same_text_under_two_file_names_is_one_piece_of_evidence(store, db_path):
    """A copied PDF or screenshot: its chunks are embedded with the file name in the heading, so the two
    vectors are further apart than the near-duplicate threshold although the text is the same."""
    embedder = HashingEmbedder()
    add_docs(
        store,
        note("papers/rate-limit-policy", f"# rate-limit-policy.pdf p.1\n{BODY}", title="rate-limit-policy.pdf"),
        note("Downloads/policy-copy", f"# policy-copy.pdf p.1\n{BODY.upper()}  ", title="policy-copy.pdf"),
        note("other", "# Other\nThe limit on uploads is 10 MB per file."),
    )
    embed_missing(store, embedder)
    index = semantic_index(store, embedder, Settings(db_path=db_path))
    everything = search(store, "rate limit per minute", SearchOptions(dedupe_threshold=0), index).hits
    copies = [h for h in everything if h.source_uri != "/vault/other.md"]
    assert len(copies) == 2 and copies[0].components["cosine"] != copies[1].components["cosine"]  # other vectors
    hits = search(store, "rate limit per minute", SearchOptions(dedupe_threshold=0.95), index).hits
    assert sum(h.source_uri != "/vault/other.md" for h in hits) == 1
