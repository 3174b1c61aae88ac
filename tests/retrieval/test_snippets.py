"""An excerpt starts where the query's words are (retrieval/snippets.py)."""

from __future__ import annotations

from crossmodalrag.answer.evidence import ask_without_llm, open_retriever
from crossmodalrag.ingest import ingest_notes
from crossmodalrag.retrieval.snippets import focus
from crossmodalrag.types import excerpt, flat_body
from tests.conftest import write_note

FILLER = "The weekly review covered the budget, the roadmap and the hiring plan. " * 8


def test_the_excerpt_shows_the_match_at_the_end_of_a_long_chunk(store, settings, tmp_path):
    write_note(tmp_path / "v", "trip.md", f"# Trip\n\n{FILLER}Then we bought a hippogriff saddle in Tromsø.\n")
    ingest_notes(store, [tmp_path / "v"])
    answer = ask_without_llm(
        open_retriever(store, settings, lexical_only=True), "Where did we buy the hippogriff saddle?"
    )
    shown = answer.to_dict()["evidence"][0]["excerpt"]
    assert shown.startswith("… ") and "hippogriff saddle in Tromsø." in shown and len(shown) <= 284


def test_the_top_is_kept_when_it_shows_as_many_words_and_accents_and_forms_fold():
    body = flat_body(f"crumb\nRotation of the staging key: monthly. {FILLER}")
    assert focus(body, "how often does the staging key rotate?", 280) == 0
    far = flat_body(f"crumb\n{FILLER}Le café a fermé.")
    assert excerpt(f"crumb\n{FILLER}Le café a fermé.", start=focus(far, "cafe ferme", 280)).endswith("Le café a fermé.")
    assert focus(far, "the and of", 280) == 0  # function words point nowhere
