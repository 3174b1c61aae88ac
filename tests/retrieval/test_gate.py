"""The abstention gate without a model: coverage, several terms found together, similarity."""

from __future__ import annotations

from pathlib import Path

import pytest

from crossmodalrag.ingest import ingest_notes
from crossmodalrag.retrieval.search import SearchOptions, SearchResult, is_weak, search
from crossmodalrag.types import Hit
from tests.conftest import write_note

HIT = Hit(1, "uri", "note", "text", "t", "loc", "text", None)


@pytest.mark.parametrize(
    "coverage, matched, similarity, weak",
    [
        (0.6, 2, None, False),  # most of the query found
        (0.3, 3, None, False),  # a long question: three of its terms together
        (0.3, 2, None, True),  # ... but two are not enough
        (0.15, 5, None, True),  # many common words are not enough either
        (0.3, 2, 0.55, False),  # close in meaning
        (0.3, 2, 0.45, True),
    ],
)
def test_the_gate_rules(coverage, matched, similarity, weak):
    result = SearchResult([HIT], [], coverage, similarity, similarity is not None, None, {}, matched)
    assert is_weak(result, SearchOptions()) is weak


def test_no_hits_is_always_weak():
    assert is_weak(SearchResult([], [], 1.0, 0.9, True, None, {}, 9), SearchOptions())


def test_a_long_claim_whose_evidence_is_in_memory_is_answered(store, tmp_path: Path):
    write_note(
        tmp_path / "v",
        "vitamin.md",
        "# Vitamin D trial\n\nVitamin D supplements did not reduce fracture risk in older adults over five years.\n",
    )
    write_note(tmp_path / "v", "garden.md", "# Garden\n\nTomatoes need water every morning in July.\n")
    ingest_notes(store, [tmp_path / "v"])
    claim = "Vitamin D supplementation reduces the risk of hip fractures in elderly people living at home"
    result = search(store, claim, SearchOptions())
    assert result.coverage < 0.5 and result.matched_terms >= 3  # the old gate refused this
    assert not is_weak(result, SearchOptions())
    off_topic = search(store, "what did Caroline say about her adoption agency interview", SearchOptions())
    assert is_weak(off_topic, SearchOptions())
