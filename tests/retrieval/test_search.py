import json
from dataclasses import replace

import pytest

from crossmodalrag.conversations import ingest_conversations
from crossmodalrag.retrieval.search import SearchOptions, search
from tests.retrieval.helpers import add_docs, note

HOSTILE = [
    '"',
    '""',
    '"unbalanced',
    "*",
    "parser*",
    "AND",
    "OR NOT",
    "a AND b OR",
    "NEAR(parser cache)",
    "NEAR(",
    "-parser",
    "title:parser",
    "body : x",
    "{title body}: x",
    "^start",
    "(((",
    ")",
    "'; DROP TABLE chunks; --",
    "\x00",
    "💥 emoji",
    "日本語の質問",
    "",
    "   ",
    "?",
    "f_1 F1 f1*",
]


def uris(result) -> list[str]:
    return [h.source_uri for h in result.hits]


@pytest.fixture
def memory(store):
    add_docs(
        store,
        note("parser", "# Parser\nWe rewrote the parser as a tokenizer because regex backtracking exploded."),
        note("cache", "# Cache\nThe render cache was dropped: stale output after config changes."),
        note("metrics", "# Metrics\n## Formulas\nF_1 = 2PR/(P+R), and recall_at_k counts gold in the top k."),
        note("diary", "# Diary\nThe the the of of and and a a a parser."),
    )
    return store


@pytest.mark.parametrize("query", HOSTILE)
def test_queries_full_of_fts_syntax_never_raise(memory, query):
    result = search(memory, query, SearchOptions())
    assert isinstance(result.hits, list)


def test_fts_operators_are_searched_as_plain_words(memory):
    found = uris(search(memory, 'parser" OR "cache', SearchOptions()))
    assert {"/vault/parser.md", "/vault/cache.md"} <= set(found)
    assert search(memory, "NEAR(tokenizer", SearchOptions()).hits[0].source_uri == "/vault/parser.md"


def test_underscore_notation_and_plain_spelling_match_each_other(memory):
    assert search(memory, "f1 formula", SearchOptions()).hits[0].source_uri == "/vault/metrics.md"
    assert search(memory, "recallatk", SearchOptions()).hits[0].source_uri == "/vault/metrics.md"
    assert search(memory, "F_1", SearchOptions()).hits[0].source_uri == "/vault/metrics.md"


def test_rare_identifiers_outweigh_function_words(memory):
    """The diary repeats common words; the note with the rare word must still win."""
    result = search(memory, "the tokenizer of the parser and a", SearchOptions())
    assert result.hits[0].source_uri == "/vault/parser.md"


def test_title_boost_adds_its_weight_for_title_matches_and_zero_disables_it(store):
    add_docs(
        store,
        note("a", "Body about quokka habits.", title="Unrelated"),
        note("b", "Body about quokka habits.", title="Quokka habits"),
    )
    options = SearchOptions(dedupe_threshold=0, recency_weight=0, title_boost_weight=0.05)
    boosted = {h.source_uri: h for h in search(store, "quokka", options).hits}
    assert boosted["/vault/b.md"].components["title"] == 1.0 and boosted["/vault/a.md"].components["title"] == 0.0
    for hit in boosted.values():
        assert hit.score == pytest.approx(0.95 * hit.components["lexical"] + 0.05 * hit.components["title"])
    plain = search(store, "quokka", SearchOptions(dedupe_threshold=0, recency_weight=0, title_boost_weight=0))
    assert all(h.score == pytest.approx(h.components["lexical"]) for h in plain.hits)


def test_recency_prefers_the_newer_of_two_equal_matches(store):
    add_docs(
        store,
        note("old", "Notes on the wombat migration.", days=0),
        note("new", "Notes on the wombat migration!", days=300),
    )
    result = search(store, "wombat migration", SearchOptions(dedupe_threshold=0, title_boost_weight=0))
    assert uris(result) == ["/vault/new.md", "/vault/old.md"]
    assert result.hits[0].components["recency"] == 1.0
    assert result.hits[1].components["recency"] == pytest.approx(0.5 ** (300 / 180))


def test_source_diversity_cap(store):
    sections = "\n\n".join(f"## Part {i}\nThe ocelot detail number {i} goes here." for i in range(6))
    add_docs(store, note("long", "# Long\n" + sections), note("other", "An ocelot once."))
    capped = search(store, "ocelot", SearchOptions(top_k=10, max_chunks_per_source=2))
    assert uris(capped).count("/vault/long.md") == 2 and "/vault/other.md" in uris(capped)
    uncapped = search(store, "ocelot", SearchOptions(top_k=10, max_chunks_per_source=0))
    assert uris(uncapped).count("/vault/long.md") == 6


def test_a_sources_second_chunk_ranks_at_a_discount(store):
    """Its better chunk stays first; the second, at 0.8 of its score, yields to another source's close
    match (0.95 of the best) but not to a far one (0.68)."""
    add_docs(
        store,
        note("long", "# Long\n## One\nThe ocelot hunts at night.\n\n## Two\nThe ocelot hunts at dusk."),
        note("close", "The ocelot hunts by the wide river."),
        note("far", "An ocelot was seen by the river, and the ranger wrote that it hunts there in the rain."),
    )
    options = SearchOptions(top_k=10, title_boost_weight=0, recency_weight=0, dedupe_threshold=0)
    plain = search(store, "ocelot hunts", replace(options, repeat_source_factor=1.0))
    spread = search(store, "ocelot hunts", options)
    second = [h for h in spread.hits if h.source_uri == "/vault/long.md"][1]
    assert second.components["repeat_factor"] == pytest.approx(0.8)
    assert second.score == pytest.approx(0.8 * next(h.score for h in plain.hits if h.chunk_id == second.chunk_id))
    assert "repeat_factor" not in spread.hits[0].components
    assert uris(plain) == ["/vault/long.md", "/vault/long.md", "/vault/close.md", "/vault/far.md"]
    assert uris(spread) == ["/vault/long.md", "/vault/close.md", "/vault/long.md", "/vault/far.md"]


def test_the_cap_counts_each_turn_of_a_conversation_on_its_own(store, tmp_path):
    """One chat session is one source of many turns; the answer often spans several of them."""
    turns = [{"speaker": "Nate", "dia_id": f"D1:{n}", "text": f"The ocelot did trick {n}."} for n in range(4)]
    conversation = {"speaker_a": "Nate", "speaker_b": "Joanna", "session_1": turns}
    export = tmp_path / "chat.json"
    export.write_text(json.dumps([{"conversation": conversation, "qa": []}]), encoding="utf-8")
    ingest_conversations(store, [export])
    sections = "\n\n".join(f"## Part {i}\nThe ocelot detail number {i} goes here." for i in range(4))
    add_docs(store, note("long", "# Long\n" + sections))
    hits = search(store, "ocelot", SearchOptions(top_k=10, max_chunks_per_source=2)).hits
    assert [h.source_type for h in hits].count("conversation") == 4
    assert [h.source_uri for h in hits].count("/vault/long.md") == 2


def test_near_duplicates_are_removed_across_sources(store):
    text = "The heron nests near the river bend every spring, says the ranger."
    add_docs(store, note("one", text), note("two", text + " "), note("three", "A heron was seen."))
    result = search(store, "heron river", SearchOptions())
    assert uris(result).count("/vault/one.md") + uris(result).count("/vault/two.md") == 1
    kept_all = search(store, "heron river", SearchOptions(dedupe_threshold=0))
    assert {"/vault/one.md", "/vault/two.md"} <= set(uris(kept_all))


def test_coverage_is_the_idf_weighted_share_of_query_terms_found(memory):
    assert search(memory, "tokenizer backtracking", SearchOptions()).coverage == pytest.approx(1.0)
    partial = search(memory, "tokenizer zanzibar", SearchOptions())
    assert 0.0 < partial.coverage < 0.5  # the unknown word carries the most weight
    assert search(memory, "zanzibar quarterly", SearchOptions()).hits == []


def test_only_stopwords_returns_nothing(memory):
    result = search(memory, "what is the of and", SearchOptions())
    assert result.hits == [] and result.coverage == 0.0


def test_lexical_component_is_normalised_to_the_best_candidate(memory):
    result = search(memory, "parser", SearchOptions(top_k=5))
    assert max(h.components["lexical"] for h in result.hits) == pytest.approx(1.0)
    assert all(0.0 <= h.components["lexical"] <= 1.0 for h in result.hits)


@pytest.fixture
def store(any_store):  # every test here runs on SQLite and on PostgreSQL (issue 16)
    return any_store
