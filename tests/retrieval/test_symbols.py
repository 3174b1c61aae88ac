"""Questions made only of emoji or symbols (retrieval/symbols.py): FTS5 reads them as separators, so
they are matched by substring, on SQLite and on PostgreSQL alike."""

from __future__ import annotations

import json

import pytest

from crossmodalrag.cli.main import main
from crossmodalrag.config import Settings
from crossmodalrag.index.embeddings import embed_missing
from crossmodalrag.retrieval import symbols
from crossmodalrag.retrieval.search import SearchOptions, is_weak, search
from crossmodalrag.retrieval.semantic import semantic_index
from crossmodalrag.store import open_store
from tests.fakes import HashingEmbedder
from tests.retrieval.helpers import add_docs, note

NOTES = (
    note("launch", "# Launch\n\nThe 🚀 launch party is on Friday. Bring 🍕.", days=0),
    note("brand", "# Brand\n\nAcme™ costs 5€ a seat. ⚠️ Mind the ★ rating; the trip is to 🇫🇷.", days=1),
    note("stack", "# Stack\n\nThe service was rewritten in C# last year; the old one was C++.", days=2),
    note("other", "# Other\n\nNothing here but plain words about a party.", days=3),
)


@pytest.fixture
def store(any_store):  # every test here runs on SQLite and on PostgreSQL (issue 16)
    add_docs(any_store, *NOTES)
    return any_store


def asked(capsys, question: str, *flags: str) -> dict:
    assert main(["ask", question, "--no-llm", "--json", *flags]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize(
    "question, note_name",
    [
        ("🚀", "launch"),
        ("€", "brand"),
        ("™", "brand"),
        ("⚠️", "brand"),
        ("🇫🇷", "brand"),
        ("what is C#?", "stack"),
        ("c++", "stack"),
    ],
)
def test_a_question_of_symbols_alone_finds_the_note_holding_them(store, capsys, question, note_name):
    answer = asked(capsys, question)
    assert not answer["abstained"] and answer["match_coverage"] == 1.0
    assert [e["source_uri"] for e in answer["evidence"]] == [f"/vault/{note_name}.md"]


def test_in_mode_all_every_symbol_must_be_held(store, capsys):
    assert {e["source_uri"] for e in asked(capsys, "🚀 ★")["evidence"]} == {"/vault/launch.md", "/vault/brand.md"}
    assert asked(capsys, "🚀 ★", "--match", "all")["abstained"]
    assert [e["source_uri"] for e in asked(capsys, "🚀 🍕", "--match", "all")["evidence"]] == ["/vault/launch.md"]


def test_the_filters_apply_to_the_symbols_scan(store, capsys):
    assert [e["source_uri"] for e in asked(capsys, "🍕", "--before", "2025-01-02")["evidence"]] == ["/vault/launch.md"]
    assert asked(capsys, "🍕", "--after", "2025-01-02")["evidence"] == []


@pytest.mark.parametrize("question", ['"*" AND (', "+", "<>", "C", "#", "🌵"])
def test_operators_punctuation_and_absent_symbols_still_get_the_clean_refusal(store, capsys, question):
    answer = asked(capsys, question)
    assert answer["abstained"] and answer["abstention_reason"] == "weak_retrieval" and answer["evidence"] == []
    assert capsys.readouterr().err == ""


def test_the_scan_stops_at_its_bounds(store, monkeypatch):
    options = SearchOptions(min_candidates=1, top_k=1)
    monkeypatch.setattr(symbols, "MAX_MATCHES", 1)
    assert [h.source_uri for h in search(store, "★", options).hits] == ["/vault/brand.md"]
    monkeypatch.setattr(symbols, "SCAN_CHUNKS", 2)  # the newest two chunks: stack and other
    assert search(store, "★", options).hits == []


def test_with_vectors_a_symbol_held_is_answered_however_far_in_meaning(db_path):
    with open_store(db_path) as lite:
        add_docs(lite, *NOTES)
        embedder = HashingEmbedder()
        embed_missing(lite, embedder)
        # A floor no cosine reaches: only evidence holding every symbol of the question passes the gate.
        options = SearchOptions(min_similarity_floor=1.5)
        result = search(lite, "🚀", options, semantic_index(lite, embedder, Settings(db_path=db_path)))
        assert result.hits[0].source_uri == "/vault/launch.md" and result.hits[0].components["bm25"] == 1.0
        assert result.coverage == 1.0 and not is_weak(result, options)


@pytest.mark.parametrize(
    "question, needles",
    [
        ("🚀", ["🚀"]),
        ("⚠️ ⚠", ["⚠"]),  # drawn as an emoji or not, the same symbol
        ("🇫🇷", ["🇫🇷"]),
        ("™", ["™"]),  # NFKC would make it the word "tm"
        ("C++? and F#", ["c++", "f#"]),
        ("🍕 party", []),  # the word finds it
        ("+ * $ <=", []),  # ASCII symbols are operators and code
        ("", []),
    ],
)
def test_symbol_query(question, needles):
    assert symbols.symbol_query(question) == needles
