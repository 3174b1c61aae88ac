"""The abstention gate without a model (retrieval/gate.py): a coverage floor, and per-model cosines."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from crossmodalrag.answer.evidence import abstention_text
from crossmodalrag.config import Settings
from crossmodalrag.index.embeddings import embed_missing
from crossmodalrag.ingest import ingest_notes
from crossmodalrag.retrieval.gate import CROSS_LANGUAGE, MODEL_COSINES, Cosines, is_weak, model_cosines
from crossmodalrag.retrieval.languages import different_languages
from crossmodalrag.retrieval.search import SearchOptions, SearchResult, search
from crossmodalrag.retrieval.semantic import semantic_index
from crossmodalrag.types import Hit
from tests.conftest import write_note
from tests.fakes import HashingEmbedder
from tests.retrieval.helpers import add_docs, note

HIT = Hit(1, "uri", "note", "text", "t", "loc", "text", None)


def result(coverage: float, similarity: float | None = None, model: str | None = None, matched: int = 1):
    return SearchResult([HIT], [], coverage, similarity, similarity is not None, None, {}, matched, model)


@pytest.mark.parametrize(
    "coverage, weak",
    [
        (0.6, False),  # most of the question found
        (0.12, False),  # a short paraphrased question: one rare term is often all it shares
        (0.05, True),  # shares (almost) nothing: only a common word or two
        (0.0, True),
    ],
)
def test_without_vectors_only_evidence_sharing_almost_nothing_is_refused(coverage, weak):
    assert is_weak(result(coverage), SearchOptions()) is weak


def test_no_hits_is_always_weak():
    assert is_weak(SearchResult([], [], 1.0, 0.9, True, None, {}, 9, "model"), SearchOptions())


def test_each_model_is_judged_on_its_own_cosine_scale(monkeypatch):
    monkeypatch.setitem(MODEL_COSINES, "narrow", Cosines(floor=0.2, close=0.5))  # e.g. MiniLM
    monkeypatch.setitem(MODEL_COSINES, "wide", Cosines(floor=0.75, close=0.85))  # e.g. e5: all pairs are high
    assert not is_weak(result(0.0, 0.6, "narrow"), SearchOptions())  # close in meaning, no words shared
    assert is_weak(result(0.9, 0.6, "wide"), SearchOptions())  # words match, but below this model's floor
    assert is_weak(result(0.9, 0.19, "narrow"), SearchOptions())
    assert not is_weak(result(0.1, 0.75, "wide"), SearchOptions())  # at the floor, some words: answered
    assert is_weak(result(0.05, 0.84, "wide"), SearchOptions())  # few words and not close enough


def test_a_passage_holding_every_word_of_the_question_is_not_refused_for_its_cosine(monkeypatch):
    """ "What area was hit by a flood?" found "My old area was hit by a nasty flood last week" at MiniLM
    cosine 0.30, under its floor of 0.36: rare words mean little to the model, the passage is the answer."""
    monkeypatch.setitem(MODEL_COSINES, "narrow", Cosines(floor=0.36, close=0.91))
    assert not is_weak(result(1.0, 0.30, "narrow"), SearchOptions())
    assert is_weak(result(0.95, 0.30, "narrow"), SearchOptions())  # a word missing: the floor refuses it
    assert is_weak(SearchResult([], [], 1.0, 0.30, True, None, {}, 1, "narrow"), SearchOptions())  # no hits


@pytest.mark.parametrize("model", sorted(MODEL_COSINES))
def test_every_fitted_model_has_a_floor_below_its_close_cosine(model):
    fitted = MODEL_COSINES[model]
    assert 0.0 <= fitted.floor < fitted.close <= 1.0


def test_settings_override_the_model_and_a_model_without_fitted_values_is_judged_by_words():
    options = SearchOptions(min_similarity=0.9, min_similarity_floor=0.3)
    assert model_cosines(options, "some/other-model") == Cosines(0.3, 0.9)
    assert model_cosines(SearchOptions(), "some/other-model") is None
    assert not is_weak(result(0.2, 0.01, "some/other-model"), SearchOptions())
    assert is_weak(result(0.01, 0.99, "some/other-model"), SearchOptions())


def test_evidence_dated_in_the_window_a_question_asks_about_is_not_refused_for_its_words(monkeypatch):
    monkeypatch.setitem(MODEL_COSINES, "narrow", Cosines(floor=0.2, close=0.5))
    dated = replace(result(0.0, 0.02, "narrow"), window=(0.0, 86400.0))
    assert is_weak(result(0.0, 0.02, "narrow"), SearchOptions()) and not is_weak(dated, SearchOptions())
    assert is_weak(replace(dated, hits=[]), SearchOptions())  # nothing dated then


def test_the_abstention_text_names_the_failing_threshold(monkeypatch):
    monkeypatch.setitem(MODEL_COSINES, "narrow", Cosines(floor=0.2, close=0.5))
    assert "0.15 similar in meaning (needs 0.20)" in abstention_text(result(0.9, 0.15, "narrow"), SearchOptions())
    assert "(needs 0.50)" in abstention_text(result(0.01, 0.3, "narrow"), SearchOptions())
    assert "0.198 similar in meaning (needs 0.200)" in abstention_text(result(0.9, 0.198, "narrow"), SearchOptions())
    assert "needs 7.5%" in abstention_text(result(0.02), SearchOptions())


def test_evidence_refused_for_its_meaning_alone_is_not_said_to_match_nothing(monkeypatch):
    """A two-step question holding 29% of its words in its closest hits was told "nothing in memory matches"."""
    monkeypatch.setitem(MODEL_COSINES, "narrow", Cosines(floor=0.37, close=0.91))
    text = abstention_text(result(0.29, 0.34, "narrow"), SearchOptions())
    assert text == (
        "No answer: found related evidence in memory, but none close enough to answer this question (the best"
        " evidence covers 29.0% of the question's terms but is only 0.34 similar in meaning (needs 0.37))."
    )
    far = abstention_text(result(0.02, 0.34, "narrow"), SearchOptions())  # shares (almost) no word either
    assert far.startswith("No answer: nothing in memory matches this question well enough (the best evidence is 0.34")


def test_a_question_in_another_language_than_its_evidence_is_judged_by_the_cross_language_cosine(monkeypatch):
    """The README's French question found its Vietnamese note first at e5 cosine 0.82, sharing no word
    with it, and was refused for missing `close` (0.93), fitted on same-language pairs."""
    monkeypatch.setitem(MODEL_COSINES, "wide", Cosines(floor=0.80, close=0.93))
    monkeypatch.setitem(CROSS_LANGUAGE, "wide", 0.78)
    across = replace(result(0.0, 0.82, "wide"), cross_language=True)
    assert is_weak(result(0.0, 0.82, "wide"), SearchOptions())  # the same language: as before
    assert not is_weak(across, SearchOptions())
    assert is_weak(replace(across, similarity=0.76), SearchOptions())
    assert "in another language and 0.76 similar in meaning (needs 0.78)" in abstention_text(
        replace(across, similarity=0.76), SearchOptions()
    )
    assert is_weak(replace(across, embed_model="narrow"), SearchOptions())  # a model without a fitted value


@pytest.mark.parametrize(
    "question, evidence, different",
    [
        ("quel est le processus de passation ?", "Quy trình bàn giao dự án cho khách hàng gồm ba bước", True),
        ("When will the heating be replaced?", "Der Hausmeister sagte, dass die Heizung ersetzt wird.", True),
        ("猫はどこ？", "我和小王去公园看了猫。", True),
        ("Who is booking the hotel in Sochi?", "Алёна забронировала гостиницу в Сочи.", True),
        ("When is the hotel in Сочи booked?", "We booked the hotel in Sochi for two weeks.", False),
        ("Sochi hotel", "Алёна забронировала гостиницу в Сочи.", True),
        ("Sochi hotel", "We booked the hotel for two weeks.", False),  # no function word: unknown
        ("¿Cómo se hace una tarta de manzana?", "La tarta se hace con manzanas y azúcar.", False),
    ],
)
def test_languages_differ_by_script_or_by_function_words_never_by_a_guess(question, evidence, different):
    assert different_languages(question, evidence) is different


def test_a_paraphrased_question_sharing_one_rare_word_is_answered(store, tmp_path: Path):
    write_note(
        tmp_path / "v",
        "vitamin.md",
        "# Vitamin D trial\n\nVitamin D supplements did not reduce fracture risk in older adults over five years.\n",
    )
    for name, text in DISTRACTORS.items():
        write_note(tmp_path / "v", f"{name}.md", f"# {name.title()}\n\n{text}\n")
    ingest_notes(store, [tmp_path / "v"])
    found = search(store, "Did the pills lower fracture rates among seniors?", SearchOptions())
    assert found.matched_terms == 1 and found.hits[0].source_uri.endswith("vitamin.md")
    assert not is_weak(found, SearchOptions())  # the gate before calibration refused this (coverage < 0.5)
    off_topic = search(store, "what did Caroline say about her adoption agency interview", SearchOptions())
    assert is_weak(off_topic, SearchOptions())


DISTRACTORS = {
    "garden": "Tomatoes need water every morning in July.",
    "bike": "The bike needs new brakes and tyres before the trip.",
    "release": "The parser release moved to Friday after the review.",
    "kitchen": "Bake the bread for forty minutes and let it cool.",
    "travel": "The train to Lyon leaves at nine from platform four.",
}


def test_a_chinese_question_word_covers_nothing(store):
    # 什么时候 ("when") is 什么 么时 时候: a cat's vaccine note that asks it too covered 16% of a roof question.
    add_docs(store, note("cat", "# 猫的疫苗\n我的猫咪小白什么时候需要打狂犬疫苗？上次是2025年3月打的。"))
    off_topic = search(store, "屋顶什么时候修好的？", SearchOptions())
    assert off_topic.coverage == 0.0 and is_weak(off_topic, SearchOptions())
    assert not is_weak(search(store, "小白什么时候打疫苗？", SearchOptions()), SearchOptions())


def test_a_vietnamese_word_typed_with_accents_is_not_covered_by_another_languages_word_without_them(store):
    add_docs(
        store,
        note("de", "# Wartungsvertrag\nNächste Prüfung der Wärmepumpe: 14. Mai 2026."),
        note("es", "# Ventas\nJosé dirige el equipo de ventas."),
    )
    assert search(store, "Khi nào mái nhà được sửa?", SearchOptions()).coverage == 0.0  # mái (roof) is no Mai
    assert search(store, "Anh José làm việc ở đâu?", SearchOptions()).coverage > 0.1  # José: spelled alike


def test_the_gate_judges_the_same_evidence_whatever_top_k_shows(store, db_path):
    # The closest passage in meaning shares no word; the second shares one: the gate read only the first
    # at --top-k 1 and refused, and answered at --top-k 2.
    embedder = HashingEmbedder(
        synonyms={"rooftop": "roof", "mended": "repaired", "tiles": "roof", "then": "when", "that": "the", "day": "was"}
    )
    add_docs(
        store,
        note("meaning", "# Rooftop\nThen rooftop tiles mended that day.", days=10),
        note("word", "# Kitchen\nPlumber Anders finally repaired our sink, hose, tap and drain on Monday morning."),
    )
    embed_missing(store, embedder)
    semantic = semantic_index(store, embedder, Settings(db_path=db_path))
    results = [search(store, "When was the roof repaired?", SearchOptions(top_k=k), semantic) for k in (1, 2, 5)]
    assert [len(r.hits) for r in results] == [1, 2, 2] and results[0].hits[0].source_uri.endswith("meaning.md")
    assert {(r.coverage, r.similarity, is_weak(r, SearchOptions())) for r in results} == {
        (results[1].coverage, results[1].similarity, False)
    }
