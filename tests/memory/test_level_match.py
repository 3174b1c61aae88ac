"""Which nodes a memory level matches for a question: the match gate runs before the top-N cut."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from crossmodalrag.answer.evidence import open_retriever
from crossmodalrag.config import Settings
from crossmodalrag.memory import retrieve
from crossmodalrag.memory.retrieve import MATCHED_NODES, LevelRetriever, NodeTable, words
from tests.memory.helpers import add_docs, note

QUESTION = "What did Elena ask for in the security review?"


def _unit(vector):
    return (vector / np.linalg.norm(vector)).astype(np.float32)


def _table_with_one_match_ranked_sixth() -> tuple[NodeTable, np.ndarray]:
    """Six recent, central episodes sharing no word with the question (cosine 0.30-0.40, under the
    0.55 gate) and one older episode that names Elena and the security review (cosine 0.02)."""
    rng = np.random.default_rng(0)
    question = _unit(rng.normal(size=8))

    def near(cosine: float):
        other = rng.normal(size=8)
        other -= (other @ question) * question
        return _unit(cosine * question + np.sqrt(1 - cosine * cosine) * _unit(other))

    titles = [f"unrelated episode {i}" for i in range(6)] + ["Elena security review: hashed API keys"]
    table = NodeTable(
        ids=[f"ep_{i}" for i in range(7)],
        titles=titles,
        times=[1e9 + i * 86400 * 10 for i in range(6)] + [1e9 - 86400 * 60],
        centrality=np.array([1.0] * 6 + [0.4]),
        words=[words(title) for title in titles],
        vectors=np.stack([near(0.30 + 0.02 * i) for i in range(6)] + [near(0.02)]),
    )
    return table, question


class _WithVectors(LevelRetriever):
    """A level retriever whose node ranking sees a query vector (plain search stays lexical)."""

    vector = None

    @property
    def semantic(self):
        return SimpleNamespace(
            query_vector=lambda query: self.vector,
            scores_for=lambda vector, chunks: {},
            embedder=SimpleNamespace(identity=SimpleNamespace(name="sentence-transformers/all-MiniLM-L6-v2")),
        )


@pytest.mark.parametrize("level", ["episode", "concept"])
def test_a_matching_node_ranked_below_the_cut_is_still_matched(store, db_path, monkeypatch, level) -> None:
    table, question = _table_with_one_match_ranked_sixth()
    assert MATCHED_NODES < 6  # the matching node ranks below the cut on recency and centrality
    monkeypatch.setattr(retrieve, "node_table", lambda store, level: table)
    add_docs(store, note("other", "# Other\n\nNothing to do with the question.\n"))
    base = open_retriever(store, Settings(db_path=db_path), 3, lexical_only=True)
    retriever = _WithVectors(base, level)
    retriever.vector = question
    retriever.search(QUESTION)
    assert [node["id"] for node in retriever.matched_nodes] == ["ep_6"]
