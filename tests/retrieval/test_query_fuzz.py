"""Property tests: no user text can reach FTS5 as syntax."""

import unicodedata

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from crossmodalrag.index.fts import match_expression, phrase_expression, query_pairs, query_terms
from crossmodalrag.retrieval.search import SearchOptions, search
from tests.retrieval.helpers import add_docs, note

FTS_SYNTAX = st.sampled_from(['"', "*", "AND", "OR", "NOT", "NEAR(", ")", "(", "-", ":", "^", "{", "}", "+", " ", "_"])
QUERY = st.lists(st.one_of(st.text(max_size=12), FTS_SYNTAX), max_size=12).map("".join)


@given(QUERY)
def test_every_term_is_a_quoted_run_of_word_characters(query):
    for term in query_terms(query):
        # Combining marks stay in a word (दिल्ली): FTS5 reads them as separators, never as syntax.
        assert term.word and (term.word[0].isalnum() or term.word[0] == "_")
        assert all(ch.isalnum() or ch == "_" or unicodedata.category(ch).startswith("M") for ch in term.word)
        assert term.phrase in (f'"{term.word}"', f'"{term.word}" *')
        assert term.exact is None or term.exact.isalpha() and term.exact.isascii()
        assert term.stem is None or term.stem.isalpha()
    for pair in query_pairs(query):  # syllable pairs are quoted runs of word characters too
        assert pair.startswith("zv") and all(ch.isalnum() or ch == "_" for ch in pair)


@given(QUERY)
def test_a_phrase_is_quoted_runs_of_words(query):
    # One run, or two when the query's NFKC form differs (words are lowercased: no " OR " inside).
    expression = phrase_expression(query)
    if expression is not None:
        phrases = expression.split(" OR ")
        assert 1 <= len(phrases) <= 2
        for phrase in phrases:
            inner = phrase[1:-1]
            assert phrase[0] == phrase[-1] == '"' and inner.strip()
            assert all(ch.isalnum() or ch == " " for ch in inner)


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(QUERY)
@example("\U0002ebe1\U0002ebe1")  # a CJK run of characters Python 3.11 does not know as letters (phrase mode)
def test_search_accepts_any_text(store, query):
    if store.conn.execute("SELECT COUNT(*) FROM sources").fetchone()[0] == 0:
        add_docs(store, note("a", "# A\nsome text with NEAR and AND words, F_1 and parse_config(), 解析器 café"))
    for match in ("any", "all", "phrase"):
        search(store, query, SearchOptions(match=match))  # must not raise


def test_match_expression_shapes():
    terms = query_terms("Parser NEAR cache")
    assert match_expression(terms) == '"parser" OR "near" OR "cache"'
    assert match_expression(terms, "title") == 'title : ("parser" OR "near" OR "cache")'
    assert match_expression(terms, mode="all") == '"parser" AND "near" AND "cache"'
    german = query_terms("Wann wurde das Gebäude gebaut?")
    assert [(t.word, t.prefix) for t in german] == [("gebäude", True), ("gebaut", False)]  # 7+ letters, German


def test_a_tags_words_are_never_function_words_nor_tell_the_language():
    """README's own tag `#über` was dropped as a German function word, so the tag was never searched."""
    assert [t.word for t in query_terms("#über")] == ["über"]
    tagged = query_terms("notes tagged #über")
    assert [t.word for t in tagged] == ["notes", "tagged", "über"] and not tagged[0].stem  # read as English
    assert [t.word for t in query_terms("Notizen über Reisen")] == ["notizen", "reisen"]  # a plain über still goes


def test_cjk_queries_become_bigrams_and_accented_words_carry_their_exact_form():
    terms = query_terms("解析器为什么 quy trình bàn giao 猫")
    assert [t.word for t in terms] == ["解析", "析器", "器为", "为什", "什么", "quy", "trình", "bàn", "giao", "猫"]
    assert terms[-1].prefix  # a lone CJK character is found at the start of the bigrams
    assert terms[7].exact and terms[7].exact.startswith("zx") and terms[8].exact is None  # giao has no accent
    assert match_expression([terms[7]], mode="all") == f'("bàn" OR "{terms[7].exact}")'
    assert phrase_expression("Rate-limit 解析器!") == '"rate limit 解析 析器"'
