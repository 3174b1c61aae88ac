"""Property tests: no user text can reach FTS5 as syntax."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crossmodalrag.index.fts import match_expression, query_terms
from crossmodalrag.retrieval.search import SearchOptions, search
from tests.retrieval.helpers import add_docs, note

FTS_SYNTAX = st.sampled_from(['"', "*", "AND", "OR", "NOT", "NEAR(", ")", "(", "-", ":", "^", "{", "}", "+", " ", "_"])
QUERY = st.lists(st.one_of(st.text(max_size=12), FTS_SYNTAX), max_size=12).map("".join)


@given(QUERY)
def test_every_term_is_a_quoted_run_of_word_characters(query):
    for term in query_terms(query):
        assert term.word and all(ch.isalnum() or ch == "_" for ch in term.word)
        assert term.phrase == f'"{term.word}"'


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(QUERY)
def test_search_accepts_any_text(store, query):
    if store.conn.execute("SELECT COUNT(*) FROM sources").fetchone()[0] == 0:
        add_docs(store, note("a", "# A\nsome text with NEAR and AND words, F_1 and parse_config()"))
    search(store, query, SearchOptions())  # must not raise


def test_match_expression_shapes():
    terms = query_terms("Parser NEAR cache")
    assert match_expression(terms) == '"parser" OR "near" OR "cache"'
    assert match_expression(terms, "title") == 'title : ("parser" OR "near" OR "cache")'
